"""Reads for run, result, leaderboard and comparison pages.

Every function here answers with a constant number of queries whatever the number of runs or
results: counts come from one aggregate, "latest evaluation" from a correlated subquery.
Verifier output (stdout, stderr) and detail strings are never selected for pages: they are
privileged (debug mode, a later issue).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    Count,
    Exists,
    F,
    FloatField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.shortcuts import get_object_or_404

from packs.internal import internal
from packs.models import ContractVersion, Pack, VersionState
from runs import access, validity
from runs.candidates import entry_size, is_blob_entry
from runs.evaluators import DEFAULT_EVALUATOR, board_choice, evaluator_get
from runs.models import (
    CandidateOrigin,
    Evaluation,
    EvaluationStatus,
    Run,
    TaskResult,
)
from runs.progress import final_counts
from runs.stats import Interval
from runs.timings import episode_seconds

# Fields a results table needs; everything else on TaskResult stays in the database.
RESULT_LIST_FIELDS = (
    "id",
    "evaluation_id",
    "task_id",
    "task__task_id",
    "family",
    "position",
    "sample",
    "queue",
    "status",
    "score",
    "failure_reason",
    "duration_seconds",
    "attempts",
)

# ?sort= keys of the results table → ORDER BY; position and sample (a task's candidates)
# break ties so pages are stable.
RESULT_SORTS: dict[str, tuple[str, ...]] = {
    "position": ("position", "sample"),
    "task": ("task__task_id", "position", "sample"),
    "status": ("status", "position", "sample"),
    "duration": ("duration_seconds", "position", "sample"),
    "score": ("score", "position", "sample"),
}


# --- runs list -----------------------------------------------------------------------------


def _latest_evaluation(field_name: str) -> Subquery:
    latest = Evaluation.objects.filter(run=OuterRef("pk")).order_by("-number")
    return Subquery(latest.values(field_name)[:1])


def run_list(
    *,
    user: Any,
    pack: str = "",
    version: int | None = None,
    agent: str = "",
    status: str = "",
    run_ids: list[int] | None = None,
) -> QuerySet[Run]:
    """Runs the user may see, newest first, each with its latest evaluation's status and
    score (one query)."""
    runs = (
        access.listed_runs(user)  # no health check (listed on its report), no canary run
        .select_related("contract_version__pack")
        .annotate(
            latest_number=_latest_evaluation("number"),
            latest_status=_latest_evaluation("status"),
            latest_score=_latest_evaluation("score"),
            latest_ci_low=_latest_evaluation("ci_low"),
            latest_ci_high=_latest_evaluation("ci_high"),
            latest_passed=_latest_evaluation("passed"),
            latest_total=_latest_evaluation("total"),
            latest_pending=_latest_evaluation("pending"),
            # Whether any candidate is for a task with a verifier: validity is judged on those.
            judged=validity.judged_candidates(),
        )
    )
    if pack:
        runs = runs.filter(contract_version__pack__pack_id=pack)
    if version is not None:
        runs = runs.filter(contract_version__version=version)
    if agent:
        runs = runs.filter(
            Q(agent_name__icontains=agent)
            | Q(agent_version__icontains=agent)
            | Q(model_name__icontains=agent)
        )
    if status:
        runs = runs.filter(latest_status=status)
    if run_ids:
        runs = runs.filter(pk__in=run_ids)
    return runs.order_by("-created_at", "-id")


def packs_with_runs() -> list[str]:
    return list(
        Pack.objects.filter(
            Exists(
                Run.objects.filter(
                    contract_version__pack=OuterRef("pk"),
                    contract_version__state=VersionState.PUBLISHED,
                    health_check=False,
                )
            )
        )
        .exclude(internal())
        .order_by("pack_id")
        .values_list("pack_id", flat=True)
    )


def submittable_versions() -> QuerySet[ContractVersion]:
    return (
        ContractVersion.objects.exclude(internal("pack__"))
        .select_related("pack")
        .order_by("pack__pack_id", "-version")
    )


# --- one run -------------------------------------------------------------------------------


def run_get(run_id: int, *, user: Any) -> Run:
    """A run the user may see; 404 otherwise (nothing confirms that it exists)."""
    return get_object_or_404(
        access.visible_runs(user).select_related("contract_version__pack", "submitted_by"),
        pk=run_id,
    )


def run_evaluations(run: Run) -> list[Evaluation]:
    return list(run.evaluations.select_related("created_by").order_by("-number"))


def evaluation_get(run: Run, number: int) -> Evaluation:
    return get_object_or_404(Evaluation.objects.select_related("run"), run=run, number=number)


USAGE_FIGURES = (
    ("wall_seconds", "wall time", "{:,.1f} s"),
    ("input_tokens", "input tokens", "{:,.0f}"),
    ("output_tokens", "output tokens", "{:,.0f}"),
    ("usd", "cost", "${:,.2f}"),
)


def usage_totals(run: Run) -> list[tuple[str, str]]:
    """The run's usage as label/value pairs, skipping absent figures.

    Submission stores ``total_<key>`` (the run-level figure as reported, else the sum over
    tasks) beside what was reported; the total is the one to show."""
    usage: dict[str, Any] = run.usage or {}
    rows: list[tuple[str, str]] = []
    for key, label, template in USAGE_FIGURES:
        value = usage.get(f"total_{key}", usage.get(key))
        if isinstance(value, int | float) and not isinstance(value, bool):
            rows.append((label, template.format(value)))
    return rows


def comparable_runs(run: Run, *, limit: int = 200) -> QuerySet[Run]:
    """Other submitted runs on the same contract version, for the "Compare with…" picker."""
    return (
        Run.objects.filter(
            contract_version_id=run.contract_version_id,
            submitted_at__isnull=False,
            health_check=False,
        )
        .exclude(pk=run.pk)
        .only("id", "agent_name", "agent_version", "model_name", "created_at")
        .order_by("-created_at", "-id")[:limit]
    )


# --- scores and charts ---------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyRate:
    family: str
    passed: int
    total: int
    failed: int
    error: int
    pending: int

    @property
    def scored(self) -> int:
        """Results that count: pending ones (no verifier yet) are left out, not failed."""
        return self.total - self.pending

    @property
    def rate(self) -> float:
        return self.passed / self.scored if self.scored > 0 else 0.0


def family_rates(summary: dict[str, dict[str, int]]) -> list[FamilyRate]:
    return [
        FamilyRate(
            family=name,
            passed=int(counts.get("passed", 0)),
            total=int(counts.get("total", 0)),
            failed=int(counts.get("failed", 0)),
            error=int(counts.get("error", 0)),
            pending=int(counts.get("pending", 0)),
        )
        for name, counts in sorted((summary or {}).items())
    ]


def evaluation_interval(evaluation: Evaluation | Standing) -> Interval | None:
    if evaluation.ci_low is None or evaluation.ci_high is None:
        return None
    return Interval(evaluation.ci_low, evaluation.ci_high)


# --- results -------------------------------------------------------------------------------


def evaluation_results(
    evaluation: Evaluation,
    *,
    status: str = "",
    family: str = "",
    reason: str = "",
    sort: str = "position",
) -> QuerySet[TaskResult]:
    results = TaskResult.objects.filter(evaluation=evaluation).select_related("task")
    if status:
        results = results.filter(status=status)
    if family:
        results = results.filter(family=family)
    if reason:
        results = results.filter(failure_reason=reason)
    descending = sort.startswith("-")
    names = RESULT_SORTS.get(sort.lstrip("-"), RESULT_SORTS["position"])
    # Unfinished results have no duration: last either way, on SQLite and PostgreSQL alike.
    order = [
        F(name).desc(nulls_last=True) if descending else F(name).asc(nulls_last=True)
        for name in names
    ]
    # A live episode's own time, recorded as its candidate's usage (episodes.lifecycle).
    results = results.annotate(episode_seconds=episode_seconds("candidate__usage"))
    return results.only(*RESULT_LIST_FIELDS).order_by(*order)


def known_result_count(
    evaluation: Evaluation, *, status: str = "", family: str = "", reason: str = ""
) -> int | None:
    """How many results the results table shows, when the done evaluation's summary says so
    (no COUNT over its results); None when only a query can tell (a reason filter, or an
    evaluation still running)."""
    if not evaluation.is_done or reason:
        return None
    if family:
        # Per family: total, passed, failed, error, pending (pipeline.evaluation_summary).
        counts = (evaluation.family_summary or {}).get(family, {})
        return int(counts.get(status or "total", 0))
    if not status:
        return evaluation.total
    return final_counts(evaluation).get(status, 0)


def failure_reasons(evaluation: Evaluation) -> list[str]:
    if evaluation.is_done and evaluation.failure_reasons is not None:
        return list(evaluation.failure_reasons)
    return list(
        TaskResult.objects.filter(evaluation=evaluation)
        .exclude(failure_reason="")
        .order_by("failure_reason")
        .values_list("failure_reason", flat=True)
        .distinct()
    )


@dataclass(frozen=True)
class StatusChange:
    result_id: int
    task_id: str
    family: str
    before: str
    after: str
    sample: int = 0


def evaluation_changes(
    evaluation: Evaluation, previous: Evaluation, *, limit: int = 200
) -> tuple[list[StatusChange], int]:
    """Results whose status differs between two evaluations of a run, joined by task and
    sample (1+1 query)."""
    before = TaskResult.objects.filter(
        evaluation=previous, task_id=OuterRef("task_id"), sample=OuterRef("sample")
    )
    flipped = (
        TaskResult.objects.filter(evaluation=evaluation)
        .annotate(before=Subquery(before.values("status")[:1]))
        .exclude(before__isnull=True)
        .exclude(before=F("status"))
    )
    rows = flipped.order_by("position", "sample").values(
        "id", "task__task_id", "sample", "family", "before", "status"
    )[:limit]
    changes = [
        StatusChange(
            r["id"], r["task__task_id"], r["family"], r["before"], r["status"], r["sample"]
        )
        for r in rows
    ]
    total = len(changes) if len(changes) < limit else flipped.count()
    return changes, total


# --- one result ----------------------------------------------------------------------------


def result_get(run: Run, result_id: int) -> TaskResult:
    # stdout and stderr are privileged: deferred so a page cannot render them by accident.
    return get_object_or_404(
        TaskResult.objects.select_related("evaluation", "task", "candidate").defer(
            "stdout", "stderr"
        ),
        evaluation__run=run,
        pk=result_id,
    )


def result_neighbours(result: TaskResult) -> dict[str, int | None]:
    """The results before and after this one in the table's order (task, then sample)."""
    siblings = TaskResult.objects.filter(evaluation_id=result.evaluation_id)
    position, sample = result.position, result.sample
    before = siblings.filter(
        Q(position__lt=position) | Q(position=position, sample__lt=sample)
    ).order_by("-position", "-sample")
    after = siblings.filter(
        Q(position__gt=position) | Q(position=position, sample__gt=sample)
    ).order_by("position", "sample")
    return {
        "previous": before.values_list("id", flat=True).first(),
        "next": after.values_list("id", flat=True).first(),
    }


