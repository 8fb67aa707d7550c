"""The runs app's panel on a version page (packs.hooks): its reference runs, and for the
people who may start them, the button that scores the reference solutions."""

from __future__ import annotations

from django.http import HttpRequest
from django.template.loader import render_to_string

from packs.models import ContractVersion, VersionState
from runs import access, selectors
from runs.models import CandidateOrigin

REFERENCE_RUNS_SHOWN = 4


def reference_panel(request: HttpRequest, version: ContractVersion) -> str:
    # A draft takes no run but its health checks'; the health panel speaks for it.
    if version.state != VersionState.PUBLISHED:
        return ""
    if not access.can_score_references(request.user, version.pack):
        return ""
    runs = selectors.run_list(user=request.user).filter(
        contract_version=version,
        origin__in=(CandidateOrigin.ORACLE, CandidateOrigin.NULL),
    )[:REFERENCE_RUNS_SHOWN]
    context = {"cv": version, "runs": list(runs)}
    return render_to_string("runs/_reference_panel.html", context, request=request)
