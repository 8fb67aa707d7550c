"""Writes of pack health: request a report, start its checks, finish it, publish a version.

A report goes queued → running → done. ``health_request`` (web or worker) stores it and sends
the start message once its transaction commits. ``health_start`` (worker) runs the static
leak audit and creates the health runs through runs.services (oracle, repeat, null, one run
per attack slot; ``Run.health_check``); the runs are scored by the ordinary pipeline. When
an evaluation of a health run finishes, ``on_evaluation_done`` sends the finish message;
``health_finish_if_done`` judges the results (pack_health.findings), stores the findings,
counts and verdict, and publishes the version when its pack publishes automatically. A beat
sweep (``health_sweep``) finishes what a lost message left and re-sends lost starts.

Every step is idempotent: the report row is locked and its status checked before any write,
so a duplicated message, the sweep and the hook can race without doubling anything.
"""

from __future__ import annotations

import logging
import traceback
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Max, OuterRef, Q, Subquery
from django.utils import timezone

from job_queue import send_job
from pack_health import hooks, selectors
from pack_health.findings import Collected, collect
from pack_health.models import (
    HealthCheck,
    HealthFinding,
    HealthReport,
    HealthRun,
    ReportStatus,
    ReportTrigger,
    ReportVerdict,
)
from packs.blobs import blob_cache
from packs.models import ContractVersion, Pack, PublishPolicy, Task, VersionState
from packs.selectors import evaluator_lanes_for_tasks
from packs.services import pack_face_refresh
from runs.models import (
    AuditAction,
    AuditEvent,
    CandidateOrigin,
    Evaluation,
    EvaluationStatus,
    RunSource,
)
from runs.services import CandidateBuild, RunMetadata, built_lines, run_submit_lines
from verifiers import adversarial, pack_findings
from verifiers.leak_audit import AuditFile, leak_findings
from verifiers.oracle import null_candidate, oracle_candidate
from verifiers.pack_findings import Finding
from verifiers.task import Candidate, TaskLanes

logger = logging.getLogger(__name__)

TASK_CHUNK = 1000
FINDING_BATCH = 500
MAX_REASON_CHARS = 2000
# A start still unfinished this long after it began died with its worker (the start task's
# hard time limit, pack_health.jobs, plus a margin): another worker may take it over.
START_TAKEOVER_SECONDS = settings.SECUREBENCH_SANDBOX_TASK_SECONDS + 120


# --- request -----------------------------------------------------------------------------------


def health_request(
    version: ContractVersion, *, trigger: str = ReportTrigger.ON_DEMAND, user: Any = None
) -> HealthReport:
    """A new health report of the version, queued; or the open one, if the version has one
    (one report runs at a time per version: a second click changes nothing)."""
    with transaction.atomic():
        # The version row is the lock that keeps report numbers and "one open" exact.
        ContractVersion.objects.select_for_update().filter(pk=version.pk).first()
        existing = selectors.open_report(version)
        if existing is not None:
            return existing
        top = version.health_reports.aggregate(top=Max("number"))["top"] or 0
        report = HealthReport.objects.create(
            contract_version=version,
            number=top + 1,
            trigger=trigger,
            requested_by=user if getattr(user, "is_authenticated", False) else None,
        )
        transaction.on_commit(lambda: _send_start(report.pk), robust=True)
    return report


def _send_start(report_id: int) -> None:
    # Lost, it is sent again by the sweep once the report has waited long enough.
    send_job("pack_health.start_health_checks", report_id)


def _send_finish(report_id: int) -> None:
    send_job("pack_health.finish_health_report", report_id)


def on_version_created(version: ContractVersion, uploaded_by: Any) -> None:
    """packs.hooks callback: every stored version gets its health checks."""
    if not settings.SECUREBENCH_HEALTH_ON_UPLOAD:
        return
    health_request(version, trigger=ReportTrigger.UPLOAD, user=uploaded_by)


def on_evaluation_done(evaluation_id: int) -> None:
    """runs.hooks callback: an evaluation of a running report's health run finished."""
    report_id = (
        HealthRun.objects.filter(
            run__evaluations__pk=evaluation_id, report__status=ReportStatus.RUNNING
        )
        .values_list("report_id", flat=True)
        .first()
    )
    if report_id is not None:
        transaction.on_commit(lambda: _send_finish(report_id), robust=True)


