"""A run's state, computed once and rendered by every view of the run.

The run page's header, progress card, evaluations table and results, the run list, the
home page, the live episodes page and the API all read a run's phase and counts from here,
so they say the same words, the same numbers and use the same colour for the same state.
Counts come from the results themselves (one grouped query for any number of evaluations
still open; a done evaluation's frozen summary otherwise), never from a status column that
lags behind them: an evaluation whose results are half final is "running" whatever its row
says, and a live episode run is "live" until it closes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Count

from runs.models import CandidateOrigin, Evaluation, ResultStatus, Run, RunMode, TaskResult


class Phase:
    """Where a run is: each phase has one word, one icon and one colour class."""

    PREPARING = "preparing"  # a one-click reference run whose candidates a worker builds
    OPEN = "open"  # an API run still being filled; nothing is scored before it is submitted
    LIVE = "live"  # an episode run whose agent may still act: results land as episodes end
    QUEUED = "queued"  # submitted; no result final nor being verified yet
    RUNNING = "running"  # some results final or being verified, others still open
    DONE = "done"  # every result final, summary written


# (icon, word, what it means on hover). The colour class is status-<phase>.
PHASES: dict[str, tuple[str, str, str]] = {
    Phase.PREPARING: ("◌", "preparing", "a worker is building the run's candidates"),
    Phase.OPEN: ("○", "open", "candidates are still being added; scoring starts at submit"),
    Phase.LIVE: ("●", "live", "the agent is acting: each task is scored as its episode ends"),
    Phase.QUEUED: ("◷", "queued", "waiting for a worker: no task has been verified yet"),
    Phase.RUNNING: ("●", "running", "being scored: some tasks are finished, others are not"),
    Phase.DONE: ("✓", "done", "every task is finished and the score is final"),
}
# Phases whose counts can still change: views of them refresh themselves.
SETTLED_PHASES = (Phase.DONE,)
# The runs a version's one-click "score the reference solutions" makes, in this order
# (runs.services.reference_runs_request).
REFERENCE_ORIGINS = (CandidateOrigin.ORACLE, CandidateOrigin.NULL)
# The bar's segments, in order: final verdicts only. Open work (queued, running, not yet
# attempted) is not drawn, so a bar is never wider than the share of finished tasks.
BAR_ORDER = (ResultStatus.PASSED, ResultStatus.FAILED, ResultStatus.ERROR, ResultStatus.PENDING)
BAR_WIDTH = 1000.0


@dataclass(frozen=True)
class BarSegment:
    status: str
    count: int
    # Position and width on a 0..1000 axis (server-rendered SVG, no style attributes).
    x: float
    width: float


@dataclass(frozen=True)
class RunState:
    """One run's phase and counts; ``evaluation`` is the evaluation they count (the latest,
    or the one a page selected), None before the run has one."""

    run_id: int
    evaluation_number: int | None
    phase: str
    tasks: int  # tasks of the run's contract version
    candidates: int  # candidates stored so far
    total: int  # results the evaluation will have (tasks × samples); tasks before one exists
    passed: int = 0
    failed: int = 0
    errored: int = 0  # our fault (a verifier or the sandbox broke), never the agent's
    pending: int = 0  # no verifier for the family yet
    queued: int = 0
    running: int = 0

    @property
    def icon(self) -> str:
        return PHASES[self.phase][0]

    @property
    def word(self) -> str:
        return PHASES[self.phase][1]

    @property
    def meaning(self) -> str:
        return PHASES[self.phase][2]

    @property
    def css(self) -> str:
        return f"status-{self.phase}"

    @property
    def finished(self) -> int:
        return self.passed + self.failed + self.errored + self.pending

    @property
    def scored(self) -> int:
        """Finished with a verdict that counts in the score (no-verifier tasks aside)."""
        return self.passed + self.failed + self.errored

    @property
    def open(self) -> int:
        return self.queued + self.running

    @property
    def unattempted(self) -> int:
        """Tasks of a live run that no episode has ended yet (they have no result)."""
        return max(0, self.total - self.finished - self.open)

    @property
    def percent(self) -> int:
        """Finished share, rounded down: 99.6 % of the tasks is not yet "100 %"."""
        return math.floor(100 * self.finished / self.total) if self.total else 0

    @property
    def live(self) -> bool:
        return self.phase not in SETTLED_PHASES

    @property
    def segments(self) -> list[BarSegment]:
        segments: list[BarSegment] = []
        x = 0.0
        counts = self.counts
        for status in BAR_ORDER:
            n = counts[status]
            if not n or not self.total:
                continue
            width = BAR_WIDTH * n / self.total
            segments.append(BarSegment(status, n, round(x, 2), round(width, 2)))
            x += width
        return segments

    @property
    def counts(self) -> dict[str, int]:
        return {
            ResultStatus.PASSED: self.passed,
            ResultStatus.FAILED: self.failed,
            ResultStatus.ERROR: self.errored,
            ResultStatus.PENDING: self.pending,
            ResultStatus.QUEUED: self.queued,
            ResultStatus.RUNNING: self.running,
        }

    def as_json(self) -> dict[str, int | str | bool | None]:
        """The API's ``state``: the same fields the pages render."""
        return {
            "phase": self.phase,
            "word": self.word,
            "evaluation": self.evaluation_number,
            "tasks": self.tasks,
            "candidates": self.candidates,
            "total": self.total,
            "finished": self.finished,
            "scored": self.scored,
            "passed": self.passed,
            "failed": self.failed,
            "error": self.errored,
            "pending": self.pending,
            "queued": self.queued,
            "running": self.running,
            "unattempted": self.unattempted,
            "percent": self.percent,
            "live": self.live,
        }


