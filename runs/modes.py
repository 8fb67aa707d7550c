"""Ways to open a run other than a bundle, registered by the layers above ``runs``.

The run API's ``mode`` field picks one. ``runs`` never imports those layers: the episodes app
registers its opener here when Django starts (episodes.apps), so ``POST /api/v1/runs/`` can
open a live episode run while the dependency still points downwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from runs.models import Run


@dataclass(frozen=True)
class OpenedRun:
    run: Run
    # Extra members for the API answer, e.g. the run's benchmark URL (shown this once).
    extra: dict[str, Any]


# (contract_version, metadata, source, user, base_url) → OpenedRun
RunOpener = Callable[..., OpenedRun]
_openers: dict[str, RunOpener] = {}


def register_run_opener(mode: str, opener: RunOpener) -> None:
    _openers[mode] = opener


def run_opener(mode: str) -> RunOpener | None:
    return _openers.get(mode)


# (request, run) → HTML: a section of the run page that a mode adds (the episodes table),
# rendered inside the run page's own answer so that it refreshes with the run's state.
RunSection = Callable[[HttpRequest, Run], str]
_sections: dict[str, RunSection] = {}


def register_run_section(mode: str, section: RunSection) -> None:
    _sections[mode] = section


def run_section(mode: str) -> RunSection | None:
    return _sections.get(mode)