# --- start -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedRun:
    check: str
    origin: str
    slot: int
    lines: list[tuple[Task, Candidate]]


def health_start(report_id: int) -> bool:
    """Audit the version and create its health runs; True for the call that did."""
    if not _claim_start(report_id):
        return False  # another worker is starting it (a duplicate message), or it started
    report = HealthReport.objects.select_related("contract_version__pack").get(pk=report_id)
    version = report.contract_version
    try:
        # Reads and pure work first, outside the transaction that writes it all down.
        leaks = leak_audit(version)
        planned = plan_runs(version)
        with transaction.atomic():
            locked = HealthReport.objects.select_for_update().get(pk=report_id)
            if locked.status != ReportStatus.QUEUED:
                return False
            _store_findings(locked, leaks, [{} for _ in leaks], _task_pks(version, leaks))
            for plan in planned:
                _create_run(locked, plan)
            locked.status = ReportStatus.RUNNING
            locked.counts = {HealthCheck.LEAK: {"checked": version.task_count}}
            locked.save(update_fields=["status", "counts"])
    except Exception as exc:  # noqa: BLE001 - any fault: the report says so, never stays queued
        _fail(report_id, exc)
        return False
    health_finish_if_done(report_id)
    return True


def _claim_start(report_id: int) -> bool:
    """Mark a queued report as being started (``started_at``), unless a start is under way.

    A start left by a dead worker is taken over once the start task's hard time limit has
    passed: by then that worker was stopped, and its transaction (runs, findings) rolled back.
    """
    now = timezone.now()
    abandoned = now - timedelta(seconds=START_TAKEOVER_SECONDS)
    return bool(
        HealthReport.objects.filter(pk=report_id, status=ReportStatus.QUEUED)
        .filter(Q(started_at__isnull=True) | Q(started_at__lt=abandoned))
        .update(started_at=now)
    )


def leak_audit(version: ContractVersion) -> list[Finding]:
    """The static leak audit over the stored tasks (all lanes) and files of the version."""
    pack = version.pack
    return list(
        leak_findings(
            _stored_lanes(version),
            _audit_files(version),
            description=str(version.manifest.get("description") or pack.description or ""),
            canaries=list(version.canaries or []),
            pack_title=str(version.manifest.get("title") or pack.title or ""),
        )
    )


def _stored_lanes(version: ContractVersion) -> Iterator[TaskLanes]:
    """Every task's lanes, a chunk at a time (bounded memory for 14k-task packs)."""
    pks = list(version.tasks.order_by("position").values_list("pk", flat=True))
    for start in range(0, len(pks), TASK_CHUNK):
        chunk = list(Task.objects.filter(pk__in=pks[start : start + TASK_CHUNK]))
        lanes = evaluator_lanes_for_tasks(chunk)
        for task in sorted(chunk, key=lambda t: t.position):
            yield lanes[task.pk]


def _audit_files(version: ContractVersion) -> Iterator[AuditFile]:
    cache = blob_cache()
    for root, path, sha256 in (
        version.files.order_by("root", "path").values_list("root", "path", "sha256").iterator()
    ):
        source = cache.local_path(root, sha256)
        yield AuditFile(root=root, path=path, sha256=sha256, source=source)


def plan_runs(version: ContractVersion) -> list[PlannedRun]:
    """The candidates of every health run, from one pass over the version's lanes."""
    attacks = _AttackCache()
    builds: list[CandidateBuild] = [oracle_candidate, null_candidate]
    builds += [attacks.build(slot) for slot in range(adversarial.MAX_ATTACKS)]
    oracle, null, *attack_lines = built_lines(version, builds)
    planned = [
        PlannedRun(HealthCheck.ORACLE, CandidateOrigin.ORACLE, 0, oracle),
        PlannedRun(HealthCheck.REPEAT, CandidateOrigin.ORACLE, 0, oracle),
        PlannedRun(HealthCheck.NULL, CandidateOrigin.NULL, 0, null),
    ]
    planned += [
        PlannedRun(HealthCheck.ADVERSARIAL, CandidateOrigin.ADVERSARIAL, slot, lines)
        for slot, lines in enumerate(attack_lines)
        if lines  # a slot no family fills needs no run
    ]
    return planned


