"""Progress of an evaluation: live counts, the bar's segments, and why results wait.

Split from runs.selectors (which re-exports it) along the page's own sections."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count

from runs.models import (
    Evaluation,
    ResultStatus,
    TaskResult,
    WorkQueue,
)

# Order of the progress bar's segments and legend: final verdicts first, open work last.
PROGRESS_ORDER = (
    ResultStatus.PASSED,
    ResultStatus.FAILED,
    ResultStatus.ERROR,
    ResultStatus.PENDING,
    ResultStatus.RUNNING,
    ResultStatus.QUEUED,
)


# --- progress ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    status: str
    count: int
    percent: float
    # Position and width on a 0..1000 axis, for the server-rendered SVG bar.
    x: float
    width: float


@dataclass(frozen=True)
class Progress:
    total: int
    counts: dict[str, int]
    segments: list[Segment]
    waiting: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)
    # Tasks of a live run that no episode has finished yet: they have no result row.
    unattempted: int = 0

    @property
    def open(self) -> int:
        return self.counts.get(ResultStatus.QUEUED, 0) + self.counts.get(ResultStatus.RUNNING, 0)

    @property
    def finished(self) -> int:
        return self.total - self.open - self.unattempted

    @property
    def percent_finished(self) -> float:
        return 100.0 * self.finished / self.total if self.total else 0.0


def evaluation_progress(evaluation: Evaluation) -> Progress:
    """Live counts from one grouped query (status × queue × attempts: a handful of rows);
    for a done evaluation, the counts its summary froze (no result is open, none changes)."""
    if evaluation.is_done:
        counts = {
            status: n
            for status, n in final_counts(evaluation).items()
            if n  # as the grouped query: statuses with no result are absent
        }
        total = sum(counts.values())
        return Progress(total, counts, _segments(counts, total))
    rows = (
        TaskResult.objects.filter(evaluation=evaluation)
        .values("status", "queue", "attempts")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[str, int] = {}
    queued: dict[str, int] = {}
    retrying = 0
    next_attempt = 0
    for row in rows:
        status, n = row["status"], row["n"]
        counts[status] = counts.get(status, 0) + n
        if status == ResultStatus.QUEUED:
            queued[row["queue"]] = queued.get(row["queue"], 0) + n
        # A queued result with an earlier claim, or a running one past its first claim, lost a
        # worker (lease expired and the reaper re-queued it): say so, it explains the wait.
        attempt = row["attempts"] + (1 if status == ResultStatus.QUEUED else 0)
        if status in (ResultStatus.QUEUED, ResultStatus.RUNNING) and attempt > 1:
            retrying += n
            next_attempt = max(next_attempt, attempt)
    rows_total = sum(counts.values())
    # A live run's evaluation counts every task of the version from the start.
    total = max(rows_total, evaluation.total)
    waiting = _why_waiting(counts, queued, retrying, next_attempt)
    if counts.get(ResultStatus.RUNNING):
        waiting += _waiting_for(evaluation)
    ahead = _queue_position(evaluation, queued) if queued else []
    return Progress(
        total, counts, _segments(counts, total), waiting, ahead, unattempted=total - rows_total
    )


def final_counts(evaluation: Evaluation) -> dict[str, int]:
    """Results per final status of a done evaluation, from its stored summary."""
    return {
        ResultStatus.PASSED: evaluation.passed,
        ResultStatus.FAILED: evaluation.failed,
        ResultStatus.ERROR: evaluation.errored,
        ResultStatus.PENDING: evaluation.pending,
    }


def _segments(counts: dict[str, int], total: int) -> list[Segment]:
    segments: list[Segment] = []
    x = 0.0
    for status in PROGRESS_ORDER:
        n = counts.get(status, 0)
        if not n:
            continue
        width = 1000.0 * n / total
        segments.append(Segment(status, n, 100.0 * n / total, round(x, 2), round(width, 2)))
        x += width
    return segments


def _tasks(n: int) -> str:
    return f"{n:,} task{'s' if n != 1 else ''}"


def _why_waiting(
    counts: dict[str, int], queued: dict[str, int], retrying: int, next_attempt: int
) -> list[str]:
    lines: list[str] = []
    if queued.get(WorkQueue.SANDBOX):
        lines.append(f"{_tasks(queued[WorkQueue.SANDBOX])} waiting for a sandbox worker")
    if queued.get(WorkQueue.TEXT):
        n = queued[WorkQueue.TEXT]
        lines.append(f"{n:,} text task{'s' if n != 1 else ''} queued")
    running = counts.get(ResultStatus.RUNNING, 0)
    if running:
        lines.append(f"{_tasks(running)} being verified now")
    if retrying:
        lines.append(
            f"{retrying:,} retrying after a worker restart, "
            f"attempt {next_attempt} of {settings.SECUREBENCH_MAX_ATTEMPTS}"
        )
    return lines


def _waiting_for(evaluation: Evaluation) -> list[str]:
    """What running verifications wait for (an image being pulled), by worker host."""
    notes = (
        TaskResult.objects.filter(evaluation=evaluation, status=ResultStatus.RUNNING)
        .exclude(waiting_for="")
        .values_list("waiting_for", "worker")
        .order_by("waiting_for", "worker")
        .distinct()[:5]
    )
    return [f"{note} on {worker.rpartition(':')[0] or worker}" for note, worker in notes]


def _queue_position(evaluation: Evaluation, queued: dict[str, int]) -> list[str]:
    """Open results of earlier evaluations on the queues this one waits on (one query)."""
    ahead = (
        TaskResult.objects.filter(
            evaluation_id__lt=evaluation.pk,
            status__in=(ResultStatus.QUEUED, ResultStatus.RUNNING),
            queue__in=list(queued),
        )
        .values("queue")
        .annotate(n=Count("id"))
        .order_by("queue")
    )
    return [
        f"{_tasks(row['n'])} of earlier evaluations ahead on the {row['queue']} queue"
        for row in ahead
        if row["n"]
    ]