# Only facts like these leave a verifier's details for unprivileged eyes (pages and API);
# strings, lists and indexes stay privileged: an assertion message quotes the expected value,
# and an answered choice index is the answer itself when the candidate passed.
SAFE_DETAIL_SUFFIXES = ("_count", "_exit_code", "_seconds", "_bytes")
SAFE_DETAIL_NAMES = frozenset(
    {"tests_total", "tests_passed", "tests_failed", "passed", "failed", "skipped", "errors"}
    | {"calls", "assert_statements"}
)


def public_detail_counts(details: Any, *, origin: str) -> dict[str, int | float | bool]:
    """Top-level counts, exit codes, durations, sizes and flags of a verifier's details.

    Nothing for oracle runs: every fact about a reference solution is privileged.
    """
    if origin == CandidateOrigin.ORACLE or not isinstance(details, dict):
        return {}
    counts: dict[str, int | float | bool] = {}
    for key, value in sorted(details.items()):
        if isinstance(value, bool) or (
            isinstance(value, int | float)
            and (str(key).endswith(SAFE_DETAIL_SUFFIXES) or key in SAFE_DETAIL_NAMES)
        ):
            counts[str(key)] = value
    return counts


@dataclass(frozen=True)
class WorkspaceFile:
    path: str
    size: int
    mode: str
    sha256: str = ""  # an uploaded (blob) file's digest; "" for a file that came inline


