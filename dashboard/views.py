"""The home page: what is being scored now, the latest results and the top of each board,
the signed-in user's own runs, and empty states that say what to do first; and the guides of
docs/ as pages (dashboard.guides)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.db.models import Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django_htmx.http import HTMX_STOP_POLLING

from dashboard import guides, selectors
from packs import access as pack_access
from packs.internal import internal
from runs.state import one_moment


@require_GET
@pack_access.browse_view
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    # The runs' states of one moment (runs.state): "Now running" and "My runs" agree.
    with one_moment():
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
    """The "Now running" section, polled every few seconds while anything runs, with "My
    runs" out of band: both from the same moment, so they never disagree."""
    with one_moment():
        now = selectors.now_running(request.user)
        context = {"now": now, "mine": selectors.my_runs(request.user), "oob": True}
        response = render(request, "dashboard/home.html#now-running", context)
    if not now.anything:
        response.status_code = HTMX_STOP_POLLING
    return response


def _catalogue(user: Any) -> dict[str, Any]:
    """The counters and the packs uploaded lately, of what this user may see."""
    # The site's own packs (the canary) are counted and listed on /operations/ only.
    versions = pack_access.visible_versions(user).exclude(internal("pack__"))
    return {
        "pack_count": pack_access.visible_packs(user).exclude(internal()).count(),
        "version_count": versions.count(),
        "task_count": versions.aggregate(tasks=Sum("task_count"))["tasks"] or 0,
        "recent_versions": versions.select_related("pack", "uploaded_by").order_by("-uploaded_at")[
            :5
        ],
    }


# The guides are the project's own documentation, the same text as the repository's docs/:
# open to anyone, signed in or not, so a newcomer can read them before an account exists.
@require_GET
@login_not_required
def guide_index(request: HttpRequest) -> HttpResponse:
    """The guides of docs/, one per reader."""
    return render(request, "dashboard/guides.html", {"guides": guides.all_guides()})


@require_GET
@login_not_required
def guide_page(request: HttpRequest, name: str) -> HttpResponse:
    """One guide, rendered, with its sections listed beside it (404 for any other name)."""
    found = guides.guide(name)
    if found is None:
        raise Http404(f"There is no guide {name!r}.")
    return render(request, "dashboard/guide.html", {"guide": found, "guides": guides.all_guides()})
