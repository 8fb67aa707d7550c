"""Results scored by an uploaded evaluation's program (evaluations.execution), and the run's
metrics from them.

Scope ``task``: each claimed result is one program call; its verdict and validated metrics
are written under the claim like any verifier's. Scope ``run``: results only collect (each
"scored as part of the run"); once every one is final, one job calls the program over the
whole run and stores its outcome on the evaluation; only then can the evaluation finish
(runs.pipeline). A program that fails is the evaluation's error: the run-scope outcome says
so and the run has no metrics from it, and no candidate is blamed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from evaluations.aggregate import (
    NoWorstValue,
    aggregate,
    bootstrap_seed,
    per_task_values,
    worst_value,
)
from evaluations.execution import ScoredCandidate, evaluation_call, task_verdict
from evaluations.registry import manifest_of, uploaded_definition
from packs.selectors import evaluator_lanes_for_tasks
from runs.candidates import verifier_candidate
from runs.evaluators import Evaluator
from runs.models import Evaluation, ResultStatus, TaskResult
from verifiers.sandbox import Sandbox, SandboxUnavailable
from verifiers.task import TaskLanes
from verifiers.verdict import PASSED, Reason, Verdict

RUN_SCOPE_NOTE = "scored as part of the run (the evaluation's scope is run)"
# Results failed before any program call: nothing was submitted, or it broke the contract.
# They count as each metric's worst value (evaluations.aggregate), never as absent.
UNSCORED_REASONS = (Reason.MISSING_CANDIDATE, Reason.CONTRACT_VIOLATION)


def program_verdict(
    evaluator: Evaluator, result: TaskResult, lanes: TaskLanes, sandbox: Sandbox | None
) -> tuple[Verdict, dict[str, Any]]:
    """The verdict of one result under an uploaded evaluation, with its metrics."""
    if evaluator.scope == "run":
        return Verdict(PASSED, score=1.0, details={"note": RUN_SCOPE_NOTE}), {}
    definition = uploaded_definition(evaluator.key)
    if definition is None:  # deleted under us: cannot happen while evaluations are kept
        raise LookupError(f"evaluation {evaluator.key} is not stored")
    candidate = verifier_candidate(result.candidate) if result.candidate else None
    return task_verdict(definition, sandbox, ScoredCandidate(lanes, candidate, result.sample))


# --- run scope -----------------------------------------------------------------------------------


def run_scope_outcome(evaluation_id: int, sandbox: Sandbox | None) -> tuple[dict[str, Any], str]:
    """One call of a run-scope program over every result of the run: what the evaluation
    stores as its program outcome (metrics, or the evaluation's error). A result with nothing
    to score (no candidate, or one that broke the contract) is listed with an empty candidate
    folder, so the program counts it as it counts a missing artifact; left out, a run that
    skipped its hard tasks would be pooled over the easy ones only. Raises
    SandboxUnavailable (ours: the job is sent again) when no sandbox could start."""
    evaluation = Evaluation.objects.get(pk=evaluation_id)
    definition = uploaded_definition(evaluation.evaluator)
    if definition is None:
        return {"status": "error", "problem": f"{evaluation.evaluator} is not stored"}, ""
    results = list(
        TaskResult.objects.filter(evaluation_id=evaluation_id)
        .exclude(status=ResultStatus.PENDING)
        .select_related("task", "candidate")
        .order_by("position", "sample")
    )
    lanes = evaluator_lanes_for_tasks([result.task for result in results])
    items = [
        ScoredCandidate(
            lanes[r.task_id],
            None if r.failure_reason in UNSCORED_REASONS else verifier_candidate(r.candidate),
            r.sample,
        )
        for r in results
    ]
    if sandbox is None:
        raise SandboxUnavailable("no sandbox backend is usable on this worker")
    outcome = evaluation_call(definition, sandbox, items)
    stored: dict[str, Any] = {
        "status": outcome.status,
        "problem": outcome.problem,
        "backend": outcome.backend,
        "image": outcome.image or "",
        "duration_seconds": outcome.duration_seconds,
        "tasks": len(items),
    }
    if outcome.status == "ok":
        stored["metrics"] = {
            name: {**value, "interval": _run_interval_words(value)}
            for name, value in outcome.metrics.items()
        }
    return stored, outcome.log


def _run_interval_words(value: dict[str, Any]) -> str:
    if value.get("ci_low") is None or value.get("ci_high") is None:
        return "no interval (the evaluation gave none)"
    return "the evaluation's own"


# --- the run's metrics ---------------------------------------------------------------------------


def program_metrics(
    evaluator: Evaluator, evaluation: Evaluation, results: QuerySet[TaskResult]
) -> dict[str, dict[str, Any]]:
    """The run's metrics under an uploaded evaluation: for task scope, each metric's mean
    over tasks with a seeded bootstrap interval (evaluations.aggregate); for run scope, what
    the program reported over the whole run."""
    if evaluator.scope == "run":
        outcome = evaluation.program_outcome or {}
        return dict(outcome.get("metrics") or {})
    scored = results.filter(status__in=(ResultStatus.PASSED, ResultStatus.FAILED))
    nothing_to_score = Q(failure_reason__in=UNSCORED_REASONS, metrics={})
    rows = list(
        scored.exclude(nothing_to_score)
        .values_list("task_id", "metrics")
        .order_by("task_id", "sample")
    )
    unscored = list(scored.filter(nothing_to_score).values_list("task_id", flat=True))
    metrics: dict[str, dict[str, Any]] = {}
    definition = uploaded_definition(evaluator.key)
    declared = manifest_of(definition).metrics if definition else ()
    for metric in declared:
        seed = bootstrap_seed(evaluator.key, evaluation.run_id, metric.name)
        worst = worst_value(metric.direction, metric.minimum, metric.maximum)
        try:
            values = per_task_values(rows, metric.name, unscored=unscored, worst=worst)
        except NoWorstValue:
            continue  # no number rather than one that leaves the skipped tasks out
        found = aggregate(values, seed)
        if found is not None:
            metrics[metric.name] = found.as_json()
    return metrics
