"""Evaluation API (v1): the declaration, digests and file list of uploaded evaluations, and
uploading one. Never a program's or its sealed data's contents."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations import access, selectors
from evaluations.forms import EvaluationUploadForm
from evaluations.models import EvaluationDefinition
from evaluations.services import evaluation_import_upload
from packs.api import UploadRejectedSerializer
from packs.forms import too_large_message
from packs.services import UploadRejected
from packs.uploads import cap_uploads, upload_declared_too_large, upload_was_too_large


class MetricSerializer(serializers.Serializer):
    name = serializers.CharField()
    direction = serializers.ChoiceField(["higher", "lower"], help_text="which way is better")
    range = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="[min, max]; null: unbounded"
    )
    primary = serializers.BooleanField()
    pass_at = serializers.FloatField(allow_null=True, required=False)


class TargetSerializer(serializers.Serializer):
    pack = serializers.CharField(source="pack_id")
    versions = serializers.ListField(
        child=serializers.IntegerField(), allow_null=True, help_text="null: every version"
    )


class FileSerializer(serializers.Serializer):
    role = serializers.ChoiceField(["program", "sealed"])
    path = serializers.CharField(help_text="relative to program/ or sealed/")
    size = serializers.IntegerField()
    sha256 = serializers.CharField()


class EvaluationSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="id@version")
    name = serializers.CharField()
    version = serializers.IntegerField()
    digest = serializers.CharField()
    title = serializers.CharField()
    scope = serializers.CharField()
    primary_metric = serializers.CharField()
    metrics = serializers.SerializerMethodField()
    scores = TargetSerializer(source="targets", many=True)
    uploaded_at = serializers.DateTimeField()
    url = serializers.SerializerMethodField()
    page_url = serializers.SerializerMethodField()

    @extend_schema_field(MetricSerializer(many=True))
    def get_metrics(self, definition: EvaluationDefinition) -> list[dict[str, Any]]:
        return list(definition.manifest.get("metrics", []))

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, definition: EvaluationDefinition) -> str:
        path = reverse("api-evaluation", args=[definition.name, definition.version])
        return self.context["request"].build_absolute_uri(path)

    @extend_schema_field(OpenApiTypes.URI)
    def get_page_url(self, definition: EvaluationDefinition) -> str:
        path = reverse(
            "evaluations:detail", kwargs={"name": definition.name, "version": definition.version}
        )
        return self.context["request"].build_absolute_uri(path)


class EvaluationDetailSerializer(EvaluationSerializer):
    description = serializers.CharField()
    declaration = serializers.JSONField(
        source="manifest", help_text="evaluation.yaml as parsed (public)"
    )
    files = FileSerializer(many=True)
    uploaded_by = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.STR)
    def get_uploaded_by(self, definition: EvaluationDefinition) -> str | None:
        user = definition.uploaded_by
        return user.get_username() if user is not None else None


class EvaluationListApi(APIView):
    pagination_class = PageNumberPagination
    parser_classes = [MultiPartParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Session authentication's CSRF check reads the body; the cap must be in place first.
        if request.method == "POST" and not upload_declared_too_large(request._request):
            cap_uploads(request._request)
        super().initial(request, *args, **kwargs)

    @extend_schema(
        operation_id="evaluations_list",
        parameters=[
            OpenApiParameter("pack", str, description="only those that score this pack id")
        ],
        responses=EvaluationSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        paginator = PageNumberPagination()
        definitions = selectors.definition_list(
            user=request.user, pack=request.query_params.get("pack", "")[:100]
        )
        page = paginator.paginate_queryset(definitions, request, view=self)
        data = EvaluationSerializer(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)

    class EvaluationUploadDoc(serializers.Serializer):
        archive = serializers.FileField(
            help_text="The evaluation folder (evaluation.yaml, program/, sealed/) as a .zip or "
            ".tar.gz."
        )

    @extend_schema(
        operation_id="evaluations_create",
        request={"multipart/form-data": EvaluationUploadDoc},
        responses={
            200: OpenApiResponse(
                EvaluationDetailSerializer, description="Already stored with the same content."
            ),
            201: EvaluationDetailSerializer,
            400: OpenApiResponse(
                UploadRejectedSerializer,
                description="Form errors, or the evaluation's problems (file, line, field): "
                "nothing was stored.",
            ),
            403: OpenApiResponse(
                description="Only maintainers of a pack, reviewers and admins add evaluations."
            ),
            409: OpenApiResponse(
                UploadRejectedSerializer, description="This key is stored with other content."
            ),
            413: OpenApiResponse(description="The upload is over the size limit."),
        },
    )
    def post(self, request: Request) -> Response:
        if not access.can_upload_evaluation(request.user):
            raise PermissionDenied(
                "Evaluations are added by the maintainers of the packs they score, reviewers "
                "and admins."
            )
        if upload_declared_too_large(request._request):
            return Response({"detail": too_large_message()}, status=413)
        form = EvaluationUploadForm(request.POST, request.FILES)
        if upload_was_too_large(request._request):
            return Response({"detail": too_large_message()}, status=413)
        if not form.is_valid():
            return Response({"errors": form.errors.get_json_data()}, status=400)
        try:
            outcome = evaluation_import_upload(
                archive=form.cleaned_data["archive"], uploaded_by=request.user
            )
        except UploadRejected as rejected:
            return Response(
                rejected.as_json(),
                status=status.HTTP_409_CONFLICT if rejected.conflict else 400,
            )
        body = EvaluationDetailSerializer(outcome.definition, context={"request": request}).data
        body = {**body, "created": outcome.created, "message": outcome.message}
        return Response(body, status=201 if outcome.created else 200)


class EvaluationDetailApi(APIView):
    @extend_schema(operation_id="evaluation_detail", responses=EvaluationDetailSerializer)
    def get(self, request: Request, name: str, version: int) -> Response:
        definition = selectors.definition_get(name, version, user=request.user)
        return Response(EvaluationDetailSerializer(definition, context={"request": request}).data)