# --- computing it ----------------------------------------------------------------------------


def phase_of(run: Run, evaluation: Evaluation | None, counts: dict[str, int]) -> str:
    """The phase from what is stored, never from a status column alone."""
    if evaluation is None:
        if not run.is_submitted and run.origin in REFERENCE_ORIGINS and not run.candidate_count:
            return Phase.PREPARING
        if not run.is_submitted:
            return Phase.OPEN
        return Phase.QUEUED  # submitted a moment ago: its evaluation is being written
    if evaluation.is_done:
        return Phase.DONE
    if run.mode == RunMode.EPISODES and not run.is_submitted:
        return Phase.LIVE
    started = any(counts.get(s) for s in (*BAR_ORDER, ResultStatus.RUNNING))
    return Phase.RUNNING if started else Phase.QUEUED


def state_of(run: Run, evaluation: Evaluation | None, counts: dict[str, int]) -> RunState:
    """A run's state from its evaluation and that evaluation's results per status."""
    tasks = run.contract_version.task_count
    if evaluation is not None and evaluation.is_done:
        counts = {
            ResultStatus.PASSED: evaluation.passed,
            ResultStatus.FAILED: evaluation.failed,
            ResultStatus.ERROR: evaluation.errored,
            ResultStatus.PENDING: evaluation.pending,
        }
    rows = sum(counts.values())
    # A live run's evaluation counts every task from the start; a bundle's has a row each.
    total = max(rows, evaluation.total if evaluation is not None else tasks)
    return RunState(
        run_id=run.pk,
        evaluation_number=evaluation.number if evaluation is not None else None,
        phase=phase_of(run, evaluation, counts),
        tasks=tasks,
        candidates=run.candidate_count,
        total=total,
        passed=counts.get(ResultStatus.PASSED, 0),
        failed=counts.get(ResultStatus.FAILED, 0),
        errored=counts.get(ResultStatus.ERROR, 0),
        pending=counts.get(ResultStatus.PENDING, 0),
        queued=counts.get(ResultStatus.QUEUED, 0),
        running=counts.get(ResultStatus.RUNNING, 0),
    )


def open_counts(evaluation_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Results per status of evaluations still open, in one grouped query."""
    ids = list(evaluation_ids)
    counts: dict[int, dict[str, int]] = {pk: {} for pk in ids}
    if not ids:
        return counts
    rows = (
        TaskResult.objects.filter(evaluation_id__in=ids)
        .values_list("evaluation_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for evaluation_id, status, n in rows:
        counts[evaluation_id][status] = n
    return counts


def evaluation_states(run: Run, evaluations: list[Evaluation]) -> dict[int, RunState]:
    """The state of each evaluation of one run (evaluation pk → state); one query for all of
    them still open, none for those done."""
    counts = open_counts(e.pk for e in evaluations if not e.is_done)
    return {e.pk: state_of(run, e, counts.get(e.pk, {})) for e in evaluations}


def run_state(run: Run, evaluation: Evaluation | None = None) -> RunState:
    """One run's state, by its latest evaluation unless one is given."""
    if evaluation is None:
        evaluation = run.evaluations.order_by("-number").first()
    if evaluation is None:
        return state_of(run, None, {})
    return evaluation_states(run, [evaluation])[evaluation.pk]


def run_states(runs: Iterable[Run]) -> dict[int, RunState]:
    """The state of many runs (run pk → state) by their latest evaluations: two queries
    whatever their number (the latest evaluations, then the open ones' counts)."""
    runs = list(runs)
    latest: dict[int, Evaluation] = {}
    for evaluation in Evaluation.objects.filter(run__in=[r.pk for r in runs]).order_by(
        "run_id", "-number"
    ):
        latest.setdefault(evaluation.run_id, evaluation)
    counts = open_counts(e.pk for e in latest.values() if not e.is_done)
    states: dict[int, RunState] = {}
    for run in runs:
        evaluation = latest.get(run.pk)
        live = counts.get(evaluation.pk, {}) if evaluation is not None else {}
        states[run.pk] = state_of(run, evaluation, live)
    return states


@contextmanager
def one_moment() -> Iterator[None]:
    """Reads inside see the database as of one moment, so the parts of a page rendered from
    several queries (the state's counts, the rows of a table) cannot tell two stories.

    SQLite (WAL) gives a transaction one snapshot from its first read; PostgreSQL does so at
    REPEATABLE READ. Only reads belong inside: a write would wait for, or fail on, rows changed
    since the snapshot. Inside a transaction already open (a caller's atomic block, a test's),
    PostgreSQL refuses to change the level after its first query, so the outer one's stands."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield
