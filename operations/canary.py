"""The site's canary: a tiny built-in pack (operations/canary_pack: a multiple-choice task
and a sandboxed code task) scored on a schedule with its reference answers and with empty
ones. Every task of the first must pass and every task of the second fail; anything else
(a broken sandbox backend, a worker that lost its image, a verifier gone lax) turns it red on
the operations page and in /metrics, before any user's run shows it.

The canary keeps two runs (oracle and null), each scored again at every check: the run
lists hold two reference runs, not one pair per check.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from operations.models import CanaryCheck, CanaryVerdict
from packs import internal
from packs.models import ContractVersion, VersionState
from packs.services import pack_face_refresh, pack_import_folder
from runs.models import CandidateOrigin, Evaluation, ResultStatus, Run, RunSource, TaskResult
from runs.services import RunMetadata, evaluation_create, run_submit_reference

CANARY_PACK = Path(__file__).resolve().parent / "canary_pack"
# The pack's id is packs' to know: it keeps internal packs out of every listing.
CANARY_PACK_ID = internal.CANARY_PACK_ID
CANARY_AGENT = "site-canary"
EXPECTED = {CandidateOrigin.ORACLE: ResultStatus.PASSED, CandidateOrigin.NULL: ResultStatus.FAILED}


def canary_version() -> ContractVersion:
    """The canary pack's stored version, stored (and published: the site's own, trusted) the
    first time it is needed."""
    found = ContractVersion.objects.filter(pack__pack_id=CANARY_PACK_ID).order_by("-version")
    version = found.first()
    if version is None:
        version = pack_import_folder(folder=CANARY_PACK, source_name="built-in canary")
        version = version.contract_version
    if version.state != VersionState.PUBLISHED:
        ContractVersion.objects.filter(pk=version.pk).update(
            state=VersionState.PUBLISHED, published_at=timezone.now()
        )
        pack_face_refresh(version.pack)
    return version


def canary_start() -> CanaryCheck:
    """Score the canary once more (after settling the previous check, if it is done)."""
    canary_settle()
    version = canary_version()
    evaluations = {origin: _score_again(version, origin) for origin in EXPECTED}
    return CanaryCheck.objects.create(
        started_at=timezone.now(),
        oracle=evaluations[CandidateOrigin.ORACLE],
        null=evaluations[CandidateOrigin.NULL],
    )


def _score_again(version: ContractVersion, origin: str) -> Evaluation:
    run = (
        Run.objects.filter(contract_version=version, agent_name=CANARY_AGENT, origin=origin)
        .order_by("pk")
        .first()
    )
    if run is None:
        return run_submit_reference(
            contract_version=version,
            origin=origin,
            metadata=RunMetadata(agent_name=CANARY_AGENT),
            source=RunSource.COMMAND,
        )[1]
    return evaluation_create(run)


def canary_settle(check: CanaryCheck | None = None) -> CanaryCheck | None:
    """Give the last (or this) check its verdict once both evaluations are done."""
    check = check or CanaryCheck.objects.first()
    if check is None or check.verdict != CanaryVerdict.RUNNING:
        return check
    evaluations = {CandidateOrigin.ORACLE: check.oracle, CandidateOrigin.NULL: check.null}
    if any(e is None for e in evaluations.values()):
        return _finish(check, CanaryVerdict.WRONG, "an evaluation of this check was deleted")
    for evaluation in evaluations.values():
        evaluation.refresh_from_db()
    if not all(evaluation.is_done for evaluation in evaluations.values()):
        return check
    wrong = [
        f"{origin} {task}: {status}" + (f" ({reason})" if reason else "")
        for origin, evaluation in evaluations.items()
        for task, status, reason in TaskResult.objects.filter(evaluation=evaluation)
        .exclude(status=EXPECTED[origin])
        .values_list("task__task_id", "status", "failure_reason")
    ]
    if wrong:
        return _finish(check, CanaryVerdict.WRONG, "; ".join(wrong))
    return _finish(check, CanaryVerdict.OK, "")


def _finish(check: CanaryCheck, verdict: str, problem: str) -> CanaryCheck:
    with transaction.atomic():
        updated = CanaryCheck.objects.filter(pk=check.pk, verdict=CanaryVerdict.RUNNING).update(
            verdict=verdict, problem=problem[:2000], finished_at=timezone.now()
        )
    if updated:
        check.verdict, check.problem = verdict, problem[:2000]
    else:
        check.refresh_from_db()
    return check


@dataclass(frozen=True)
class CanaryStatus:
    """What the operations page and /metrics say of the canary: ``ok``, ``wrong``, ``running``,
    ``late`` (a check unfinished past the limit, or none started for two intervals: the
    schedule is not running) or ``off``/``none``."""

    state: str
    check: CanaryCheck | None
    age_seconds: float | None

    @property
    def alert(self) -> bool:
        return self.state in ("wrong", "late")


def canary_status(now: datetime | None = None) -> CanaryStatus:
    now = now or timezone.now()
    interval = settings.SECUREBENCH_CANARY_MINUTES
    check = canary_settle()
    if check is None:
        return CanaryStatus("off" if interval <= 0 else "none", None, None)
    age = (now - check.started_at).total_seconds()
    late_after = timedelta(seconds=settings.SECUREBENCH_CANARY_LATE_SECONDS)
    if check.verdict == CanaryVerdict.RUNNING:
        return CanaryStatus(
            "late" if now - check.started_at > late_after else "running", check, age
        )
    if interval > 0 and age > 2 * interval * 60:
        return CanaryStatus("late", check, age)
    return CanaryStatus(check.verdict, check, age)
