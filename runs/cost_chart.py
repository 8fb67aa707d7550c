"""The leaderboard's score-against-cost chart as plain numbers for an inline SVG: where each
run's point goes, the frontier's staircase, the ticks. No Django: the template only places
what this works out, and the page needs no script.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field

from runs.cost_axes import CostAxis, CostFigure, format_cost
from runs.frontier import Point, pareto, step_line

WIDTH, HEIGHT = 720, 340
LEFT, RIGHT, TOP, BOTTOM = 64, 40, 16, 48  # room for the tick labels (larger on a phone)
MARK = 4.5  # half a reported point's square
DOMINATED_SHOWN = 50


@dataclass
class CostPoint:
    """One ranked run on the chart (or under it, when it has no cost figure)."""

    run_id: int
    label: str  # agent, version and model, as the leaderboard names the run
    rank: int
    score: float | None
    figure: CostFigure | None
    on_frontier: bool = False
    dominated_by: CostPoint | None = None
    x: float = 0.0
    y: float = 0.0
    axis_key: str = ""

    @property
    def reported(self) -> bool:
        return self.figure is not None and self.figure.reported

    @property
    def corner(self) -> tuple[float, float]:
        """The top-left corner of a reported point's square marker, centred on the point."""
        return round(self.x - MARK, 1), round(self.y - MARK, 1)

    @property
    def cost_text(self) -> str:
        return "" if self.figure is None else format_cost(self.axis_key, self.figure.value)


@dataclass(frozen=True)
class Tick:
    position: float  # in SVG units along its axis
    text: str


@dataclass
class CostChart:
    axis: CostAxis
    points: list[CostPoint]  # placed: a score and a cost
    frontier: list[CostPoint]
    dominated: list[CostPoint]
    uncosted: list[CostPoint]  # ranked runs with no figure on this axis
    step_path: str = ""
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    any_reported: bool = False
    any_measured: bool = False
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT
    top: int = TOP

    @property
    def dominated_shown(self) -> list[CostPoint]:
        # A page of a thousand dominated rows would outweigh the board itself; the board's
        # own table names every run's dominator, page by page.
        return self.dominated[:DOMINATED_SHOWN]

    @property
    def dominated_hidden(self) -> int:
        return max(0, len(self.dominated) - DOMINATED_SHOWN)

    @property
    def y_title_x(self) -> float:
        # The score axis's title is turned a quarter left: its x runs down the page, negated.
        return -(self.top + self.bottom_y) / 2


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 × a power of ten) covering [low, high]."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 12))
        value += step
    return ticks


def cost_chart(
    axis: CostAxis, runs: list[CostPoint], *, higher_is_better: bool, score_text: str = "{:.3g}"
) -> CostChart:
    """Place ``runs`` (the ranked runs, best first) and mark the frontier."""
    for run in runs:
        run.axis_key = axis.key
    by_id: dict[Hashable, CostPoint] = {run.run_id: run for run in runs}
    found = pareto(
        (Point(r.run_id, r.score, r.figure.value if r.figure else None) for r in runs),
        higher_is_better=higher_is_better,
    )
    frontier = [by_id[p.key] for p in found.frontier]
    for run in frontier:
        run.on_frontier = True
    for key, dominator in found.dominated_by.items():
        by_id[key].dominated_by = by_id[dominator]
    placed = [r for r in runs if r.figure is not None and r.score is not None]
    chart = CostChart(
        axis=axis,
        points=placed,
        frontier=frontier,
        dominated=[r for r in placed if r.dominated_by is not None],
        uncosted=[r for r in runs if r.figure is None],
        any_reported=any(r.figure.reported for r in placed if r.figure),
        any_measured=any(not r.figure.reported for r in placed if r.figure),
    )
    if placed:
        _place(chart, score_text)
    return chart


def _place(chart: CostChart, score_text: str) -> None:
    costs = [p.figure.value for p in chart.points if p.figure]
    scores = [p.score for p in chart.points if p.score is not None]
    x_ticks = nice_ticks(0.0, max(costs))
    # Scores in [0, 1] (rates) keep the whole range, so two boards read alike.
    low = min(0.0, min(scores))
    y_ticks = nice_ticks(low, max(1.0, max(scores)) if max(scores) <= 1 else max(scores))
    x_max, y_min, y_max = x_ticks[-1], y_ticks[0], y_ticks[-1]
    plot_w, plot_h = chart.right_x - chart.left, chart.bottom_y - chart.top

    def x_of(cost: float) -> float:
        return round(chart.left + plot_w * cost / x_max, 1)

    def y_of(score: float) -> float:
        return round(chart.bottom_y - plot_h * (score - y_min) / (y_max - y_min), 1)

    for point in chart.points:
        if point.figure is not None and point.score is not None:  # always, once placed
            point.x, point.y = x_of(point.figure.value), y_of(point.score)
    chart.x_ticks = [Tick(x_of(v), format_cost(chart.axis.key, v)) for v in x_ticks]
    chart.y_ticks = [Tick(y_of(v), score_text.format(v)) for v in y_ticks]
    corners = step_line(
        [Point(p.run_id, p.score, p.figure.value if p.figure else None) for p in chart.frontier],
        right_edge=x_max,
    )
    chart.step_path = " ".join(
        f"{'M' if i == 0 else 'L'}{x_of(cost)},{y_of(score)}"
        for i, (cost, score) in enumerate(corners)
    )