def workspace_files(files: dict[str, Any]) -> list[WorkspaceFile]:
    """A candidate's files to list: path, size and mode, inline and uploaded (blob) entries
    alike; sizes come from the entry, without decoding megabytes or reading a blob."""
    listing: list[WorkspaceFile] = []
    for path, entry in sorted((files or {}).items()):
        mode = entry.get("mode", "") if isinstance(entry, dict) else ""
        sha256 = entry["sha256"] if is_blob_entry(entry) else ""
        listing.append(WorkspaceFile(path, entry_size(entry), _mode_text(mode), sha256))
    return listing


def _mode_text(mode: Any) -> str:
    if isinstance(mode, int):
        return f"{mode:o}"
    return str(mode or "")


# --- leaderboards --------------------------------------------------------------------------


def _is_latest_done(evaluator: str | OuterRef | None = None) -> Q:
    later = Evaluation.objects.filter(
        run=OuterRef("run"), status=EvaluationStatus.DONE, number__gt=OuterRef("number")
    )
    if evaluator is not None:
        later = later.filter(evaluator=evaluator)
    return Q(status=EvaluationStatus.DONE) & ~Q(Exists(later))


def latest_done_evaluations(evaluator: str | None = None) -> QuerySet[Evaluation]:
    """The latest done evaluation of every submitted run (a run re-scored counts once); with
    ``evaluator``, the latest done by that scorer (runs.evaluators), whatever came after."""
    # Health-check runs (pack_health) never stand on a leaderboard.
    evaluations = Evaluation.objects.filter(
        _is_latest_done(evaluator), run__submitted_at__isnull=False, run__health_check=False
    )
    return evaluations if evaluator is None else evaluations.filter(evaluator=evaluator)


