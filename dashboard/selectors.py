"""Reads of the home page: what is being scored now, what finished lately, the top of each
board, the signed-in user's own runs, and whether the workers are consuming.

Everything is read through the same visibility rules as the pages it links to (a draft's
runs, another member's unsubmitted run never show), and no section's cost grows with the
number of runs: each reads a fixed number of rows (the in-progress list three grouped
queries per evaluation shown, at most ``RUNNING_LIMIT``). bench.pages measures the page with
1,000 runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, QuerySet
from django.utils import timezone

from operations.selectors import Stall, queues, stalls
from packs import access as pack_access
from packs.internal import internal
from packs.models import ContractVersion, VersionState
from runs import access as run_access
from runs.models import CandidateOrigin, Evaluation, EvaluationStatus, Run
from runs.selectors import Leaderboard, leaderboard, leaderboard_versions, run_list
from runs.state import REFERENCE_ORIGINS, RunState, open_counts, run_states, state_of

RUNNING_LIMIT = 10
LATEST_LIMIT = 8
BOARD_LIMIT = 4
TOP = 3
MINE_LIMIT = 8
REFERENCE_CHOICES = 12
PREPARING_WINDOW = timedelta(minutes=10)
OPEN_STATUSES = (EvaluationStatus.QUEUED, EvaluationStatus.RUNNING)


@dataclass(frozen=True)
class RunningRow:
    evaluation: Evaluation
    state: RunState  # runs.state: the same words and counts as the run's own page


@dataclass(frozen=True)
class NowRunning:
    rows: list[RunningRow]
    # This user's one-click reference runs whose candidates a worker is still building.
    preparing: list[tuple[Run, RunState]]
    count: int  # every open evaluation this user may see (rows holds the oldest few)
    waiting: int  # results and actions waiting for a worker, on every queue
    oldest_waiting_since: datetime | None
    stalls: list[Stall]

    @property
    def anything(self) -> bool:
        """Polling goes on while this holds."""
        return bool(self.count or self.waiting or self.preparing)


@dataclass(frozen=True)
class BoardTop:
    version: ContractVersion
    board: Leaderboard


def _open_evaluations(user: Any) -> QuerySet[Evaluation]:
    return Evaluation.objects.filter(
        status__in=OPEN_STATUSES,
        run__in=run_access.listed_runs(user),
    )


def now_running(user: Any, limit: int = RUNNING_LIMIT) -> NowRunning:
    """Evaluations in progress (oldest first, each with its live counts) and the queues'
    depth; ``stalls`` names queues where work waits and no worker claimed any lately."""
    open_evaluations = _open_evaluations(user)
    shown = list(
        open_evaluations.select_related("run__contract_version__pack").order_by("created_at", "id")[
            :limit
        ]
    )
    rows = queues()
    waited = [row.oldest_waiting_since for row in rows if row.oldest_waiting_since is not None]
    counts = open_counts(evaluation.pk for evaluation in shown)
    return NowRunning(
        rows=[
            RunningRow(evaluation, state_of(evaluation.run, evaluation, counts[evaluation.pk]))
            for evaluation in shown
        ],
        preparing=[(run, state_of(run, None, {})) for run in preparing_reference_runs(user)],
        count=len(shown) if len(shown) < limit else open_evaluations.count(),
        waiting=sum(row.waiting for row in rows),
        oldest_waiting_since=min(waited) if waited else None,
        stalls=stalls(rows, timezone.now()),
    )


def preparing_reference_runs(user: Any) -> list[Run]:
    """Reference runs this member asked for lately that a worker has not filled yet (a lost
    message leaves them empty: after ``PREPARING_WINDOW`` they are no longer shown)."""
    if not pack_access.is_member(user):
        return []
    return list(
        Run.objects.filter(
            submitted_by=user,
            submitted_at__isnull=True,
            origin__in=REFERENCE_ORIGINS,
            created_at__gte=timezone.now() - PREPARING_WINDOW,
        )
        .select_related("contract_version__pack")
        .order_by("created_at", "id")
    )


def latest_results(user: Any, limit: int = LATEST_LIMIT) -> list[Evaluation]:
    """The last finished evaluations of runs this user may see (health checks aside)."""
    return list(
        Evaluation.objects.filter(
            status=EvaluationStatus.DONE,
            run__in=run_access.listed_runs(user),
        )
        .select_related("run__contract_version__pack")
        .order_by("-finished_at", "-id")[:limit]
    )


def board_tops(user: Any, limit: int = BOARD_LIMIT, top: int = TOP) -> list[BoardTop]:
    """For the versions scored most lately that have ranked runs, their top ``top`` by the
    board's own scorer and metric, intervals included."""
    visible = set(pack_access.visible_versions(user).values_list("pk", flat=True))
    versions = {
        cv.pk: cv for cv in leaderboard_versions() if cv.pk in visible and cv.best_score is not None
    }
    recent = (
        Evaluation.objects.filter(
            status=EvaluationStatus.DONE,
            run__contract_version__in=list(versions),
            run__origin=CandidateOrigin.AGENT,
            run__health_check=False,
        )
        .values("run__contract_version")
        .annotate(last=Max("finished_at"))
        .order_by("-last")[:limit]
    )
    tops = []
    for row in recent:
        version = versions[row["run__contract_version"]]
        board = leaderboard(
            version,
            evaluator=version.board_evaluator,
            metric=version.board_metric,
            per_page=top,
        )
        if board.ranked:
            tops.append(BoardTop(version, board))
    return tops


def my_runs(user: Any, limit: int = MINE_LIMIT) -> list[tuple[Run, RunState]]:
    """A signed-in member's own latest runs, each with its state (runs.state)."""
    if not pack_access.is_member(user):
        return []
    runs = list(run_list(user=user).filter(submitted_by=user)[:limit])
    states = run_states(runs)
    return [(run, states[run.pk]) for run in runs]


def any_run_visible(user: Any) -> bool:
    return run_access.listed_runs(user).exists()


def reference_candidates(user: Any) -> list[ContractVersion]:
    """Published versions whose reference solutions this user may have scored from the home
    page's empty state, by pack name."""
    versions = (
        pack_access.visible_versions(user)
        .filter(state=VersionState.PUBLISHED)
        .exclude(internal("pack__"))
        .select_related("pack")
        .order_by("pack__pack_id", "-version")[:REFERENCE_CHOICES]
    )
    return [cv for cv in versions if run_access.can_score_references(user, cv.pack)]
