"""The evaluations that may score runs: versioned scorers, each known by ``name@version``.

An evaluation row (runs.models.Evaluation) stores the key of the scorer that produced its
metrics, so that a changed task (a new contract version) and a changed scorer (a new scorer
version) can be told apart. Hence the one rule of this registry:

    Changing a scorer's behaviour means registering a new version of it, never editing the
    old one. The numbers stored under ``securebench@1`` must stay what ``securebench@1``
    computes; and no entry is ever removed, since stored evaluations name it.

A scorer does not run verifiers: every evaluation runs the same verifiers on every sample
(runs.pipeline), and the scorer turns the final verdicts, counted per task, into metrics.
A contract version's ``compatible_evaluations`` says which scorers may score its runs
(``allowed_evaluators``); listing none means ``securebench@1`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from evaluations.registry import manifest_of, uploaded_definition
from runs.stats import wilson_interval
from verifiers.families import get_family

DEFAULT_EVALUATOR = "securebench@1"
PASS_AT_K = (1, 10, 100)


class UnknownEvaluator(LookupError):
    """A key that names no scorer of this registry."""

    def __str__(self) -> str:  # LookupError would quote the message like a dict key
        return str(self.args[0]) if self.args else ""


class EvaluatorNotAllowed(ValueError):
    """A scorer the run's contract version does not allow (or the version allows none that
    this site knows). The message names what is allowed and is meant for users."""


@dataclass(frozen=True)
class TaskCounts:
    """One task's final samples in an evaluation.

    ``n`` counts the samples that were scored (passed, failed or error: an error of ours
    counts as not passed); ``pending`` samples (a family without a verifier) are not counted
    at all. ``c`` counts the passed samples; ``score_sum`` adds the scores of passed and
    failed samples (verifiers may give partial credit).
    """

    family: str
    n: int
    c: int
    score_sum: float = 0.0


@dataclass(frozen=True)
class MetricValue:
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    k: int | None = None  # pass@k metrics only

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high}
        if self.k is not None:
            data["k"] = self.k
        return data


Compute = Callable[[list[TaskCounts]], dict[str, MetricValue]]


@dataclass(frozen=True)
class Evaluator:
    name: str
    version: int
    metrics: tuple[str, ...]  # every metric it may emit, in display order
    families: frozenset[str] | None  # None: every family that has a verifier
    primary_metric: str  # Evaluation.score; what a leaderboard ranks by default
    compute: Compute  # called with the scored tasks only (see ``evaluate``)
    description: str = ""
    # An evaluation an author uploaded (evaluations app): its program scores each result
    # (scope "task") or the whole run (scope "run"); ``compute`` is not used for it.
    program: bool = False
    scope: str = "task"
    directions: tuple[tuple[str, str], ...] = ()  # (metric, "higher" | "lower")

    def direction(self, metric: str) -> str:
        return dict(self.directions).get(metric, "higher")

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def scores_family(self, family: str) -> bool:
        if self.families is None:
            return get_family(family).active
        return family in self.families

    def evaluate(self, per_task: Iterable[TaskCounts]) -> dict[str, MetricValue]:
        """The metrics over the tasks this scorer scores: a task of another family, or whose
        samples are all pending, is left out (not counted as a failure)."""
        scored = [task for task in per_task if task.n > 0 and self.scores_family(task.family)]
        return self.compute(scored)


# --- pass rate ---------------------------------------------------------------------------------


def _pass_rate(tasks: list[TaskCounts]) -> dict[str, MetricValue]:
    """Mean over tasks of the task's mean sample score, with its Wilson 95 % interval.

    With one sample per task this is the site's score as it always was: the mean task score
    over tasks that have a verifier, the interval counting each task's score as a fractional
    success.
    """
    if not tasks:
        return {"pass_rate": MetricValue(None)}
    return {"pass_rate": _mean_with_interval([task.score_sum / task.n for task in tasks])}


def _mean_with_interval(values: list[float], k: int | None = None) -> MetricValue:
    """The mean of per-task values in [0, 1], with Wilson's interval on their sum."""
    total = sum(values)
    interval = wilson_interval(total, len(values))
    if interval is None:
        return MetricValue(None, k=k)
    return MetricValue(total / len(values), interval.low, interval.high, k)


