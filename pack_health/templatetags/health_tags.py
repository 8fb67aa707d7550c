"""Small helpers for health templates."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()

# Links to results are rendered as links, not listed as facts; an infrastructure cause is
# already the finding's message.
REFERENCE_KEYS = frozenset({"run_id", "result_id", "first_result_id", "cause"})
MAX_VALUE_CHARS = 160


@register.filter
def evidence_facts(evidence: Any) -> list[tuple[str, str]]:
    """A finding's public evidence as short "name: value" pairs (nested values as JSON)."""
    if not isinstance(evidence, dict):
        return []
    facts = []
    for key, value in evidence.items():
        if key in REFERENCE_KEYS or value is None or value == "":
            continue
        if isinstance(value, str):
            text = value
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            text = ", ".join(value)
        else:
            text = json.dumps(value, sort_keys=True)
        if len(text) > MAX_VALUE_CHARS:
            text = text[: MAX_VALUE_CHARS - 1] + "…"
        facts.append((str(key).replace("_", " "), text))
    return facts
