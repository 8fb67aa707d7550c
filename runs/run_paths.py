"""A run page's path, built without a URL reversal per run: a board lists hundreds of runs,
and ``reverse`` costs more than the rest of such a link together. The pattern is reversed
once per script prefix (a site mounted under a path reverses to a different one)."""

from __future__ import annotations

from functools import cache

from django.urls import get_script_prefix, reverse

# A run id no run has: it marks where the id goes in the reversed path.
_SLOT = 987654321987


@cache
def _pattern(prefix: str) -> tuple[str, str]:
    path = reverse("runs:detail", args=[_SLOT])
    before, after = path.split(str(_SLOT))
    return before, after


def run_path(run_id: int) -> str:
    """``reverse("runs:detail", args=[run_id])``, for the current script prefix."""
    before, after = _pattern(get_script_prefix())
    return f"{before}{int(run_id)}{after}"
