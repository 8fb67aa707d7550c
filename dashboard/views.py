"""The home page: what is being scored now, the latest results and the top of each board,
the signed-in user's own runs, and empty states that say what to do first."""

from __future__ import annotations

from typing import Any

from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django_htmx.http import HTMX_STOP_POLLING

from dashboard import selectors
from packs import access as pack_access


@require_GET
@pack_access.browse_view
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    any_runs = selectors.any_run_visible(user)
    context: dict[str, Any] = {
        "now": selectors.now_running(user),
        "latest": selectors.latest_results(user) if any_runs else [],
        "boards": selectors.board_tops(user) if any_runs else [],
        "mine": selectors.my_runs(user),
        "any_runs": any_runs,
        **_catalogue(user),
    }
    if not any_runs:
        context["reference_versions"] = selectors.reference_candidates(user)
    return render(request, "dashboard/home.html", context)


@require_GET
@pack_access.browse_view
def now_running(request: HttpRequest) -> HttpResponse:
    """The "Now running" section alone, polled every few seconds while anything runs."""
    now = selectors.now_running(request.user)
    response = render(request, "dashboard/home.html#now-running", {"now": now})
    if not now.anything:
        response.status_code = HTMX_STOP_POLLING
    return response


def _catalogue(user: Any) -> dict[str, Any]:
    """The counters and the packs uploaded lately, of what this user may see."""
    versions = pack_access.visible_versions(user)
    return {
        "pack_count": pack_access.visible_packs(user).count(),
        "version_count": versions.count(),
        "task_count": versions.aggregate(tasks=Sum("task_count"))["tasks"] or 0,
        "recent_versions": versions.select_related("pack", "uploaded_by").order_by("-uploaded_at")[
            :5
        ],
    }
