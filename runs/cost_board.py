"""Reads for the leaderboard's cost chart: every ranked run's cost on the chosen axis, in
two queries whatever the number of runs (the runs' usage, and for wall time or steps the
site's own per-task figures of live episode runs)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import FloatField, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from packs.models import ContractVersion
from runs.cost_axes import CostAxis, axis_get, cost_figure
from runs.cost_chart import CostChart, CostPoint, cost_chart
from runs.evaluators import BoardChoice
from runs.models import Candidate, Evaluation, RunMode
from runs.selectors import Leaderboard, Standing

# Axes the site measures per task for live episodes (episodes.lifecycle writes them on each
# candidate's usage); dollars and tokens come from Run.measured_usage, which the gateway fills.
EPISODE_AXES = ("wall", "steps")


def leaderboard_cost_chart(
    contract_version: ContractVersion,
    board: Leaderboard | None,
    choice: BoardChoice,
    axis_key: str | None,
) -> CostChart | None:
    """The cost chart of the board the page shows, on the axis ``?axis=`` names."""
    if board is None or choice.evaluator is None:
        return None
    lower = choice.evaluator.direction(choice.metric) == "lower"
    return board_cost_chart(contract_version, board, axis_get(axis_key), higher_is_better=not lower)


def board_cost_chart(
    contract_version: ContractVersion,
    board: Leaderboard,
    axis: CostAxis,
    *,
    higher_is_better: bool,
) -> CostChart:
    """The chart of every ranked run (not only the page shown), and each shown row's point
    (``row.cost``) for the leaderboard table's cost column."""
    points = ranked_costs(contract_version, board.standings, axis)
    chart = cost_chart(axis, points, higher_is_better=higher_is_better)
    by_run = {point.run_id: point for point in points}
    for row in board.ranked:
        row.cost = by_run.get(row.run.pk)
    return chart


def ranked_costs(
    contract_version: ContractVersion, standings: Iterable[Standing], axis: CostAxis
) -> list[CostPoint]:
    standings = list(standings)
    measured_names = {name: f"measured_{name}" for name in axis.parts}
    rows = (
        Evaluation.objects.filter(pk__in=[s.evaluation_id for s in standings])
        # Only the figures summed, not the per-task dict a gateway run carries.
        .annotate(
            **{
                alias: Cast(KeyTextTransform(name, "run__measured_usage"), FloatField())
                for name, alias in measured_names.items()
            }
        )
        .values(
            "id",
            "run_id",
            "run__agent_name",
            "run__agent_version",
            "run__model_name",
            "run__usage",
            *measured_names.values(),
        )
    )
    by_evaluation = {row["id"]: row for row in rows}
    episodes = episode_figures(contract_version, axis) if axis.key in EPISODE_AXES else {}
    points = []
    for standing in standings:
        row = by_evaluation[standing.evaluation_id]
        measured: dict[str, Any] = {name: row[alias] for name, alias in measured_names.items()}
        measured.update(episodes.get(row["run_id"], {}))
        points.append(
            CostPoint(
                run_id=row["run_id"],
                label=run_label(row),
                rank=standing.rank,
                score=standing.score,
                figure=cost_figure(axis, measured, row["run__usage"]),
            )
        )
    return points


def episode_figures(
    contract_version: ContractVersion, axis: CostAxis
) -> dict[int, dict[str, float]]:
    """Each live episode run's per-task figures summed (what the site measured itself)."""
    totals = (
        Candidate.objects.filter(run__contract_version=contract_version, run__mode=RunMode.EPISODES)
        .values("run_id")
        .annotate(
            **{
                name: Sum(Cast(KeyTextTransform(name, "usage"), FloatField()))
                for name in axis.parts
            }
        )
        .order_by()
    )
    return {
        row["run_id"]: {name: row[name] for name in axis.parts if row[name] is not None}
        for row in totals
    }


def run_label(row: dict[str, Any]) -> str:
    parts = [row["run__agent_name"], row["run__agent_version"]]
    label = " ".join(part for part in parts if part)
    return f"{label} ({row['run__model_name']})" if row["run__model_name"] else label
