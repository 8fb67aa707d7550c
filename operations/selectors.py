"""Reads of the operations view: what waits in each queue, what runs under which lease, which
workers beat lately, what failed, and whether the workers are consuming at all.

Every figure comes from the database (results, steps, reports, heartbeats), never from the
broker: the broker holds messages, the database holds the truth a result waits on, and the
same reads serve SQLite with the filesystem broker and PostgreSQL with Redis.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Case, CharField, Count, Max, Min, Q, Sum, Value, When
from django.utils import timezone

from episodes.models import Step, StepState
from operations.canary import CANARY_PACK_ID
from operations.models import WorkerBeat
from pack_health.models import HealthReport, ReportStatus
from runs.models import (
    Evaluation,
    EvaluationStatus,
    ResultStatus,
    TaskResult,
    WorkQueue,
)

ACTIONS_QUEUE = "actions"
RUNNING_LIMIT = 50
LONGEST_LIMIT = 10
REASON_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class QueueRow:
    name: str
    label: str
    waiting: int
    oldest_waiting_since: datetime | None
    running: int
    last_claim: datetime | None  # the newest start of any work on this queue

    def waited_seconds(self, now: datetime) -> float | None:
        if self.oldest_waiting_since is None:
            return None
        return max(0.0, (now - self.oldest_waiting_since).total_seconds())


def queues() -> list[QueueRow]:
    """Verifications per queue (text, sandbox) and episodes' sandboxed actions."""
    rows = []
    for queue in WorkQueue:
        open_results = TaskResult.objects.filter(queue=queue.value)
        waiting = open_results.filter(status=ResultStatus.QUEUED).aggregate(
            count=Count("pk"), oldest=Min("evaluation__created_at")
        )
        running = open_results.filter(status=ResultStatus.RUNNING).count()
        claim = open_results.filter(started_at__isnull=False).aggregate(last=Max("started_at"))
        rows.append(
            QueueRow(
                queue.value,
                queue.label,
                waiting["count"],
                waiting["oldest"],
                running,
                claim["last"],
            )  # fmt: skip
        )
    waiting_actions = Step.objects.filter(state=StepState.QUEUED).aggregate(
        count=Count("pk"), oldest=Min("created_at")
    )
    rows.append(
        QueueRow(
            ACTIONS_QUEUE,
            "episode actions",
            waiting_actions["count"],
            waiting_actions["oldest"],
            Step.objects.filter(state=StepState.RUNNING).exclude(worker="").count(),
            # A worker running an action touches its step every half second.
            Step.objects.aggregate(last=Max("heartbeat_at"))["last"],
        )
    )
    return rows


@dataclass(frozen=True)
class Stall:
    """Work has waited past the stall threshold and no worker claimed anything meanwhile."""

    queue: str
    waiting: int
    waited_seconds: float


def stalls(rows: list[QueueRow], now: datetime | None = None) -> list[Stall]:
    now = now or timezone.now()
    threshold = timedelta(seconds=settings.SECUREBENCH_STALL_SECONDS)
    found = []
    for row in rows:
        if not row.waiting or row.oldest_waiting_since is None:
            continue
        waited = now - row.oldest_waiting_since
        claimed_lately = row.last_claim is not None and now - row.last_claim < threshold
        if waited >= threshold and not claimed_lately:
            found.append(Stall(row.name, row.waiting, waited.total_seconds()))
    return found


def running_results(limit: int = RUNNING_LIMIT) -> list[TaskResult]:
    """Results being verified, the oldest claim first, with their leases."""
    return list(
        TaskResult.objects.filter(status=ResultStatus.RUNNING)
        .select_related("evaluation__run", "task")
        .only(
            "queue",
            "family",
            "worker",
            "attempts",
            "started_at",
            "lease_expires_at",
            "evaluation__number",
            "evaluation__run__agent_name",
            "task__task_id",
        )
        .order_by("started_at", "pk")[:limit]
    )


def running_count() -> int:
    return TaskResult.objects.filter(status=ResultStatus.RUNNING).count()


def expired_leases(now: datetime | None = None) -> int:
    """Running results whose lease ran out: their worker died; the reaper will requeue them."""
    now = now or timezone.now()
    return TaskResult.objects.filter(status=ResultStatus.RUNNING, lease_expires_at__lt=now).count()


def workers(now: datetime | None = None) -> tuple[list[WorkerBeat], list[WorkerBeat]]:
    """Workers seen within the liveness window, and those seen before it (last day only)."""
    now = now or timezone.now()
    alive_since = now - timedelta(seconds=settings.SECUREBENCH_WORKER_ALIVE_SECONDS)
    recent = WorkerBeat.objects.filter(last_seen__gte=now - REASON_WINDOW)
    alive = [b for b in recent if b.last_seen >= alive_since and b.stopped_at is None]
    gone = [b for b in recent if b not in alive]
    return alive, gone