class _AttackCache:
    """Each task's attacks are built once, whichever slot asks first."""

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.attacks: list[adversarial.Attack] = []

    def build(self, slot: int) -> CandidateBuild:
        def build(lanes: TaskLanes) -> Candidate | None:
            if lanes.task_id != self.task_id:
                self.task_id, self.attacks = lanes.task_id, adversarial.attack_candidates(lanes)
            return self.attacks[slot].candidate if slot < len(self.attacks) else None

        return build


RUN_NAMES = {
    HealthCheck.ORACLE: "health check · oracle",
    HealthCheck.REPEAT: "health check · oracle again",
    HealthCheck.NULL: "health check · null",
    HealthCheck.ADVERSARIAL: "health check · attacks",
}


def _create_run(report: HealthReport, plan: PlannedRun) -> HealthRun:
    version = report.contract_version
    name = RUN_NAMES[plan.check]
    if plan.check == HealthCheck.ADVERSARIAL:
        name = f"{name} {plan.slot + 1}"
    run, _evaluation = run_submit_lines(
        contract_version=version,
        origin=plan.origin,
        lines=plan.lines,
        metadata=RunMetadata(agent_name=name, notes=f"Health report {report.number} of {version}."),
        source=RunSource.COMMAND,
        health_check=True,
    )
    return HealthRun.objects.create(report=report, run=run, check_name=plan.check, slot=plan.slot)


def _task_pks(version: ContractVersion, findings: list[Finding]) -> dict[str, int]:
    wanted = sorted({f.task_id for f in findings if f.task_id})
    found: dict[str, int] = {}
    for start in range(0, len(wanted), TASK_CHUNK):
        found.update(
            version.tasks.filter(task_id__in=wanted[start : start + TASK_CHUNK]).values_list(
                "task_id", "pk"
            )
        )
    return found


def _store_findings(
    report: HealthReport,
    findings: list[Finding],
    references: list[dict[str, Any]],
    task_pks: dict[str, int],
) -> None:
    rows = [
        HealthFinding(
            report=report,
            check_name=finding.check,
            code=finding.code[:64],
            severity=finding.severity,
            task_id=task_pks.get(finding.task_id) if finding.task_id else None,
            task_label=(finding.task_id or "")[:200],
            message=finding.message,
            evidence={**finding.evidence, **reference},
            sealed_evidence=finding.sealed_evidence,
        )
        for finding, reference in zip(findings, references, strict=True)
    ]
    HealthFinding.objects.bulk_create(rows, batch_size=FINDING_BATCH)


def _fail(report_id: int, exc: BaseException) -> None:
    """The checks could not run: the report is done with an error, never left waiting.

    The message names the fault's type only: a fault's text may quote sealed data (a value
    that failed to parse), and the report and the log are read by people who may not see it.
    """
    where = "".join(traceback.format_tb(exc.__traceback__, limit=-8))
    logger.error("health report %s failed: %s\n%s", report_id, type(exc).__name__, where)
    HealthReport.objects.filter(pk=report_id).exclude(status=ReportStatus.DONE).update(
        status=ReportStatus.DONE,
        finished_at=timezone.now(),
        error=f"The health checks could not run ({type(exc).__name__}). Check again; if it "
        "happens again, an admin finds the details in the worker's log.",
    )


# --- finish ------------------------------------------------------------------------------------


def health_finish_if_done(report_id: int) -> bool:
    """Judge a running report once every health run's evaluation is done; True for the one
    caller that did."""
    report = HealthReport.objects.filter(pk=report_id, status=ReportStatus.RUNNING).first()
    if report is None:
        return False
    own = Evaluation.objects.filter(run__health_run__report=report, number=1)
    if own.exclude(status=EvaluationStatus.DONE).exists():
        return False
    try:
        collected = collect(report)
        return _record(report_id, collected)
    except Exception as exc:  # noqa: BLE001
        _fail(report_id, exc)
        return False


