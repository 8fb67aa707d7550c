"""Reads for runs with several candidates (samples) per task: which results belong to which
sample, and each task's passes out of its samples (issue 13 §3). Pages read these; the
metrics over samples (pass@k) are the evaluator's (runs.pipeline, runs.evaluators)."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from runs.models import Candidate, Evaluation, ResultStatus, Run, TaskResult

# Results without a pass or fail (yet, or ever: deferred families): counted apart per task.
OPEN_OR_PENDING = (ResultStatus.QUEUED, ResultStatus.RUNNING, ResultStatus.PENDING)


def has_samples(run: Run) -> bool:
    """Whether some task of the run has more than one candidate (a sample 1 exists): pages
    then show the sample of each result and every task's passes out of its samples.

    Asked of the candidates (fixed once the run is submitted; every evaluation has one result
    per candidate), not of the results: a done evaluation's page never queries those twice."""
    return Candidate.objects.filter(run=run, sample__gt=0).exists()


def task_passes(evaluation: Evaluation) -> QuerySet[TaskResult]:
    """Per task, in task order: how many of its samples passed, out of how many (one grouped
    query, read a page at a time). Rows are dicts with task__task_id, family, position,
    passed, total and pending."""
    return (
        TaskResult.objects.filter(evaluation=evaluation)
        .values("task_id", "task__task_id", "family", "position")
        .annotate(
            total=Count("id"),
            passed=Count("id", filter=Q(status=ResultStatus.PASSED)),
            pending=Count("id", filter=Q(status__in=OPEN_OR_PENDING)),
        )
        .order_by("position")
    )
