"""Read-only admin for packs. Non-public values are never shown here: the sealed-value table is not
registered and Resource hides its value fields."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from packs.models import ContractVersion, Pack, Resource, Task


class ReadOnlyAdmin(admin.ModelAdmin):
    # Contract versions are immutable; the upload form and import_pack are the only writers.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Pack)
class PackAdmin(ReadOnlyAdmin):
    """Read-only but for the maintainers, which admins manage here (packs.access)."""

    list_display = ["pack_id", "title", "latest_version", "created_at"]
    search_fields = ["pack_id", "title"]
    fields = ["pack_id", "title", "description", "latest_version", "created_by", "maintainers"]
    readonly_fields = ["pack_id", "title", "description", "latest_version", "created_by"]
    filter_horizontal = ["maintainers"]

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.has_perm("packs.change_pack")


@admin.register(ContractVersion)
class ContractVersionAdmin(ReadOnlyAdmin):
    list_display = ["pack", "version", "digest", "task_count", "uploaded_by", "uploaded_at"]
    list_filter = ["pack"]
    exclude = ["compile_report", "canaries"]


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ["task_id", "family", "contract_version", "position"]
    list_filter = ["family"]
    search_fields = ["task_id"]
    list_select_related = ["contract_version__pack"]
    show_full_result_count = False


@admin.register(Resource)
class ResourceAdmin(ReadOnlyAdmin):
    list_display = ["name", "lane", "kind", "size", "task"]
    list_filter = ["lane", "kind"]
    fields = ["task", "name", "lane", "kind", "size", "sha256"]
    list_select_related = ["task"]
    show_full_result_count = False
