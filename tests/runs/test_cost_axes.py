"""Which cost figure a run shows on each axis, and how it reads (runs.cost_axes): pure."""

from __future__ import annotations

import pytest

from runs.cost_axes import AXES, CostFigure, axis_get, cost_figure, format_cost

USD, TOKENS, WALL, STEPS = (AXES[key] for key in ("usd", "tokens", "wall", "steps"))


def test_a_measured_figure_wins_over_a_reported_one():
    figure = cost_figure(USD, {"usd": 0.02}, {"usd": 0.5})
    assert figure == CostFigure(0.02, reported=False)


def test_a_reported_figure_is_used_and_marked_when_nothing_was_measured():
    assert cost_figure(USD, {}, {"usd": 0.5}) == CostFigure(0.5, reported=True)


def test_tokens_are_input_plus_output():
    figure = cost_figure(TOKENS, {"input_tokens": 900, "output_tokens": 300}, {})
    assert figure == CostFigure(1200.0, reported=False)


def test_the_per_task_totals_stand_in_for_a_run_level_report():
    assert cost_figure(WALL, {}, {"total_wall_seconds": 42.0}) == CostFigure(42.0, True)


def test_no_figure_at_all_is_none():
    assert cost_figure(STEPS, {}, {"usd": 1}) is None
    assert cost_figure(STEPS, None, None) is None


@pytest.mark.parametrize("bad", [True, "12", -1, float("nan"), float("inf"), None])
def test_values_that_are_no_figure_are_ignored(bad):
    assert cost_figure(USD, {"usd": bad}, {}) is None


def test_an_unknown_axis_is_the_default():
    assert axis_get("bogus") is USD and axis_get(None) is USD and axis_get("wall") is WALL


@pytest.mark.parametrize(
    ("axis", "value", "text"),
    [
        ("usd", 0.0012, "$0.0012"),
        ("usd", 0.25, "$0.25"),
        ("usd", 0.02, "$0.02"),
        ("usd", 0.5, "$0.50"),
        ("usd", 12.5, "$12.50"),
        ("usd", 0, "$0"),
        ("tokens", 12_345, "12.3k"),
        ("tokens", 2_500_000, "2.5M"),
        ("tokens", 950, "950"),
        ("wall", 45, "45 s"),
        ("wall", 90, "1.5 min"),
        ("wall", 7200, "2 h"),
        ("steps", 1204, "1,204"),
        ("steps", 2.5, "2.5"),
    ],
)
def test_costs_read_as_a_reader_reads_them(axis, value, text):
    assert format_cost(axis, float(value)) == text