def leaderboard_versions() -> list[ContractVersion]:
    """Versions with a scored run, each with ``run_count``, the scorer and metric its board
    shows first (``board_evaluator``, ``board_metric``) and ``best_score`` by them (valid
    agent runs): two queries whatever the number of versions."""
    scored = latest_done_evaluations().filter(run__contract_version=OuterRef("pk"))
    versions = list(
        # Drafts have no runs but their health checks'; listed for nobody all the same.
        ContractVersion.objects.filter(Exists(scored), state=VersionState.PUBLISHED)
        .exclude(internal("pack__"))  # the canary's board is no one's to read
        .select_related("pack")
        .annotate(
            run_count=Count(
                "runs",
                filter=Q(runs__submitted_at__isnull=False, runs__health_check=False),
                distinct=True,
            )
        )
        .order_by("pack__pack_id", "-version")
    )
    # Each run's latest done evaluation per scorer; the best primary score per version.
    eligible = Evaluation.objects.filter(
        _is_latest_done(OuterRef("evaluator")),
        run__submitted_at__isnull=False,
        run__contract_version__in=[cv.pk for cv in versions],
        run__origin=CandidateOrigin.AGENT,
        run__health_check=False,
        run__over_budget=False,
        run__valid=True,
    )
    best = {
        (version, key): (highest, lowest)
        for version, key, highest, lowest in eligible.values("run__contract_version", "evaluator")
        .annotate(best=Max("score"), least=Min("score"))
        .order_by()
        .values_list("run__contract_version", "evaluator", "best", "least")
    }
    for cv in versions:
        choice = board_choice(cv.contract)
        cv.board_evaluator = choice.evaluator.key if choice.evaluator else ""
        cv.board_metric = choice.metric
        highest, lowest = best.get((cv.pk, cv.board_evaluator), (None, None))
        lower_is_better = choice.evaluator and choice.evaluator.direction(choice.metric) == "lower"
        cv.best_score = lowest if lower_is_better else highest
    return versions


def _board_evaluations(
    contract_version: ContractVersion, evaluator: str, metric: str | None
) -> QuerySet[Evaluation]:
    """Each run's latest done evaluation by ``evaluator``, annotated with ``metric`` and its
    interval (metric_value, metric_low, metric_high) and ordered best first."""
    scorer = evaluator_get(evaluator)
    if metric not in (None, *scorer.metrics):
        raise ValueError(f"{scorer.key} emits no metric {metric!r}")
    evaluations = latest_done_evaluations(evaluator).filter(run__contract_version=contract_version)
    if metric is None or metric == scorer.primary_metric:
        # The score is the primary metric, also of evaluations older than stored metrics.
        evaluations = evaluations.annotate(
            metric_value=F("score"), metric_low=F("ci_low"), metric_high=F("ci_high")
        )
    else:
        evaluations = evaluations.annotate(
            metric_value=_stored_metric(metric, "value"),
            metric_low=_stored_metric(metric, "ci_low"),
            metric_high=_stored_metric(metric, "ci_high"),
        )
    # An uploaded evaluation says which way each metric is better (a Brier score: lower).
    value = F("metric_value")
    best_first = (
        value.asc(nulls_last=True)
        if scorer.direction(metric or scorer.primary_metric) == "lower"
        else value.desc(nulls_last=True)
    )
    return evaluations.order_by(best_first, "finished_at", "run_id")


def _stored_metric(metric: str, part: str) -> Cast:
    # ``metric`` is a name the scorer declares (checked above), never raw user input.
    return Cast(KT(f"metrics__{metric}__{part}"), FloatField())


LEADERBOARD_FIELDS = (
    "id",
    "run_id",
    "number",
    "status",
    "score",
    "ci_low",
    "ci_high",
    "passed",
    "total",
    "pending",
    "finished_at",
    "family_summary",
    # How an uploaded evaluation's interval was found, for the row's hover.
    "metrics",
    "run__id",
    "run__agent_name",
    "run__agent_version",
    "run__model_name",
    "run__origin",
    "run__over_budget",
    "run__budget_notes",
    "run__valid",
    "run__invalid_reasons",
)


