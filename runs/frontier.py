"""The Pareto frontier of score against cost (the leaderboard's cost chart): pure functions,
no Django, so the rules — ties, direction, missing costs — are tested on their own.

A run dominates another when it costs no more and scores no worse, and is strictly better in
one of the two. The frontier is the runs nothing dominates; every other run is named with a
frontier run that dominates it, so a reader can see what to pick instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    key: Hashable
    score: float | None
    cost: float | None


@dataclass(frozen=True)
class Frontier:
    # Cheapest first; scores improve along it (equal points sit side by side).
    frontier: list[Point] = field(default_factory=list)
    # A dominated point's key → the key of a frontier point that dominates it.
    dominated_by: dict[Hashable, Hashable] = field(default_factory=dict)
    # Points with no score or no cost: they cannot be placed, so they are neither.
    unplaced: list[Point] = field(default_factory=list)


@dataclass(frozen=True)
class _Placed:
    point: Point
    goodness: float  # the score with the direction applied: higher is better
    cost: float


def pareto(points: Iterable[Point], *, higher_is_better: bool = True) -> Frontier:
    """Split ``points`` into the frontier and the dominated. ``higher_is_better`` is the
    score's direction (False for a Brier score): cost is always better lower.

    Two points with equal cost and equal score do not dominate each other: both stay on the
    frontier, or both are dominated by the same third point."""
    placed: list[_Placed] = []
    unplaced: list[Point] = []
    for point in points:
        if point.score is None or point.cost is None:
            unplaced.append(point)
            continue
        goodness = point.score if higher_is_better else -point.score
        placed.append(_Placed(point, goodness, point.cost))
    # Cheapest first, and at equal cost the best first: a point is on the frontier when it
    # beats the best seen so far, or equals it exactly (same cost and score).
    placed.sort(key=lambda p: (p.cost, -p.goodness))
    frontier: list[_Placed] = []
    dominated: list[_Placed] = []
    for item in placed:
        last = frontier[-1] if frontier else None
        if (
            last is None
            or item.goodness > last.goodness
            or (item.goodness, item.cost)
            == (
                last.goodness,
                last.cost,
            )
        ):
            frontier.append(item)
        else:
            dominated.append(item)
    return Frontier([p.point for p in frontier], _dominators(frontier, dominated), unplaced)


def _dominators(
    frontier: Sequence[_Placed], dominated: Iterable[_Placed]
) -> dict[Hashable, Hashable]:
    """Each dominated point's cheapest dominator on the frontier: the first frontier point
    scoring at least as well (it came earlier in the sweep, so it costs no more)."""
    levels = [item.goodness for item in frontier]  # non-decreasing along the frontier
    return {
        item.point.key: frontier[bisect.bisect_left(levels, item.goodness)].point.key
        for item in dominated
    }


def step_line(frontier: Sequence[Point], *, right_edge: float) -> list[tuple[float, float]]:
    """The frontier as a staircase of (cost, score) corners: the best score reachable for at
    most each cost, held flat until the next frontier point and drawn on to ``right_edge``."""
    corners: list[tuple[float, float]] = []
    for point in frontier:
        if point.cost is None or point.score is None:
            continue  # never on a frontier; the type allows it
        if corners:
            corners.append((point.cost, corners[-1][1]))
        corners.append((point.cost, point.score))
    if corners and right_edge > corners[-1][0]:
        corners.append((right_edge, corners[-1][1]))
    return corners
