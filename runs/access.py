"""Who may see and do what with runs, built on packs.access. Every run page, partial and API
view asks these functions.

What is visible to whom:

- A run's summary, evaluations, verdict tables, scores, leaderboards and comparisons: anyone
  who may browse (packs.access.can_browse). A run still being filled through the API (not
  submitted yet) is a draft: only its creator and superusers see it; to anyone else it does
  not exist (404), in lists and by id.
- A run's *details* — its candidates — belong to the user who submitted it: they see them on
  the result pages. Nobody else does, except through the audited debug-mode panel.
- Verifier output (stdout, stderr, the full details dict) and oracle candidates (they are
  the pack's reference solutions) are privileged information of the pack: debug mode only,
  for users privileged for that pack (runs.privileged), even for the run's owner.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404

from packs import access as pack_access
from packs.internal import internal
from runs.models import CandidateOrigin, Run

SUBMIT = "runs.add_run"
REEVALUATE = "runs.add_evaluation"
VIEW_AUDIT = "runs.view_auditevent"


def visible_runs(user: Any) -> QuerySet[Run]:
    if not pack_access.can_browse(user):
        return Run.objects.none()
    if pack_access.is_member(user) and user.is_superuser:
        return Run.objects.all()
    submitted = Q(submitted_at__isnull=False)
    # A draft's runs (its health checks') are for the people who may see the draft.
    drafts_hidden = pack_access.version_visibility(user, "contract_version__")
    if pack_access.is_member(user):
        return Run.objects.filter(submitted | Q(submitted_by=user)).filter(drafts_hidden)
    return Run.objects.filter(submitted).filter(drafts_hidden)


def listed_runs(user: Any) -> QuerySet[Run]:
    """Runs a listing shows (run lists, the home page, the API's list): those the user may
    see, but neither a version's health checks (listed on its report) nor the site's own
    canary runs (on /operations/)."""
    return (
        visible_runs(user).filter(health_check=False).exclude(internal("contract_version__pack__"))
    )


def check_run_visible(user: Any, run: Run) -> None:
    if not visible_runs(user).filter(pk=run.pk).exists():
        raise Http404("No such run.")


def owns(user: Any, run: Run) -> bool:
    return (
        pack_access.is_member(user)
        and run.submitted_by_id is not None
        and run.submitted_by_id == user.pk
    )


def can_see_candidates(user: Any, run: Run) -> bool:
    """Candidates shown on result pages without debug mode: the owner's, never an oracle's."""
    return run.origin != CandidateOrigin.ORACLE and owns(user, run)


def can_view_privileged(user: Any, run: Run) -> bool:
    return pack_access.can_view_privileged(user, run.contract_version.pack)


def can_submit(user: Any) -> bool:
    return pack_access.is_member(user) and user.has_perm(SUBMIT)


def can_write(user: Any, run: Run) -> bool:
    """Add candidates to or submit a run: its creator, while they may still submit runs."""
    return can_submit(user) and owns(user, run)


def can_stop(user: Any, run: Run) -> bool:
    """Stop a live run (revoke its URL): its creator, or a superuser, who must be able to
    stop a run whose owner left or misuses it before it expires by itself."""
    return can_write(user, run) or (pack_access.is_member(user) and user.is_superuser)


def check_write(user: Any, run: Run) -> None:
    if not can_write(user, run):
        raise PermissionDenied("Only the user who created this run may change it.")


def can_reevaluate(user: Any) -> bool:
    return pack_access.is_member(user) and user.has_perm(REEVALUATE)


def can_view_audit_log(user: Any) -> bool:
    return pack_access.is_member(user) and (user.is_superuser or user.has_perm(VIEW_AUDIT))


def can_score_references(user: Any, pack: Any) -> bool:
    """Start oracle and null runs of a pack from the site (as `submit_run --oracle/--null`):
    the people who may see its reference solutions. The runs show verdicts, never the
    references themselves (can_see_candidates), and are never ranked."""
    return pack_access.can_view_privileged(user, pack)