@dataclass
class LeaderboardRow:
    evaluation: Evaluation
    rank: int = 0
    tied: bool = False
    family_names: list[str] = field(default_factory=list)
    # The metric the board ranks by, with its 95 % interval (the score by default).
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def run(self) -> Run:
        return self.evaluation.run

    @cached_property
    def families(self) -> list[FamilyRate | None]:
        """One entry per family of the version, None where this run has no result in it.
        Worked out when read: a page of the leaderboard reads only the rows it shows."""
        rates = {rate.family: rate for rate in family_rates(self.evaluation.family_summary)}
        return [rates.get(name) for name in self.family_names]


@dataclass
class Leaderboard:
    families: list[str]
    ranked: list[LeaderboardRow]  # the rows of ``ranked_page``
    invalid: list[LeaderboardRow]  # agent runs that broke their contract or budgets
    reference: list[LeaderboardRow]
    ranked_page: Page | None = None  # of every ranked run's Standing
    # Agent runs none of whose results could be verified (families with no verifier yet):
    # they have no score, so no rank.
    unscored: list[LeaderboardRow] = field(default_factory=list)


@dataclass
class Standing:
    """One run's place in the ranking: the few columns ranking needs, for every run."""

    evaluation_id: int
    score: float | None
    ci_low: float | None
    ci_high: float | None
    origin: str
    over_budget: bool
    valid: bool = True
    total: int = 0
    pending: int = 0
    rank: int = 0
    tied: bool = False

    @property
    def unscored(self) -> bool:
        return self.score is None and self.pending > 0 and self.pending >= self.total


def leaderboard(
    contract_version: ContractVersion,
    *,
    evaluator: str = DEFAULT_EVALUATOR,
    metric: str | None = None,
    page: str | int | None = None,
    per_page: int = 100,
) -> Leaderboard:
    """Ranked runs (one page of them), invalid runs (a contract rule broken, or over budget)
    and reference runs of one version, by one scorer's metric (runs.evaluators; default its
    primary one): each run's latest done evaluation by that scorer counts, and a Standing's
    score is that metric.

    Two queries whatever the number of runs: every run's standing as plain values (ranks and
    ties count every run), then the evaluations and runs of the rows shown. Model objects for
    a thousand runs cost ten times the query; a page needs a hundred.
    """
    standings = [
        Standing(*values)
        for values in _board_evaluations(contract_version, evaluator, metric).values_list(
            "id",
            "metric_value",
            "metric_low",
            "metric_high",
            "run__origin",
            "run__over_budget",
            "run__valid",
            "total",
            "pending",
        )
    ]
    # Only valid runs are ranked; over budget is invalid too (checked on its own as well, for
    # runs submitted before validity was recorded).
    agents = [s for s in standings if s.origin == CandidateOrigin.AGENT]
    invalid = [s for s in agents if not s.valid or s.over_budget]
    unscored = [s for s in agents if s.unscored and s not in invalid]
    ranked = [s for s in agents if s not in invalid and not s.unscored]
    reference = [s for s in standings if s.origin != CandidateOrigin.AGENT]
    _rank(ranked)
    ranked_page = Paginator(ranked, per_page).get_page(page)
    shown = [*ranked_page.object_list, *invalid, *unscored, *reference]
    evaluations = (
        Evaluation.objects.select_related("run")
        .only(*LEADERBOARD_FIELDS)
        .in_bulk([s.evaluation_id for s in shown])
    )
    names = sorted(contract_version.family_counts)

    def rows(part: list[Standing]) -> list[LeaderboardRow]:
        return [
            LeaderboardRow(
                evaluations[s.evaluation_id],
                s.rank,
                s.tied,
                family_names=names,
                value=s.score,
                ci_low=s.ci_low,
                ci_high=s.ci_high,
            )
            for s in part
        ]

    return Leaderboard(
        names,
        rows(list(ranked_page.object_list)),
        rows(invalid),
        rows(reference),
        ranked_page=ranked_page,
        unscored=rows(unscored),
    )


def _rank(standings: list[Standing]) -> None:
    """Competition ranking (1, 2, 2, 4); rows whose interval overlaps the leader's are ties
    within noise — the data cannot tell them apart from the leader."""
    if not standings:
        return
    leader = evaluation_interval(standings[0])
    previous_score: float | None = None
    for index, standing in enumerate(standings):
        score = standing.score
        standing.rank = (
            standings[index - 1].rank if index and score == previous_score else index + 1
        )
        previous_score = score
        interval = evaluation_interval(standing)
        standing.tied = bool(index and leader and interval and interval.overlaps(leader))