def _record(report_id: int, collected: Collected) -> bool:
    with transaction.atomic():
        report = (
            HealthReport.objects.select_for_update()
            .select_related("contract_version__pack")
            .get(pk=report_id)
        )
        if report.status != ReportStatus.RUNNING:
            return False  # another caller finished it first
        _store_findings(report, collected.findings, collected.references, collected.task_pks)
        every = [*_stored_leak_findings(report), *collected.findings]
        checked = {
            **collected.checked,
            HealthCheck.LEAK: report.contract_version.task_count,
        }
        report.counts = pack_findings.check_counts(every, checked)
        report.verdict = pack_findings.report_verdict(every)
        report.timing = collected.timing
        report.status = ReportStatus.DONE
        report.finished_at = timezone.now()
        if report.verdict == ReportVerdict.NOT_CHECKED:
            # What the workers were when it could not be checked: the sweep tries again once
            # that changes (health_sweep, _rechecks_due).
            report.workers_seen = hooks.sandbox_capability() or ""
        report.save(
            update_fields=["counts", "verdict", "timing", "status", "finished_at", "workers_seen"]
        )
        _auto_publish(report)
    return True


def _stored_leak_findings(report: HealthReport) -> list[Finding]:
    rows = report.findings.filter(check_name=HealthCheck.LEAK).values_list(
        "check_name", "code", "severity", "task_label"
    )
    return [
        Finding(check=c, code=code, severity=s, task_id=label or None, message="")
        for c, code, s, label in rows
    ]


def _auto_publish(report: HealthReport) -> None:
    """A draft whose pack publishes automatically is published by a report with no failing
    check (warnings are shown on the badge, but do not hold the version back)."""
    version = report.contract_version
    if version.pack.publish_policy != PublishPolicy.AUTO or not selectors.is_clean(report):
        return
    published = ContractVersion.objects.filter(pk=version.pk, state=VersionState.DRAFT).update(
        state=VersionState.PUBLISHED, published_at=timezone.now(), published_by=None
    )
    if published:
        pack_face_refresh(version.pack)


# --- sweep ----------------------------------------------------------------------------------------


def health_sweep(*, now: Any = None) -> dict[str, int]:
    """Finish running reports whose last finish message was lost, send again the start of
    reports queued for longer than the redispatch age (a lost message, a dead worker), and
    check again the versions whose last report could not run its checks (_rechecks_due)."""
    now = now or timezone.now()
    finished = sum(
        health_finish_if_done(pk)
        for pk in HealthReport.objects.filter(status=ReportStatus.RUNNING).values_list(
            "pk", flat=True
        )
    )
    stale = now - timedelta(seconds=settings.SECUREBENCH_REDISPATCH_SECONDS)
    abandoned = now - timedelta(seconds=START_TAKEOVER_SECONDS)
    restarted = list(
        HealthReport.objects.filter(status=ReportStatus.QUEUED)
        .filter(Q(started_at__isnull=True, created_at__lt=stale) | Q(started_at__lt=abandoned))
        .values_list("pk", flat=True)
    )
    for pk in restarted:
        _send_start(pk)
    due = _rechecks_due(now)
    for report in due:
        # Idempotent: a version whose report is already open gets that one back.
        health_request(report.contract_version, trigger=ReportTrigger.RECHECK)
    return {"finished": finished, "restarted": len(restarted), "rechecked": len(due)}


# At most this many automatic re-checks in a row: a pack that kills its worker every time, or
# a host that never gets its image, stops costing work (a maintainer's "check again" and a
# new version start over).
MAX_RECHECKS = 5
RECHECK_BATCH = 50


def _rechecks_due(now: Any) -> list[HealthReport]:
    """Latest reports that are not checked because of the site, due to be checked again: a
    live worker can run sandboxed checks, and either the workers changed since the report
    finished (a worker started, an image arrived) or it has waited long enough, the wait
    doubling with each re-check in a row, and fewer than MAX_RECHECKS were made."""
    capability = hooks.sandbox_capability()
    if capability == "":
        return []  # no live worker could run them: wait for one
    base = timedelta(seconds=settings.SECUREBENCH_HEALTH_RECHECK_SECONDS)
    latest = HealthReport.objects.filter(contract_version=OuterRef("contract_version")).order_by(
        "-number"
    )
    reports = (
        HealthReport.objects.filter(status=ReportStatus.DONE, verdict=ReportVerdict.NOT_CHECKED)
        .filter(pk=Subquery(latest.values("pk")[:1]))
        .select_related("contract_version")
        .order_by("finished_at")[:RECHECK_BATCH]
    )
    due = []
    for report in reports:
        streak = _recheck_streak(report)
        if streak >= MAX_RECHECKS:
            continue
        changed = capability is not None and capability != report.workers_seen
        waited = report.finished_at is not None and now - report.finished_at >= base * 2**streak
        if changed or waited:
            due.append(report)
    return due


