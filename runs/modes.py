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


# (run, base_url) → members to add to the answer that opens a run (bundle or episodes), shown
# that once: e.g. the gateway's model endpoint URL. Registered by the layers above ``runs``.
RunOpenedExtra = Callable[[Run, str], dict[str, Any]]
_opened_extras: list[RunOpenedExtra] = []


def register_run_opened_extra(extra: RunOpenedExtra) -> None:
    if extra not in _opened_extras:
        _opened_extras.append(extra)


def run_opened_extras(run: Run, base_url: str) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for extra in _opened_extras:
        members.update(extra(run, base_url))
    return members
