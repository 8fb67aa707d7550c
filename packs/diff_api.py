"""`GET /api/v1/packs/{id}/diff/?from=N&to=M`: the version diff of packs.diff as JSON.

Public values where a side is public; for the evaluation-inputs and hidden lanes and for
eval-root files only lanes, kinds, sha256 digests and counts (packs.diff never reads a
sealed value, so there is none to leak)."""

from __future__ import annotations

from django.core.paginator import EmptyPage, Paginator
from django.http import Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from packs import selectors
from packs.diff import version_diff
from packs.models import ContractVersion

CHANGED_TASKS_PER_PAGE = 100


class RuleOutput(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    text = serializers.CharField()


class FieldChangeOutput(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    impact = serializers.CharField(help_text="breaking, wording or neutral")
    rule = serializers.CharField(help_text="id of the rule that classified it")
    note = serializers.CharField()


class FileEntryOutput(serializers.Serializer):
    path = serializers.CharField()
    status = serializers.CharField()
    sha_before = serializers.CharField(allow_null=True)
    sha_after = serializers.CharField(allow_null=True)


class FilesChangeOutput(serializers.Serializer):
    root = serializers.CharField(help_text="public, or eval (sealed: no paths)")
    added = serializers.IntegerField()
    removed = serializers.IntegerField()
    changed = serializers.IntegerField()
    digest_before = serializers.CharField(allow_null=True)
    digest_after = serializers.CharField(allow_null=True)
    entries = FileEntryOutput(many=True, help_text="public files only")


class ResourceChangeOutput(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.CharField(help_text="added, removed or changed")
    lane_before = serializers.CharField(allow_null=True)
    lane_after = serializers.CharField(allow_null=True)
    sha256_before = serializers.CharField(source="sha_before", allow_null=True)
    sha256_after = serializers.CharField(source="sha_after", allow_null=True)
    impact = serializers.CharField()
    rule = serializers.CharField()
    note = serializers.CharField()
    files = FilesChangeOutput(allow_null=True)
    public_before = serializers.JSONField(
        allow_null=True, help_text="the value, only when public in the older version"
    )
    public_after = serializers.JSONField(
        allow_null=True, help_text="the value, only when public in the newer version"
    )


class TaskChangeOutput(serializers.Serializer):
    task_id = serializers.CharField()
    impact = serializers.CharField()
    rule = serializers.CharField()
    parts = serializers.ListField(child=serializers.CharField())
    family_before = serializers.CharField()
    family_after = serializers.CharField()
    setup = FieldChangeOutput(many=True, help_text="family, environment, metadata")
    resources = ResourceChangeOutput(many=True)


class TaskRefOutput(serializers.Serializer):
    task_id = serializers.CharField()
    family = serializers.CharField()


class VersionDiffOutput(serializers.Serializer):
    pack = serializers.CharField()
    from_version = serializers.IntegerField()
    from_digest = serializers.CharField()
    to_version = serializers.IntegerField()
    to_digest = serializers.CharField()
    comparable = serializers.BooleanField(help_text="no breaking change under the rules")
    empty = serializers.BooleanField(help_text="nothing changed but the version number")
    page_url = serializers.CharField(help_text="the diff page on the site")
    rules = RuleOutput(many=True)
    manifest = FieldChangeOutput(many=True)
    contract = FieldChangeOutput(many=True)
    tasks_added = TaskRefOutput(many=True)
    tasks_removed = TaskRefOutput(many=True)
    order_changed = serializers.BooleanField()
    files = FilesChangeOutput(many=True)
    tasks_changed_count = serializers.IntegerField()
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    tasks_changed = TaskChangeOutput(many=True, help_text="this page of changed tasks")


def _number(request: Request, name: str) -> int:
    raw = request.query_params.get(name, "")
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ValidationError({name: ["A version number of at least 1 is required."]})
    return int(raw)


def compare_url(request: Request, old: ContractVersion, new: ContractVersion) -> str:
    path = reverse("packs:compare", kwargs={"pack_id": new.pack.pack_id})
    return request.build_absolute_uri(f"{path}?from={old.version}&to={new.version}")


class VersionDiffApi(APIView):
    @extend_schema(
        operation_id="pack_version_diff",
        parameters=[
            OpenApiParameter("from", OpenApiTypes.INT, required=True, description="older side"),
            OpenApiParameter("to", OpenApiTypes.INT, required=True, description="newer side"),
            OpenApiParameter("page", OpenApiTypes.INT, required=False),
        ],
        responses=VersionDiffOutput,
    )
    def get(self, request: Request, pack_id: str) -> Response:
        old_number, new_number = _number(request, "from"), _number(request, "to")
        # A draft the user may not see is a 404 on either side, like a version never stored.
        old = selectors.visible_version_get(pack_id, old_number, user=request.user)
        new = selectors.visible_version_get(pack_id, new_number, user=request.user)
        if old.pk == new.pk:
            raise ValidationError({"to": ["Choose a version other than 'from'."]})
        page_number = request.query_params.get("page") or "1"
        if not (page_number.isascii() and page_number.isdigit()):
            raise ValidationError({"page": ["A page number is required."]})
        diff = version_diff(old, new)
        pager = Paginator(diff.tasks_changed, CHANGED_TASKS_PER_PAGE, allow_empty_first_page=True)
        try:
            page = pager.page(int(page_number))
        except EmptyPage as exc:
            raise Http404("No such page.") from exc
        body = {
            "pack": new.pack.pack_id,
            "from_version": old.version,
            "from_digest": old.digest,
            "to_version": new.version,
            "to_digest": new.digest,
            "comparable": diff.comparable,
            "empty": diff.empty,
            "page_url": compare_url(request, old, new),
            "rules": diff.rules,
            "manifest": diff.manifest,
            "contract": diff.contract,
            "tasks_added": diff.tasks_added,
            "tasks_removed": diff.tasks_removed,
            "order_changed": diff.order_changed,
            "files": diff.files,
            "tasks_changed_count": len(diff.tasks_changed),
            "page": page.number,
            "pages": pager.num_pages,
            "tasks_changed": list(page.object_list),
        }
        return Response(VersionDiffOutput(body).data)
