"""What the site measured of a run's model calls (the gateway meters them), kept on
``Run.measured_usage`` and held to the contract's per-task ``tokens`` and ``usd`` budgets.

Measured figures are never written from an agent's report: only the layer above that saw the
provider's answer calls ``add_measured_call``. Each call updates the run row under a lock, so
two calls landing together never lose one another's tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from runs.budgets import UNITS, contract_budgets
from runs.models import Run

# The budgets a model call spends; steps and wall time are measured elsewhere (episodes).
METERED_BUDGETS = ("tokens", "usd")
# How the note of a refused call begins: a task spent exactly to its budget is not over it,
# yet its refused call put the run over budget, which recomputing the notes must keep.
REFUSED_NOTE = "model calls refused: "


def empty_figures() -> dict[str, Any]:
    # unpriced_calls: calls whose model the price table does not know (their dollars are not
    # in "usd", which is then a lower bound).
    return {"input_tokens": 0, "output_tokens": 0, "usd": 0.0, "calls": 0, "unpriced_calls": 0}


def add_measured_call(
    run_id: int, task_id: str, input_tokens: int, output_tokens: int, usd: float | None
) -> dict[str, Any]:
    """Add one call to the run's and its task's measured totals; the run's new totals.

    A call that takes its task past a per-task budget marks the run over budget in the same
    update (the next call of that task is refused: ``spent_budget``)."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update(of=("self",))
            .select_related("contract_version")
            .get(pk=run_id)
        )
        measured = {**empty_figures(), **(run.measured_usage or {})}
        tasks = dict(measured.get("tasks") or {})
        task = {**empty_figures(), **tasks.get(task_id, {})}
        for figures in (measured, task):
            figures["input_tokens"] += input_tokens
            figures["output_tokens"] += output_tokens
            figures["calls"] += 1
            if usd is None:
                figures["unpriced_calls"] += 1
            else:
                figures["usd"] += usd
        tasks[task_id] = task
        measured["tasks"] = tasks
        run.measured_usage = measured
        fields = ["measured_usage"]
        notes = [note for note in _task_notes(run, task_id, task) if note not in run.budget_notes]
        if notes:
            run.over_budget, run.budget_notes = True, [*run.budget_notes, *notes]
            fields += ["over_budget", "budget_notes"]
        run.save(update_fields=fields)
    return measured


def task_measured(run: Run, task_id: str) -> dict[str, Any]:
    return {**empty_figures(), **((run.measured_usage or {}).get("tasks") or {}).get(task_id, {})}


def measured_figure(figures: Mapping[str, Any], budget_key: str) -> float:
    if budget_key == "tokens":
        return float(figures.get("input_tokens", 0)) + float(figures.get("output_tokens", 0))
    return float(figures.get("usd", 0.0))


def spent_budget(run: Run, task_id: str) -> str:
    """Which metered budget the task has already used up, as a sentence; empty when none.

    A call is refused once the spend reaches the budget: how many tokens a call will use is
    known only after it ran, so the call that takes a task past its budget is recorded and
    the one after it is the one refused."""
    budgets = contract_budgets(run.contract_version.contract)
    figures = task_measured(run, task_id)
    for key in METERED_BUDGETS:
        limit = budgets.get(key)
        if limit is not None and measured_figure(figures, key) >= limit:
            return (
                f"task {task_id} has used {_number(measured_figure(figures, key))} "
                f"{UNITS[key]} of model calls, the budget of {_number(limit)} per task"
            )
    return ""


def measured_budget_notes(run: Run) -> list[str]:
    """Budget notes for the tasks whose measured calls went past a per-task budget, and the
    notes of calls the gateway refused."""
    tasks = (run.measured_usage or {}).get("tasks") or {}
    refused = [note for note in run.budget_notes or [] if note.startswith(REFUSED_NOTE)]
    return [
        *(note for task_id in sorted(tasks) for note in _task_notes(run, task_id, tasks[task_id])),
        *refused,
    ]


def _task_notes(run: Run, task_id: str, figures: Mapping[str, Any]) -> list[str]:
    budgets = contract_budgets(run.contract_version.contract)
    notes = []
    for key in METERED_BUDGETS:
        limit = budgets.get(key)
        if limit is not None and measured_figure(figures, key) > limit:
            notes.append(
                f"task {task_id} measured {_number(measured_figure(figures, key))} "
                f"{UNITS[key]} of model calls, over the budget of {_number(limit)} per task"
            )
    return notes


def run_mark_refused(run_id: int, why: str) -> None:
    """A model call was refused for a spent budget: the run lists apart as over budget from
    now on (boards rank only runs within it)."""
    note = REFUSED_NOTE + why
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        notes = list(run.budget_notes or [])
        if note not in notes:
            notes.append(note)
        run.over_budget, run.budget_notes = True, notes
        run.save(update_fields=["over_budget", "budget_notes"])


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.6f}".rstrip("0")
