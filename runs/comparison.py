"""Two runs of one contract version compared task by task: which tasks each passed, and
McNemar's exact test of whether the difference is more than chance (the compare page)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Case,
    CharField,
    Count,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
)

from packs.models import Task
from runs.models import Evaluation, EvaluationStatus, ResultStatus, Run, TaskResult
from runs.stats import mcnemar_exact_p


class CompareError(Exception):
    """Two runs that cannot be compared; the message is shown as is."""


VERDICT_CATEGORIES = {
    "both": "both passed",
    "only_a": "only A passed",
    "only_b": "only B passed",
    "neither": "neither passed",
}


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    evaluation_a: Evaluation
    evaluation_b: Evaluation
    counts: dict[str, int]
    p_value: float

    @property
    def significant(self) -> bool:
        return self.p_value < 0.05


def latest_done_evaluation(run: Run) -> Evaluation | None:
    return run.evaluations.filter(status=EvaluationStatus.DONE).order_by("-number").first()


def _scored(run: Run) -> Evaluation:
    evaluation = latest_done_evaluation(run)
    if evaluation is None:
        raise CompareError(
            f"Run {run.pk} has no finished evaluation yet; compare it once scoring is done."
        )
    return evaluation


def comparison(a: Run, b: Run) -> Comparison:
    if a.contract_version_id != b.contract_version_id:
        raise CompareError(
            f"Run {a.pk} is on {a.contract_version} and run {b.pk} on {b.contract_version}: "
            "only runs on the same contract version answer the same tasks, so only they can "
            "be compared."
        )
    if a.pk == b.pk:
        raise CompareError("Choose two different runs to compare.")
    evaluation_a, evaluation_b = _scored(a), _scored(b)
    rows = (
        verdict_pairs(evaluation_a, evaluation_b)
        .values("verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = dict.fromkeys(VERDICT_CATEGORIES, 0)
    counts.update({row["verdict"]: row["n"] for row in rows})
    p_value = mcnemar_exact_p(counts["only_a"], counts["only_b"])
    return Comparison(a, b, evaluation_a, evaluation_b, counts, p_value)


def verdict_pairs(evaluation_a: Evaluation, evaluation_b: Evaluation) -> QuerySet[Task]:
    """Every task of the version with both verdicts side by side (one query, no N+1).

    Built on the tasks, not on one evaluation's results, so a task missing from either
    evaluation still counts (as not passed). A run with several samples per task is compared
    on each task's sample 0: McNemar's test pairs one pass/fail per task, sample 0 is the one
    every run has (single-sample runs have nothing else), and the first sample is an unbiased
    draw of the agent's pass@1 — a majority or a pass fraction would not be."""

    def pick(evaluation: Evaluation, field_name: str) -> Subquery:
        results = TaskResult.objects.filter(evaluation=evaluation, task=OuterRef("pk"), sample=0)
        return Subquery(results.values(field_name)[:1])

    passed = Value(ResultStatus.PASSED)
    return (
        Task.objects.filter(contract_version_id=evaluation_a.run.contract_version_id)
        .annotate(
            a_status=pick(evaluation_a, "status"),
            b_status=pick(evaluation_b, "status"),
            a_result=pick(evaluation_a, "id"),
            b_result=pick(evaluation_b, "id"),
        )
        .annotate(
            a_passed=Case(When(a_status=passed, then=1), default=0, output_field=IntegerField()),
            b_passed=Case(When(b_status=passed, then=1), default=0, output_field=IntegerField()),
        )
        .annotate(
            verdict=Case(
                When(a_passed=1, b_passed=1, then=Value("both")),
                When(a_passed=1, then=Value("only_a")),
                When(b_passed=1, then=Value("only_b")),
                default=Value("neither"),
                output_field=CharField(),
            )
        )
        .only("id", "task_id", "family", "position")
        .order_by("position")
    )
