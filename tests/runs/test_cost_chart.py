"""The cost chart's geometry (runs.cost_chart): pure, no database."""

from __future__ import annotations

from runs.cost_axes import AXES, CostFigure
from runs.cost_chart import CostPoint, cost_chart, nice_ticks


def point(run_id: int, score: float | None, usd: float | None, reported: bool = False):
    figure = None if usd is None else CostFigure(usd, reported)
    return CostPoint(
        run_id=run_id, label=f"agent-{run_id}", rank=run_id, score=score, figure=figure
    )


def test_ticks_are_round_and_cover_the_range():
    assert nice_ticks(0, 0.047) == [0, 0.01, 0.02, 0.03, 0.04, 0.05]
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0, 0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]  # one zero-cost run still plots


def test_points_are_placed_inside_the_plot_and_the_frontier_marked():
    runs = [point(1, 0.9, 0.03), point(2, 0.7, 0.002, reported=True), point(3, 0.1, 0.05)]
    chart = cost_chart(AXES["usd"], runs, higher_is_better=True)
    assert [p.run_id for p in chart.frontier] == [2, 1]
    assert [p.run_id for p in chart.dominated] == [3]
    assert chart.dominated[0].dominated_by is runs[1]
    for p in chart.points:
        assert chart.left <= p.x <= chart.right_x and chart.top <= p.y <= chart.bottom_y
    assert chart.any_reported and chart.any_measured
    assert chart.step_path.startswith("M") and chart.step_path.count("L") == 3
    assert [t.text for t in chart.x_ticks][:2] == ["$0", "$0.01"]


def test_runs_without_a_figure_are_listed_apart_and_nothing_is_drawn_for_none():
    chart = cost_chart(AXES["usd"], [point(1, 0.5, None)], higher_is_better=True)
    assert chart.points == [] and [p.run_id for p in chart.uncosted] == [1]
    assert chart.step_path == "" and chart.x_ticks == []


def test_a_lower_is_better_metric_puts_the_lowest_score_on_the_frontier():
    runs = [point(1, 0.1, 0.01), point(2, 0.3, 0.02)]
    chart = cost_chart(AXES["usd"], runs, higher_is_better=False)
    assert [p.run_id for p in chart.frontier] == [1]
    assert runs[1].dominated_by is runs[0]