# --- pass@k ------------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021)'s unbiased estimate of the chance that at least one of k samples
    drawn (without replacement) from n passes, when c of the n passed: 1 - C(n-c, k)/C(n, k).

    The binomials overflow floats long before n gets large; their ratio is the product
    prod_{i=n-c+1}^{n} (1 - k/i), whose factors all lie in [0, 1).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n and 0 <= c <= n (n={n}, c={c})")
    if n - c < k:
        return 1.0  # every draw of k samples holds a passing one
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def _pass_at_k_metrics(tasks: list[TaskCounts]) -> dict[str, MetricValue]:
    """pass@k for each k in PASS_AT_K that every scored task has samples for (k <= min n),
    averaged over tasks.

    The interval is Wilson's, with the sum of the per-task estimates as fractional
    successes, as for ``pass_rate``. Why it holds: the benchmark's tasks are the sample,
    each contributing a value in [0, 1] (the per-task estimate, whose own sampling noise
    is part of its spread); a variable in [0, 1] with mean p has variance at most p(1-p),
    the Bernoulli variance Wilson's interval assumes, so the interval is, if anything, wide.
    """
    if not tasks:
        return {}
    fewest = min(task.n for task in tasks)
    metrics: dict[str, MetricValue] = {}
    for k in PASS_AT_K:
        if k > fewest:
            break
        estimates = [pass_at_k(task.n, task.c, k) for task in tasks]
        metrics[f"pass@{k}"] = _mean_with_interval(estimates, k)
    return metrics


# --- the registry ------------------------------------------------------------------------------

EVALUATORS: dict[str, Evaluator] = {
    evaluator.key: evaluator
    for evaluator in (
        Evaluator(
            name="securebench",
            version=1,
            metrics=("pass_rate",),
            families=None,
            primary_metric="pass_rate",
            compute=_pass_rate,
            description="the site's verifiers; mean task score with its Wilson interval",
        ),
        Evaluator(
            name="securebench-pass-at-k",
            version=1,
            metrics=tuple(f"pass@{k}" for k in PASS_AT_K),
            families=None,
            primary_metric="pass@1",
            compute=_pass_at_k_metrics,
            description="the site's verifiers; unbiased pass@k (Chen et al. 2021) for the k "
            "the samples per task allow",
        ),
    )
}


def evaluator_get(key: str) -> Evaluator:
    evaluator = EVALUATORS.get(key) or _uploaded(key)
    if evaluator is None:
        known = ", ".join(EVALUATORS)
        raise UnknownEvaluator(
            f"{key!r} is not an evaluation this site knows (built in: {known}; or one uploaded)"
        )
    return evaluator


def evaluator_known(key: str) -> bool:
    return key in EVALUATORS or uploaded_definition(key) is not None


def _uploaded(key: str) -> Evaluator | None:
    definition = uploaded_definition(key)
    if definition is None:
        return None
    manifest = manifest_of(definition)
    return Evaluator(
        name=manifest.id,
        version=manifest.version,
        metrics=tuple(metric.name for metric in manifest.metrics),
        families=None,
        primary_metric=manifest.primary.name,
        compute=_program_metrics,
        description=manifest.title or manifest.description[:200],
        program=True,
        scope=manifest.scope,
        directions=tuple((metric.name, metric.direction) for metric in manifest.metrics),
    )


def _program_metrics(tasks: list[TaskCounts]) -> dict[str, MetricValue]:
    """An uploaded evaluation's metrics come from its program (runs.program_results)."""
    return {}


def listed_evaluations(contract: dict[str, Any] | None) -> list[str]:
    """What the contract lists, known here or not, without repeats."""
    listed = (contract or {}).get("compatible_evaluations") or []
    return list(dict.fromkeys(str(key) for key in listed))


def allowed_evaluators(contract: dict[str, Any] | None) -> list[str]:
    """The scorers that may score runs of a version with this contract, in the contract's
    order: the listed ones this site knows; ``securebench@1`` when none is listed. Empty
    when every listed one is unknown here (``scoring_problem`` says so)."""
    listed = listed_evaluations(contract)
    if not listed:
        return [DEFAULT_EVALUATOR]
    return [key for key in listed if evaluator_known(key)]


def scoring_problem(contract: dict[str, Any] | None) -> str | None:
    """Why runs of this version cannot be scored here, or None when they can."""
    if allowed_evaluators(contract):
        return None
    listed = ", ".join(listed_evaluations(contract))
    return (
        f"This version's contract allows only evaluations this site does not know "
        f"({listed}), so its runs cannot be scored here. Known evaluations: "
        f"{', '.join(EVALUATORS)}."
    )


