"""Re-run only what errored: a new evaluation of a run that verifies again the results an
error of ours left unjudged and takes every other verdict over unchanged.

Errors of ours (a sandbox backend that broke, retries that ran out) are not the agent's, so
scoring the whole run again would spend a worker's time on verdicts that already stand. The
new evaluation keeps its predecessor's scorer, so its verdicts compare with a clean run's;
each carried-over result names the one it came from (``TaskResult.carried_from``), and a
result with none was verified by this evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from runs.evaluators import evaluator_get
from runs.models import Evaluation, ResultStatus, Run, TaskResult
from runs.pipeline import evaluation_dispatch, evaluation_finish_if_done
from runs.services import BULK_BATCH, result_rows

# What a carried-over result takes from the one it copies: its verdict and how it was found.
CARRIED_FIELDS = (
    "status",
    "score",
    "failure_reason",
    "details",
    "stdout",
    "stderr",
    "metrics",
    "duration_seconds",
    "sandbox_backend",
    "sandbox_image",
    "attempts",
    "worker",
    "started_at",
    "finished_at",
)


class NothingToRerun(ValueError):
    """The run has no done evaluation with errors to re-run; the message is for users."""


def errored_source(run: Run) -> Evaluation:
    """The evaluation a re-run starts from: the run's latest, done and with errors."""
    latest = run.evaluations.order_by("-number").first()
    if latest is None or not latest.is_done:
        raise NothingToRerun(
            f"run {run.pk} has no finished evaluation yet: re-run what errored once it is done"
        )
    if not latest.errored:
        raise NothingToRerun(
            f"evaluation {latest.number} of run {run.pk} has no errored result to re-run"
        )
    if evaluator_get(latest.evaluator).scope == "run":
        raise NothingToRerun(
            f"{latest.evaluator} scores the whole run in one call: re-evaluate the run instead"
        )
    return latest


def evaluation_rerun_errored(run: Run, *, created_by: Any = None) -> Evaluation:
    """A new evaluation by the latest one's scorer: its errored results queued again, every
    other result carried over unchanged. Raises NothingToRerun when there is nothing to do."""
    with transaction.atomic():
        Run.objects.select_for_update().get(pk=run.pk)
        source = errored_source(run)
        number = (run.evaluations.aggregate(top=Max("number"))["top"] or 0) + 1
        evaluation = Evaluation.objects.create(
            run=run,
            number=number,
            evaluator=source.evaluator,
            created_by=created_by if getattr(created_by, "is_authenticated", False) else None,
            rerun_of=source,
        )
        rows = result_rows(evaluation, run, timezone.now())
        carry_over(source, rows)
        TaskResult.objects.bulk_create(rows, batch_size=BULK_BATCH)
        Evaluation.objects.filter(pk=evaluation.pk).update(total=len(rows))
        evaluation_finish_if_done(evaluation.pk)
        transaction.on_commit(lambda: evaluation_dispatch(evaluation.pk))
    evaluation.refresh_from_db()
    return evaluation


def carry_over(source: Evaluation, rows: list[TaskResult]) -> None:
    """Give each new row the verdict of its (task, sample) in ``source`` unless that one
    errored: an errored result (and one ``source`` never had) stays as it was made, to be
    verified again."""
    earlier = {
        (result.task_id, result.sample): result
        for result in source.results.exclude(status=ResultStatus.ERROR).only(
            "pk", "task_id", "sample", *CARRIED_FIELDS
        )
    }
    for row in rows:
        found = earlier.get((row.task_id, row.sample))
        if found is None:
            continue
        for name in CARRIED_FIELDS:
            setattr(row, name, getattr(found, name))
        row.carried_from = found


@dataclass(frozen=True)
class RerunCounts:
    """How a re-run of what errored was made: results it took over, results it verified."""

    source_number: int
    carried: int
    reverified: int


def rerun_counts(evaluation: Evaluation) -> RerunCounts | None:
    """None for an evaluation that is not a re-run of what errored."""
    if evaluation.rerun_of_id is None:
        return None
    results = evaluation.results.all()
    carried = results.filter(carried_from__isnull=False).count()
    source = Evaluation.objects.filter(pk=evaluation.rerun_of_id).values_list("number", flat=True)
    return RerunCounts(source.first() or 0, carried, evaluation.total - carried)
