"""A task's cost on the compare page (runs.task_costs), marked when the agent reported it."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from runs.cost_axes import format_cost
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
