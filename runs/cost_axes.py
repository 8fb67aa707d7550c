"""What a run cost, read along one axis of the leaderboard's cost chart: dollars, tokens, wall
time or steps. Pure functions over the usage dicts, so which figure wins is tested alone.

A figure the site measured wins over one the agent reported; a reported one is still shown,
marked as such, since most runs today have nothing else:

- dollars and tokens: ``Run.measured_usage`` (the model gateway meters every call) over
  ``Run.usage`` (reported);
- wall time and steps: a live episode run's per-task figures, which the site records on each
  candidate (episodes.lifecycle), over ``Run.usage`` (a bundle run's are all reported).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CostAxis:
    key: str  # the ?axis= value
    label: str
    # Names summed to make the figure, read the same in measured and reported usage.
    parts: tuple[str, ...]
    measured_by: str  # who measures it, for the page's note


AXES: dict[str, CostAxis] = {
    axis.key: axis
    for axis in (
        CostAxis("usd", "Dollars", ("usd",), "the site's model gateway"),
        CostAxis(
            "tokens", "Tokens (input + output)", ("input_tokens", "output_tokens"), "the gateway"
        ),
        CostAxis("wall", "Wall time", ("wall_seconds",), "the site, for live episode runs"),
        CostAxis("steps", "Steps", ("steps",), "the site, for live episode runs"),
    )
}
DEFAULT_AXIS = "usd"


def axis_get(key: str | None) -> CostAxis:
    """The axis named by ``?axis=``; the default for anything else (a stale or made-up link)."""
    return AXES.get(key or "", AXES[DEFAULT_AXIS])


@dataclass(frozen=True)
class CostFigure:
    value: float
    reported: bool


def usage_sum(usage: Mapping[str, Any] | None, names: tuple[str, ...]) -> float | None:
    """The sum of the named figures; None when none of them is a usable number."""
    if not isinstance(usage, Mapping):
        return None
    numbers = [
        float(value)
        for name in names
        if isinstance(value := usage.get(name), int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    ]
    return sum(numbers) if numbers else None


def reported_figure(axis: CostAxis, usage: Mapping[str, Any] | None) -> float | None:
    """The run-level figure the agent reported, or else the sum over its tasks that
    runs.services keeps as ``total_<name>``."""
    figure = usage_sum(usage, axis.parts)
    if figure is None:
        figure = usage_sum(usage, tuple(f"total_{name}" for name in axis.parts))
    return figure


def cost_figure(
    axis: CostAxis, measured: Mapping[str, Any] | None, reported: Mapping[str, Any] | None
) -> CostFigure | None:
    """The run's cost on ``axis``: measured when the site has it, else reported, else None."""
    figure = usage_sum(measured, axis.parts)
    if figure is not None:
        return CostFigure(figure, reported=False)
    figure = reported_figure(axis, reported)
    return CostFigure(figure, reported=True) if figure is not None else None


def format_cost(axis_key: str, value: float) -> str:
    """A cost as a reader reads it: $0.0012, 12.3k tokens, 45 s, 1,204 steps."""
    if axis_key == "usd":
        return "$" + _decimal(value)
    if axis_key == "tokens":
        return _compact(value)
    if axis_key == "wall":
        return _duration(value)
    return f"{value:,.0f}" if value >= 10 or value.is_integer() else f"{value:.1f}"


def _decimal(value: float) -> str:
    if value == 0:
        return "0"
    if value >= 1:
        return f"{value:,.2f}"
    # Two significant digits below a dollar ($0.0012, not $0.00), cents kept ($0.50), and no
    # zero after them ($0.02, not $0.020).
    decimals = max(2, 1 - math.floor(math.log10(value)))
    text = f"{value:.{decimals}f}"
    while decimals > 2 and text.endswith("0"):
        text, decimals = text[:-1], decimals - 1
    return text


def _compact(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.0f}"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
