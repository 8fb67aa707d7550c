"""Each task's cost for the compare page, beside its two verdicts: measured by the site when
it can be (the gateway's per-task sums in ``Run.measured_usage["tasks"]``; a live episode's
wall time and steps), else as the agent reported it on the task's line, marked reported."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import JSONField, OuterRef, QuerySet, Subquery

from packs.models import Task
from runs.cost_axes import CostAxis, CostFigure, cost_figure
from runs.models import Candidate, Run, RunMode


def with_task_usage(pairs: QuerySet[Task], a: Run, b: Run) -> QuerySet[Task]:
    """``pairs`` (runs.comparison.verdict_pairs) with each run's usage of the task's sample 0,
    the sample the verdicts compare: two subqueries, no query per row."""

    def usage(run: Run) -> Subquery:
        candidates = Candidate.objects.filter(run=run, task=OuterRef("pk"), sample=0)
        return Subquery(candidates.values("usage")[:1], output_field=JSONField())

    return pairs.annotate(a_usage=usage(a), b_usage=usage(b))


def task_cost(
    axis: CostAxis, run: Run, task_id: str, usage: Mapping[str, Any] | None
) -> CostFigure | None:
    tasks = (run.measured_usage or {}).get("tasks")
    measured = dict(tasks.get(task_id) or {}) if isinstance(tasks, dict) else {}
    # A live episode's candidate usage is what the site measured (episodes.lifecycle).
    if run.mode == RunMode.EPISODES:
        return cost_figure(axis, {**measured, **(usage or {})}, None)
    return cost_figure(axis, measured, usage)
