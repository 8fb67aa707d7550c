"""One click instead of a shell: privileged users score a version's reference solutions
(an oracle run and a null run, as `manage.py submit_run --oracle` and `--null` do) from the
home page, the version page or an empty leaderboard, and land on those two runs' live state."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from packs import selectors as pack_selectors
from runs import access
from runs.models import RunSource
from runs.privileged_views import next_url
from runs.services import VersionIsDraft, reference_runs_request


@require_POST
def reference_runs_create(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    # A version this user may not see is a 404, as everywhere else.
    contract_version = pack_selectors.visible_version_get(pack_id, version, user=request.user)
    if not access.can_score_references(request.user, contract_version.pack):
        raise PermissionDenied(
            "Scoring the reference solutions needs privileged access to this pack "
            "(reviewer, pack maintainer or admin)."
        )
    back = next_url(request, fallback=reverse("packs:version", args=[pack_id, version]))
    try:
        oracle, null = reference_runs_request(
            contract_version, source=RunSource.FORM, user=request.user
        )
    except VersionIsDraft as refused:
        messages.error(request, f"Not scored: {refused}.")
        return redirect(back)
    # Land on exactly the runs just made, with their live state, never on a page whose message
    # would soon contradict it: the message says what was asked, the list says where it is.
    messages.success(
        request,
        f"Asked for the reference runs of {pack_id} v{version}: oracle run #{oracle.pk} and "
        f"null run #{null.pk}. Reference runs are listed on the leaderboard, never ranked.",
    )
    return redirect(f"{reverse('runs:list')}?runs={oracle.pk},{null.pk}")
