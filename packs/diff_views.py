"""The "what changed between two versions" page. Like every pack page it receives public
values and digests only (packs.diff); sealed before/after values are served by runs' audited
privileged view (runs.privileged_diff), which this page links to in debug mode."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from packs import access, selectors
from packs.diff import version_diff
from packs.diff_rules import MAX_CHANGED_CHARS, MIN_SIMILARITY
from packs.models import ContractVersion, Pack
from packs.pagination import paginate

CHANGED_TASKS_PER_PAGE = 50
# Added and removed task ids shown on the page (the API lists them all).
LISTED_TASK_IDS = 200


class CompareInputError(Exception):
    """A query the page cannot answer; the message is for the user."""


@dataclass(frozen=True)
class Choice:
    old: ContractVersion | None
    new: ContractVersion | None


def _version_number(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name, "").strip().lstrip("v")
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise CompareInputError(f"'{name}' must be a version number such as 2 (got {raw!r}).")
    return int(raw)


def compare_choice(request: HttpRequest, pack: Pack) -> Choice:
    """The two versions asked for, among those the user may see. Without `to`: the latest;
    without `from`: the version just before `to`. A version that does not exist, or that the
    user may not see (a draft), is a 404."""
    user = request.user
    old_number, new_number = _version_number(request, "from"), _version_number(request, "to")
    new = selectors.visible_version_get(pack.pack_id, new_number or pack.shown_version, user=user)
    if old_number is None:
        return Choice(selectors.previous_visible_version(new, user=user), new)
    old = selectors.visible_version_get(pack.pack_id, old_number, user=user)
    if old.pk == new.pk:
        raise CompareInputError(
            f"Both sides are v{old.version}: a version compared with itself has no changes. "
            "Choose two different versions."
        )
    return Choice(old, new)


@require_GET
@access.browse_view
def version_compare(request: HttpRequest, pack_id: str) -> HttpResponse:
    pack = selectors.pack_get(pack_id, user=request.user)
    versions = list(
        selectors.pack_versions(pack, user=request.user).values_list("version", flat=True)
    )
    if not versions:
        raise Http404("This pack has no versions.")
    context: dict = {
        "pack": pack,
        "versions": versions,
        "max_changed": MAX_CHANGED_CHARS,
        "min_similarity": MIN_SIMILARITY,
    }
    try:
        choice = compare_choice(request, pack)
    except CompareInputError as problem:
        context["error"] = str(problem)
        context["chosen_from"] = request.GET.get("from", "")
        context["chosen_to"] = request.GET.get("to", "")
        return render(request, "packs/version_diff.html", context, status=400)
    context["old"], context["new"] = choice.old, choice.new
    context["chosen_from"] = choice.old.version if choice.old else ""
    context["chosen_to"] = choice.new.version if choice.new else ""
    if choice.old is None or choice.new is None:
        return render(request, "packs/version_diff.html", context)
    diff = version_diff(choice.old, choice.new)
    context |= {
        "diff": diff,
        "page": paginate(request, diff.tasks_changed, CHANGED_TASKS_PER_PAGE),
        "added": diff.tasks_added[:LISTED_TASK_IDS],
        "removed": diff.tasks_removed[:LISTED_TASK_IDS],
        "more_added": max(0, len(diff.tasks_added) - LISTED_TASK_IDS),
        "more_removed": max(0, len(diff.tasks_removed) - LISTED_TASK_IDS),
        # Whether to offer "reveal before/after" once debug mode is on; the values come from
        # runs' audited privileged view, never from this page.
        "can_reveal": access.can_view_privileged(request.user, pack),
    }
    return render(request, "packs/version_diff.html", context)
