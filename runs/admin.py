"""Read-only admin for runs and the audit log. Privileged data never appears here: no verifier
output (stdout, stderr) or details dict of a task result, and no candidate content at all
(candidates are not registered; oracle candidates are reference solutions). The audited
debug-mode panels are the only way to them."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from packs.admin import ReadOnlyAdmin
from runs.models import AuditEvent, Evaluation, Run, TaskResult


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "agent_name", "contract_version", "origin", "submitted_by", "created_at"]
    list_filter = ["origin", "source"]
    search_fields = ["agent_name", "model_name"]
    list_select_related = ["contract_version__pack", "submitted_by"]
    fields = [
        "contract_version",
        "agent_name",
        "agent_version",
        "model_name",
        "notes",
        "source",
        "origin",
        "submitted_by",
        "created_at",
        "submitted_at",
        "candidate_count",
        "usage",
        "over_budget",
        "budget_notes",
    ]


@admin.register(Evaluation)
class EvaluationAdmin(ReadOnlyAdmin):
    list_display = ["run", "number", "evaluator", "status", "score", "created_at", "finished_at"]
    list_filter = ["status"]
    list_select_related = ["run"]
    # A run-scope program's log and problem may quote the evaluation's sealed data:
    # privileged (debug mode, audited), never in the admin.
    exclude = ["family_summary", "program_outcome", "program_log"]


@admin.register(TaskResult)
class TaskResultAdmin(ReadOnlyAdmin):
    list_display = ["id", "evaluation", "task", "status", "failure_reason", "attempts"]
    list_filter = ["status", "queue"]
    list_select_related = ["evaluation", "task"]
    show_full_result_count = False
    # Never stdout, stderr, details or the candidate: privileged (debug mode, audited).
    fields = [
        "evaluation",
        "task",
        "family",
        "position",
        "queue",
        "status",
        "score",
        "failure_reason",
        "duration_seconds",
        "sandbox_backend",
        "sandbox_image",
        "attempts",
        "worker",
        "dispatched_at",
        "started_at",
        "finished_at",
    ]

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).defer("stdout", "stderr", "details")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "username", "action", "pack_id", "task_id", "resource"]
    list_filter = ["action"]
    search_fields = ["username", "pack_id", "task_id", "reason"]
    date_hierarchy = "created_at"
