"""The cost chart's points and cells (leaderboard) and a task's cost (compare page), a figure
the agent reported marked as such."""

from __future__ import annotations

from html import escape
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from runs.cost_axes import format_cost
from runs.cost_chart import CostChart, CostPoint
from runs.run_paths import run_path
from runs.task_costs import task_cost

register = template.Library()


@register.simple_tag(takes_context=True)
def task_cost_cell(context: dict[str, Any], row: Any, side: str) -> SafeString:
    """Run A's or B's (``side``) cost of the task on the page's axis."""
    compared, axis = context["comparison"], context["axis"]
    run = compared.a if side == "a" else compared.b
    figure = task_cost(axis, run, row.task_id, getattr(row, f"{side}_usage", None))
    if figure is None:
        return format_html('<span class="muted">{}</span>', "—")
    text = format_cost(axis.key, figure.value)
    if not figure.reported:
        return format_html("{}", text)
    return format_html(
        '{} <span class="badge badge-reported" title="{}">reported</span>',
        text,
        "reported by the agent, not measured by the site",
    )


@register.simple_tag
def cost_points(chart: CostChart, metric: str) -> SafeString:
    """The chart's points as SVG, each with its hover text. Built here with plain strings
    rather than a template loop or format_html: a thousand points cost a few milliseconds
    instead of a large share of the page's time."""
    return mark_safe("".join(point_svg(point, metric) for point in chart.points))  # noqa: S308 - every text part is escaped in point_svg


def point_svg(point: CostPoint, metric: str) -> str:
    """One point: a dot when measured, a square when reported; its title in escaped text."""
    classes = "pt pt-reported" if point.reported else "pt pt-measured"
    if point.on_frontier:
        classes += " pt-frontier"
        where = "on the frontier"
    elif point.dominated_by is not None:
        where = f"dominated by run #{point.dominated_by.run_id}"
    else:
        where = ""
    title = escape(
        f"#{point.rank} {point.label} · run #{point.run_id} · {metric} {point.score or 0:.3f} · "
        f"{point.cost_text}{' (reported)' if point.reported else ''} · {where}"
    )
    if point.reported:
        x, y = point.corner
        return (
            f'<rect class="{classes}" x="{x}" y="{y}" width="9" height="9">'
            f"<title>{title}</title></rect>"
        )
    return (
        f'<circle class="{classes}" cx="{point.x}" cy="{point.y}" r="5">'
        f"<title>{title}</title></circle>"
    )


@register.filter(name="run_path")
def run_path_filter(run_id: int) -> str:
    """A run page's path (runs.run_paths): ``{{ run.pk|run_path }}``."""
    return run_path(run_id)


@register.simple_tag
def cost_cells(row: Any) -> SafeString:
    """A leaderboard row's cost and frontier cells (its point on the chart, ``row.cost``)."""
    point: CostPoint | None = row.cost
    if point is None or point.figure is None:
        cost = format_html('<td class="num"><span class="muted">{}</span></td>', "no cost figure")
    elif point.reported:
        cost = format_html(
            '<td class="num">{} <span class="badge badge-reported" title="{}">reported</span></td>',
            point.cost_text,
            "reported by the agent, not measured by the site",
        )
    else:
        cost = format_html('<td class="num">{}</td>', point.cost_text)
    if point is not None and point.on_frontier:
        where = format_html('<td><span class="badge badge-frontier">{}</span></td>', "◆ frontier")
    elif point is not None and point.dominated_by is not None:
        where = format_html(
            '<td><span class="muted small">dominated by <a href="{}">run #{}</a></span></td>',
            run_path(point.dominated_by.run_id),
            point.dominated_by.run_id,
        )
    else:
        where = format_html("<td>{}</td>", "—")
    return cost + where