def _recheck_streak(report: HealthReport) -> int:
    """Automatic re-checks in a row up to this report (0 when a person or an upload asked)."""
    if report.trigger != ReportTrigger.RECHECK:
        return 0
    asked = (
        report.contract_version.health_reports.exclude(trigger=ReportTrigger.RECHECK)
        .filter(number__lt=report.number)
        .aggregate(top=Max("number"))["top"]
        or 0
    )
    return report.contract_version.health_reports.filter(
        trigger=ReportTrigger.RECHECK, number__gt=asked, number__lte=report.number
    ).count()


# --- publish --------------------------------------------------------------------------------------


class PublishRefused(Exception):
    """The version cannot be published as asked; the message is for the user."""


def override_needed(version: ContractVersion) -> str:
    """Why publishing this version needs a written reason ("" when its report is clean)."""
    report = selectors.latest_report(version)
    if report is None:
        return "it has no health report yet"
    if report.status != ReportStatus.DONE:
        return "its health checks are still running"
    if report.error or not report.verdict:
        return "its health checks could not run"
    if report.verdict == ReportVerdict.NOT_CHECKED:
        return (
            "some of its checks could not run because of the site's infrastructure (they run"
            " again automatically once a worker can)"
        )
    if not selectors.is_clean(report):
        return "its health report is failing"
    return ""


def version_publish(
    version: ContractVersion, user: Any, reason: str = "", *, ip_address: str | None = None
) -> ContractVersion:
    """Publish a draft: on a clean health report by any maintainer or privileged user; on a
    failing, unfinished or missing one only with a written reason, which is kept on the
    version (shown beside its badge) and audited as a publish override."""
    if not selectors.can_see_findings(user, version.pack):
        raise PermissionDenied("Only a maintainer of this pack (or a reviewer) may publish it.")
    reason = reason.strip()
    if len(reason) > MAX_REASON_CHARS:
        raise PublishRefused(f"Keep the reason under {MAX_REASON_CHARS} characters.")
    if any(unicodedata.category(char) == "Cc" and char not in "\n\r\t" for char in reason):
        # A NUL cannot be stored (PostgreSQL) and other control characters would reach the
        # version page and the audit log as they are.
        raise PublishRefused("Write the reason as plain text, without control characters.")
    with transaction.atomic():
        locked = (
            ContractVersion.objects.select_for_update().select_related("pack").get(pk=version.pk)
        )
        if locked.state == VersionState.PUBLISHED:
            return locked
        why = override_needed(locked)
        if why and not reason:
            raise PublishRefused(
                f"v{locked.version} cannot be published as it is: {why}. To publish it anyway, "
                "write the reason (it is shown beside the health badge and recorded)."
            )
        locked.state = VersionState.PUBLISHED
        locked.published_at = timezone.now()
        locked.published_by = user
        locked.publish_reason = reason if why else ""
        locked.save(update_fields=["state", "published_at", "published_by", "publish_reason"])
        pack_face_refresh(locked.pack)
        if why:
            _audit_override(locked, user, reason, why, ip_address)
    return locked


def _audit_override(
    version: ContractVersion, user: Any, reason: str, why: str, ip_address: str | None
) -> None:
    AuditEvent.objects.create(
        user=user,
        username=user.get_username(),
        action=AuditAction.PUBLISH_OVERRIDE,
        object_type="contract_version",
        object_id=str(version.pk),
        pack_id=version.pack.pack_id,
        version=version.version,
        resource=f"published although {why}"[:1024],
        reason=reason,
        ip_address=ip_address,
    )


def can_request(user: Any, pack: Pack) -> bool:
    """Who may ask for a new health report: the same people who see the findings."""
    return selectors.can_see_findings(user, pack)