# Whose runs a failure belongs to: people's runs, the packs' health checks (pack_health), or
# the site's canary (whose null run fails on purpose at every check). Counted apart, so that
# the site's own checks never read as people's failures.
PEOPLE, HEALTH_CHECKS, CANARY = "people", "health", "canary"
SOURCE_LABELS = {
    PEOPLE: "people's runs",
    HEALTH_CHECKS: "packs' health checks",
    CANARY: "site canary",
}


USABLE_SANDBOXES = ("docker", "bwrap")


def sandbox_capability(now: datetime | None = None) -> str:
    """pack_health.hooks' provider: "" when no live worker consuming the sandbox queue has a
    usable backend; else a digest of those workers (node, start, backend, images, fallback),
    which changes when one starts or restarts, gets an image or loses its backend."""
    alive, _gone = workers(now)
    able = sorted(
        (beat.node, beat.started_at.isoformat(), beat.sandbox, *sorted(beat.images or []),
         beat.fallback_image)
        for beat in alive
        if beat.sandbox in USABLE_SANDBOXES and "sandbox" in beat.queues.split(",")
    )  # fmt: skip
    if not able:
        return ""
    return hashlib.sha256(repr(able).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ReasonCount:
    status: str
    reason: str
    count: int
    source: str = PEOPLE

    @property
    def source_label(self) -> str:
        return SOURCE_LABELS[self.source]


def _run_source() -> Case:
    return Case(
        When(evaluation__run__contract_version__pack__pack_id=CANARY_PACK_ID, then=Value(CANARY)),
        When(evaluation__run__health_check=True, then=Value(HEALTH_CHECKS)),
        default=Value(PEOPLE),
        output_field=CharField(),
    )


def failure_reasons(now: datetime | None = None) -> list[ReasonCount]:
    """Failed and errored results of the last 24 hours, by whose runs they are and reason:
    people's runs first, then the health checks', then the canary's; the commonest first."""
    now = now or timezone.now()
    rows = (
        TaskResult.objects.filter(
            finished_at__gte=now - REASON_WINDOW,
            status__in=(ResultStatus.FAILED, ResultStatus.ERROR),
        )
        .annotate(source=_run_source())
        .values("source", "status", "failure_reason")
        .annotate(count=Count("pk"))
        .order_by("-count", "status", "failure_reason")
    )
    counts = [
        ReasonCount(r["status"], r["failure_reason"] or "—", r["count"], r["source"]) for r in rows
    ]
    order = list(SOURCE_LABELS)
    return sorted(counts, key=lambda row: order.index(row.source))


def failure_totals(reasons: list[ReasonCount]) -> list[tuple[str, int]]:
    """Failures per source, labelled, every source named (a zero says "none of ours")."""
    return [
        (label, sum(r.count for r in reasons if r.source == source))
        for source, label in SOURCE_LABELS.items()
    ]


def longest_evaluations(limit: int = LONGEST_LIMIT) -> list[Evaluation]:
    """Evaluations still open, the longest running first, with their open result counts."""
    return list(
        Evaluation.objects.filter(status__in=(EvaluationStatus.QUEUED, EvaluationStatus.RUNNING))
        .select_related("run__contract_version__pack")
        .annotate(
            open_results=Count(
                "results",
                filter=Q(results__status__in=(ResultStatus.QUEUED, ResultStatus.RUNNING)),
            )
        )
        .order_by("created_at", "pk")[:limit]
    )


def open_health_reports() -> int:
    return HealthReport.objects.exclude(status=ReportStatus.DONE).count()


def results_by_status_and_reason() -> list[tuple[str, str, int]]:
    """Every result ever stored, by status and failure reason (for /metrics)."""
    rows = (
        TaskResult.objects.values("status", "failure_reason")
        .annotate(count=Count("pk"))
        .order_by("status", "failure_reason")
    )
    return [(r["status"], r["failure_reason"], r["count"]) for r in rows]


@dataclass(frozen=True)
class DurationHistogram:
    queue: str
    cumulative: list[int]  # results at or below each bucket's bound
    count: int
    total_seconds: float


def duration_histograms(
    buckets: tuple[float, ...], now: datetime | None = None
) -> list[DurationHistogram]:
    """Per queue, the verification times of the last 24 hours as cumulative bucket counts
    (one grouped query: no row is read into Python)."""
    now = now or timezone.now()
    timed = TaskResult.objects.filter(
        finished_at__gte=now - REASON_WINDOW, duration_seconds__isnull=False
    )
    bounds = {
        f"le_{i}": Count("pk", filter=Q(duration_seconds__lte=b)) for i, b in enumerate(buckets)
    }
    rows = (
        timed.values("queue")
        .annotate(count=Count("pk"), total=Sum("duration_seconds"), **bounds)
        .order_by("queue")
    )
    return [
        DurationHistogram(
            r["queue"], [r[f"le_{i}"] for i in range(len(buckets))], r["count"], r["total"] or 0.0
        )
        for r in rows
    ]