def evaluator_choose(contract: dict[str, Any] | None, key: str | None = None) -> Evaluator:
    """The scorer for a new evaluation: ``key`` if the contract allows it, else (no key) the
    contract's first allowed one. Raises EvaluatorNotAllowed with a message for users."""
    allowed = allowed_evaluators(contract)
    problem = scoring_problem(contract)
    if problem is not None:
        raise EvaluatorNotAllowed(problem)
    if key is None or key == "":
        return evaluator_get(allowed[0])
    if key not in allowed:
        choices = ", ".join(allowed)
        if not evaluator_known(key):
            raise EvaluatorNotAllowed(
                f"{key[:80]!r} is not an evaluation this site knows; this version may be scored "
                f"by: {choices}."
            )
        raise EvaluatorNotAllowed(
            f"{key} may not score runs of this version; its contract allows: {choices}."
        )
    return evaluator_get(key)


def stored_metrics(
    key: str,
    metrics: dict[str, Any] | None,
    *,
    score: float | None = None,
    ci_low: float | None = None,
    ci_high: float | None = None,
) -> list[tuple[str, MetricValue]]:
    """A done evaluation's stored metrics in its scorer's order (PostgreSQL's jsonb reorders
    keys). An evaluation finished before metrics were stored has only its score, which is
    its scorer's primary metric."""
    metrics = metrics or {}
    evaluator = EVALUATORS.get(key) or _uploaded(key)
    if not metrics:
        if evaluator is None or score is None:
            return []
        return [(evaluator.primary_metric, MetricValue(score, ci_low, ci_high))]
    declared = evaluator.metrics if evaluator else ()
    names = [name for name in declared if name in metrics]
    names += sorted(name for name in metrics if name not in declared)
    shown: list[tuple[str, MetricValue]] = []
    for name in names:
        data = metrics[name]
        if isinstance(data, dict):
            shown.append(
                (name, MetricValue(*(data.get(f) for f in ("value", "ci_low", "ci_high", "k"))))
            )
    return shown


class ScoredEvaluation(Protocol):
    """What ``metrics_of`` reads of an evaluation (runs.models.Evaluation has it)."""

    evaluator: str
    metrics: dict[str, Any]
    score: float | None
    ci_low: float | None
    ci_high: float | None


def metrics_of(evaluation: ScoredEvaluation) -> list[tuple[str, MetricValue]]:
    """An evaluation's metrics as pages, the API and commands show them; none until done
    (an evaluation in progress has neither metrics nor a score)."""
    return stored_metrics(
        evaluation.evaluator,
        evaluation.metrics,
        score=evaluation.score,
        ci_low=evaluation.ci_low,
        ci_high=evaluation.ci_high,
    )


# --- what a leaderboard ranks by ---------------------------------------------------------------


@dataclass(frozen=True)
class BoardChoice:
    """The scorer and metric a version's leaderboard ranks by, the scorers it may offer, and
    notes for the reader when the request asked for something the version does not have."""

    evaluator: Evaluator | None  # None: the version allows no scorer known here
    metric: str
    allowed: list[Evaluator]
    notes: list[str]
    problem: str | None = None


def board_choice(
    contract: dict[str, Any] | None, evaluation: str = "", metric: str = ""
) -> BoardChoice:
    """The requested scorer and metric when the version has them; otherwise its first
    allowed scorer and that scorer's primary metric, with a note saying so."""
    allowed = [evaluator_get(key) for key in allowed_evaluators(contract)]
    if not allowed:
        return BoardChoice(None, "", [], [], scoring_problem(contract))
    notes: list[str] = []
    chosen = next((e for e in allowed if e.key == evaluation), None)
    if chosen is None:
        chosen = allowed[0]
        if evaluation:
            notes.append(
                f"{evaluation[:80]!r} is not an evaluation of this version; showing {chosen.key}."
            )
    if metric and metric not in chosen.metrics:
        notes.append(
            f"{chosen.key} has no metric {metric[:80]!r}; ranked by {chosen.primary_metric}."
        )
        metric = ""
    return BoardChoice(chosen, metric or chosen.primary_metric, allowed, notes)
