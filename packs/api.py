"""Agent-facing pack API (v1). Every response is built from the public lane only."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import FileResponse, StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from packs import selectors
from packs.agent_bundle import agent_bundle_chunks, bundle_filename
from packs.diff import previous_version
from packs.diff_api import compare_url
from packs.files import public_file_response
from packs.forms import PackUploadForm, too_large_message
from packs.models import ContractVersion, Task
from packs.services import UploadRejected, pack_import_upload
from packs.uploads import cap_uploads, upload_declared_too_large, upload_was_too_large
from verifiers.families import get_family


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": too_large_message()}, status=413)
    return drf_exception_handler(exc, context)


class PackSerializer(serializers.Serializer):
    id = serializers.CharField(source="pack_id")
    title = serializers.CharField()
    description = serializers.CharField()
    latest_version = serializers.IntegerField(
        source="shown_version", help_text="the latest version you may see"
    )
    url = serializers.SerializerMethodField()

    def get_url(self, pack) -> str:
        return self.context["request"].build_absolute_uri(
            reverse("api-pack", kwargs={"pack_id": pack.pack_id})
        )


class VersionSerializer(serializers.Serializer):
    pack = serializers.CharField(source="pack.pack_id")
    version = serializers.IntegerField()
    digest = serializers.CharField()
    state = serializers.CharField(
        help_text="published, or draft (seen by the pack's maintainers and reviewers only)"
    )
    task_count = serializers.IntegerField()
    family_counts = serializers.DictField(child=serializers.IntegerField())
    lane_counts = serializers.DictField(child=serializers.IntegerField())
    contract = serializers.JSONField()
    uploaded_at = serializers.DateTimeField()
    tasks_url = serializers.SerializerMethodField()
    agent_bundle_url = serializers.SerializerMethodField()

    def get_tasks_url(self, cv: ContractVersion) -> str:
        return self.context["request"].build_absolute_uri(
            reverse("api-tasks", kwargs={"pack_id": cv.pack.pack_id, "version": cv.version})
        )

    def get_agent_bundle_url(self, cv: ContractVersion) -> str:
        return self.context["request"].build_absolute_uri(
            reverse("api-agent-bundle", kwargs={"pack_id": cv.pack.pack_id, "version": cv.version})
        )


class PackDetailOutput(PackSerializer):
    versions = VersionSerializer(many=True)


class AgentTaskSerializer(serializers.Serializer):
    """What a harness needs for one task: its id, family, candidate kind and agent payload."""

    task_id = serializers.CharField()
    family = serializers.CharField()
    candidate_kind = serializers.SerializerMethodField()
    payload = serializers.JSONField(source="agent_payload")
    asset_urls = serializers.SerializerMethodField()

    def get_candidate_kind(self, task: Task) -> str | None:
        return get_family(task.family).candidate_kind

    def get_asset_urls(self, task: Task) -> dict[str, str]:
        request = self.context["request"]
        cv = self.context["contract_version"]
        return {
            path: request.build_absolute_uri(
                reverse("api-public-file", args=[cv.pack.pack_id, cv.version, path])
            )
            for path in self.context["asset_paths"].get(task.pk, [])
        }


class PackListApi(APIView):
    # Documents the page envelope (count/next/previous/results) and ?page in the schema.
    pagination_class = PageNumberPagination

    @extend_schema(responses=PackSerializer(many=True))
    def get(self, request: Request) -> Response:
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(
            selectors.pack_list(user=request.user, query=request.query_params.get("q", "")),
            request,
            view=self,
        )
        data = PackSerializer(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)


class PackDetailApi(APIView):
    @extend_schema(operation_id="pack_detail", responses=PackDetailOutput)
    def get(self, request: Request, pack_id: str) -> Response:
        pack = selectors.pack_get(pack_id, user=request.user)
        versions = selectors.pack_versions(pack, user=request.user).select_related("pack")
        return Response(
            {
                **PackSerializer(pack, context={"request": request}).data,
                "versions": VersionSerializer(
                    versions, many=True, context={"request": request}
                ).data,
            }
        )


class VersionDetailApi(APIView):
    @extend_schema(responses=VersionSerializer)
    def get(self, request: Request, pack_id: str, version: int) -> Response:
        cv = selectors.visible_version_get(pack_id, version, user=request.user)
        return Response(VersionSerializer(cv, context={"request": request}).data)


class VersionTasksApi(APIView):
    # Documents the page envelope (count/next/previous/results) and ?page in the schema.
    pagination_class = PageNumberPagination

    @extend_schema(responses=AgentTaskSerializer(many=True))
    def get(self, request: Request, pack_id: str, version: int) -> Response:
        cv = selectors.visible_version_get(pack_id, version, user=request.user)
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(
            selectors.version_tasks(cv).only("task_id", "family", "agent_payload"),
            request,
            view=self,
        )
        context = {
            "request": request,
            "contract_version": cv,
            "asset_paths": selectors.public_asset_paths([task.pk for task in page]),
        }
        return paginator.get_paginated_response(
            AgentTaskSerializer(page, many=True, context=context).data
        )


class AgentBundleApi(APIView):
    """The version's agent bundle (see packs.agent_bundle), streamed as it is zipped."""

    @extend_schema(
        operation_id="agent_bundle",
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
    )
    def get(self, request: Request, pack_id: str, version: int) -> StreamingHttpResponse:
        cv = selectors.visible_version_get(pack_id, version, user=request.user)
        response = StreamingHttpResponse(agent_bundle_chunks(cv), content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{bundle_filename(cv)}"'
        return response


class PublicFileApi(APIView):
    """A public asset file, for harnesses with a token (the page link needs a session)."""

    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    def get(self, request: Request, pack_id: str, version: int, path: str) -> FileResponse:
        cv = selectors.visible_version_get(pack_id, version, user=request.user)
        return public_file_response(cv, path)


class ProblemSerializer(serializers.Serializer):
    file = serializers.CharField(help_text="pack-relative file name, or 'upload'")
    line = serializers.IntegerField(allow_null=True, help_text="1-based, when known")
    field = serializers.CharField(allow_null=True, help_text='dotted path, e.g. "eval.answer"')
    message = serializers.CharField()
    excerpt = serializers.CharField(allow_null=True, help_text="the offending text, when known")
    column = serializers.IntegerField(allow_null=True, help_text="1-based, in the excerpt")


class UploadRejectedSerializer(serializers.Serializer):
    """Either form errors (`errors`) or the pack's problems (every other field)."""

    errors = serializers.DictField(required=False, help_text="form field -> errors")
    detail = serializers.CharField(required=False, help_text="one line: the count, the first")
    problems = ProblemSerializer(
        many=True, required=False, help_text="every problem found, up to the cap, in file order"
    )
    problem_count = serializers.IntegerField(required=False, help_text="all problems found")
    more_problems = serializers.IntegerField(
        required=False, help_text="problems found past the cap, not in `problems`"
    )


class PackUploadApi(APIView):
    permission_classes = [permissions.DjangoModelPermissions]
    parser_classes = [MultiPartParser]
    queryset = ContractVersion.objects.none()

    class OutputSerializer(serializers.Serializer):
        pack = serializers.CharField()
        version = serializers.IntegerField()
        digest = serializers.CharField()
        tasks = serializers.IntegerField()
        created = serializers.BooleanField()
        message = serializers.CharField()
        previous_version = serializers.IntegerField(
            allow_null=True, help_text="for a new version of an existing pack: the one before"
        )
        diff_url = serializers.CharField(
            allow_null=True, help_text="what changed since previous_version (API)"
        )
        compare_url = serializers.CharField(
            allow_null=True, help_text="what changed since previous_version (page)"
        )

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Session authentication's CSRF check reads the body; the cap must be in place first.
        if request.method == "POST" and not upload_declared_too_large(request._request):
            cap_uploads(request._request)
        super().initial(request, *args, **kwargs)

    class InputDoc(serializers.Serializer):
        archive = serializers.FileField(
            required=False, help_text="The pack folder as a .zip or .tar.gz."
        )
        manifest = serializers.FileField(required=False, help_text="manifest.yaml (no archive)")
        tasks = serializers.FileField(required=False, help_text="tasks.jsonl (no archive)")
        files = serializers.FileField(
            required=False, help_text="assets/ and hidden/ as a .zip or .tar.gz (optional)"
        )

    @extend_schema(
        request={"multipart/form-data": InputDoc},
        responses={
            200: OutputSerializer,
            201: OutputSerializer,
            400: OpenApiResponse(
                UploadRejectedSerializer,
                description="Form errors, or the pack's problems: nothing was stored.",
            ),
            409: OpenApiResponse(
                UploadRejectedSerializer, description="This version exists with other content."
            ),
            413: OpenApiResponse(description="The upload is over the size limit."),
        },
    )
    def post(self, request: Request) -> Response:
        if upload_declared_too_large(request._request):
            return Response({"detail": too_large_message()}, status=413)
        form = PackUploadForm(request.POST, request.FILES)
        if upload_was_too_large(request._request):
            return Response({"detail": too_large_message()}, status=413)
        if not form.is_valid():
            return Response({"errors": form.errors.get_json_data()}, status=400)
        try:
            outcome = pack_import_upload(uploaded_by=request.user, **form.cleaned_data)
        except UploadRejected as rejected:
            return Response(
                rejected.as_json(),
                status=status.HTTP_409_CONFLICT if rejected.conflict else 400,
            )
        cv = outcome.contract_version
        body = {
            "pack": cv.pack.pack_id,
            "version": cv.version,
            "digest": cv.digest,
            "tasks": cv.task_count,
            "created": outcome.created,
            "message": outcome.message,
            **_diff_links(request, cv, created=outcome.created),
        }
        return Response(body, status=201 if outcome.created else 200)


def _diff_links(request: Request, cv: ContractVersion, *, created: bool) -> dict[str, Any]:
    """For a new version of an existing pack, where to read what changed since the one before."""
    previous = previous_version(cv) if created else None
    if previous is None:
        return {"previous_version": None, "diff_url": None, "compare_url": None}
    api_path = reverse("api-pack-diff", kwargs={"pack_id": cv.pack.pack_id})
    query = f"?from={previous.version}&to={cv.version}"
    return {
        "previous_version": previous.version,
        "diff_url": request.build_absolute_uri(api_path + query),
        "compare_url": compare_url(request, previous, cv),
    }
