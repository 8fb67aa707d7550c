"""Budgets the site measures itself for an episode, rather than trusting the agent's report.

``budgets.steps`` and ``budgets.wall_time_seconds`` are per task. Steps count every reset,
step and tool call; wall time runs from the episode's first reset. The step that would go
past either is not run: it ends the episode, truncated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from episodes.models import Episode
from runs.budgets import contract_budgets


@dataclass(frozen=True)
class EpisodeBudgets:
    steps: int | None
    wall_time_seconds: float | None

    def as_info(self) -> dict[str, Any]:
        return {"steps": self.steps, "wall_time_seconds": self.wall_time_seconds}


def episode_budgets(episode: Episode) -> EpisodeBudgets:
    budgets = contract_budgets(episode.episode_run.run.contract_version.contract)
    steps = budgets.get("steps")
    return EpisodeBudgets(
        steps=int(steps) if steps is not None else None,
        wall_time_seconds=budgets.get("wall_time_seconds"),
    )


def budget_crossed(budgets: EpisodeBudgets, *, steps: int, since: datetime | None) -> str:
    """Which budget this step goes past, as a sentence; empty when within both."""
    if budgets.steps is not None and steps > budgets.steps:
        return f"step {steps} is past the budget of {budgets.steps} steps"
    if budgets.wall_time_seconds is not None and since is not None:
        elapsed = (timezone.now() - since).total_seconds()
        if elapsed > budgets.wall_time_seconds:
            return (
                f"{elapsed:.1f} s since reset is past the budget of {budgets.wall_time_seconds:g} s"
            )
    return ""
