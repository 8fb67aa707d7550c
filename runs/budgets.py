"""The contract's budgets against the usage a run reports.

Budgets (``contract.budgets`` in the manifest: ``wall_time_seconds``, ``tokens``, ``usd``,
``steps``) are per task: each task's reported usage is held to them, and the run-level total to
the budget times the number of tasks in the contract version. Live episodes have their wall
time and steps measured by the site, not reported (episodes.budgets). A run over budget is
still scored, but it is not eligible for the leaderboard, and the page says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Budget key → how to read the matching figure from a usage dict, and its unit for messages.
BUDGET_FIGURES: dict[str, tuple[str, ...]] = {
    "wall_time_seconds": ("wall_seconds",),
    "tokens": ("input_tokens", "output_tokens"),
    "usd": ("usd",),
    # Counted by the site itself for live episodes (episodes app); a bundle may report it.
    "steps": ("steps",),
}
UNITS = {"wall_time_seconds": "seconds", "tokens": "tokens", "usd": "USD", "steps": "steps"}
MAX_NOTES = 20


@dataclass(frozen=True)
class BudgetCheck:
    over_budget: bool
    notes: list[str]
    totals: dict[str, float]


# A reported usage figure beyond this is no measurement (1e15 tokens, seconds or dollars):
# refused where it enters, so every sum the budget check makes stays a finite number that
# the database's JSON can store.
MAX_USAGE_FIGURE = 1e15


def usage_figure_problem(value: Any) -> str | None:
    """Why ``value`` is not a usage figure (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return "must be a non-negative number"
    if not value <= MAX_USAGE_FIGURE:  # also NaN and infinity
        return f"must be a finite number of at most {MAX_USAGE_FIGURE:g}"
    return None


def contract_budgets(contract: Mapping[str, Any] | None) -> dict[str, float]:
    budgets = (contract or {}).get("budgets") or {}
    if not isinstance(budgets, dict):
        return {}
    return {
        key: float(value)
        for key, value in budgets.items()
        if key in BUDGET_FIGURES and isinstance(value, int | float) and not isinstance(value, bool)
    }


def usage_figure(usage: Mapping[str, Any], budget_key: str) -> float | None:
    parts = [usage.get(name) for name in BUDGET_FIGURES[budget_key]]
    numbers = [float(part) for part in parts if isinstance(part, int | float)]
    return sum(numbers) if numbers else None


def usage_totals(
    run_usage: Mapping[str, Any], task_usages: Iterable[Mapping[str, Any]]
) -> dict[str, float]:
    """Run-level figures as reported, or else the sums of the per-task figures."""
    sums: dict[str, float] = {}
    for usage in task_usages:
        for key, value in usage.items():
            sums[key] = sums.get(key, 0.0) + float(value)
    return {**sums, **{key: float(value) for key, value in run_usage.items()}}


def check_budgets(
    budgets: Mapping[str, float],
    run_usage: Mapping[str, Any],
    task_usages: Iterable[tuple[str, Mapping[str, Any]]],
    task_count: int,
    *,
    samples: int = 1,
) -> BudgetCheck:
    """Each line's usage against the per-task budgets, and the run's total against the budget
    × the tasks × the samples per task (each sample is an attempt of its own)."""
    notes: list[str] = []
    task_usages = list(task_usages)
    for task_id, usage in task_usages:
        for key, limit in budgets.items():
            figure = usage_figure(usage, key)
            if figure is not None and figure > limit:
                notes.append(
                    f"task {task_id} used {_number(figure)} {UNITS[key]}, over the budget of "
                    f"{_number(limit)} per task"
                )
    totals = usage_totals(run_usage, (usage for _, usage in task_usages))
    slots = task_count * max(1, samples)
    per = f"{task_count} tasks" + (f" × {samples} samples" if samples > 1 else "")
    for key, limit in budgets.items():
        figure = usage_figure(totals, key)
        if figure is not None and figure > limit * slots:
            notes.append(
                f"the run used {_number(figure)} {UNITS[key]} in all, over the budget of "
                f"{_number(limit * slots)} for {per}"
            )
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"… and {len(notes) - MAX_NOTES} more"]
    return BudgetCheck(over_budget=bool(notes), notes=notes, totals=totals)


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
