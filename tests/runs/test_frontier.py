"""The Pareto frontier of score against cost (runs.frontier): pure, no database."""

from __future__ import annotations

from runs.frontier import Point, pareto, step_line


def keys(points: list[Point]) -> list[object]:
    return [point.key for point in points]


def test_no_runs_make_an_empty_frontier():
    result = pareto([])
    assert result.frontier == [] and result.dominated_by == {} and result.unplaced == []


def test_a_single_run_is_the_frontier():
    result = pareto([Point("a", 0.5, 1.0)])
    assert keys(result.frontier) == ["a"]
    assert result.dominated_by == {}


def test_a_cheaper_better_run_dominates_and_is_named():
    result = pareto([Point("dear", 0.4, 5.0), Point("cheap", 0.6, 1.0), Point("best", 0.9, 9.0)])
    assert keys(result.frontier) == ["cheap", "best"]
    assert result.dominated_by == {"dear": "cheap"}


def test_the_dominator_named_is_the_cheapest_that_scores_as_well():
    points = [Point("a", 0.3, 1.0), Point("b", 0.7, 2.0), Point("c", 0.9, 3.0)]
    result = pareto([*points, Point("x", 0.6, 4.0)])
    assert result.dominated_by == {"x": "b"}


def test_equal_cost_the_higher_score_dominates():
    result = pareto([Point("low", 0.2, 1.0), Point("high", 0.8, 1.0)])
    assert keys(result.frontier) == ["high"]
    assert result.dominated_by == {"low": "high"}


def test_equal_score_the_lower_cost_dominates():
    result = pareto([Point("dear", 0.5, 3.0), Point("cheap", 0.5, 1.0)])
    assert keys(result.frontier) == ["cheap"]
    assert result.dominated_by == {"dear": "cheap"}


def test_identical_runs_do_not_dominate_each_other():
    result = pareto([Point("a", 0.5, 1.0), Point("b", 0.5, 1.0), Point("c", 0.5, 2.0)])
    assert keys(result.frontier) == ["a", "b"]
    assert result.dominated_by == {"c": "a"}


def test_runs_without_a_cost_or_score_are_unplaced_not_dominated():
    result = pareto([Point("a", 0.5, None), Point("b", None, 1.0), Point("c", 0.1, 9.0)])
    assert keys(result.frontier) == ["c"]
    assert keys(result.unplaced) == ["a", "b"]
    assert result.dominated_by == {}


def test_a_lower_is_better_metric_inverts_the_score():
    # A Brier score: 0.1 is better than 0.3, so the cheap run with 0.1 dominates both.
    points = [Point("cheap", 0.1, 1.0), Point("dear", 0.3, 2.0), Point("worse", 0.4, 1.5)]
    result = pareto(points, higher_is_better=False)
    assert keys(result.frontier) == ["cheap"]
    assert result.dominated_by == {"dear": "cheap", "worse": "cheap"}


def test_zero_cost_runs_are_placed():
    result = pareto([Point("free", 0.2, 0.0), Point("paid", 0.6, 1.0)])
    assert keys(result.frontier) == ["free", "paid"]


def test_the_step_line_holds_each_score_until_the_next_point():
    frontier = pareto([Point("a", 0.2, 1.0), Point("b", 0.6, 3.0)]).frontier
    assert step_line(frontier, right_edge=5.0) == [
        (1.0, 0.2),
        (3.0, 0.2),
        (3.0, 0.6),
        (5.0, 0.6),
    ]


def test_the_step_line_of_nothing_is_empty():
    assert step_line([], right_edge=1.0) == []
