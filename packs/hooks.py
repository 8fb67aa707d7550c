"""Where layers above packs join in without packs importing them.

``pack_health`` (above runs) starts a new version's health checks when it is stored and adds
its panel to the version page; runs adds the evaluations that score a pack to the pack
and version pages; packs only calls what was registered, in the order given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils.safestring import SafeString

from packs.models import ContractVersion, Pack

VersionCreated = Callable[[ContractVersion, Any], None]
VersionPanel = Callable[[HttpRequest, ContractVersion], SafeString | str]
PackPanel = Callable[[HttpRequest, Pack], SafeString | str]

_version_created: list[VersionCreated] = []
_version_panels: list[VersionPanel] = []
_pack_panels: list[PackPanel] = []


def on_version_created(callback: VersionCreated) -> None:
    """Call ``callback(version, uploaded_by)`` once a new version's rows are committed."""
    if callback not in _version_created:
        _version_created.append(callback)


def version_created(version: ContractVersion, uploaded_by: Any) -> None:
    # After the commit: a callback that queues work must never see a version that rolls back.
    for callback in list(_version_created):
        transaction.on_commit(lambda cb=callback: cb(version, uploaded_by), robust=True)


def register_version_panel(panel: VersionPanel) -> None:
    """Add an HTML fragment to the version page (rendered for the viewing request)."""
    if panel not in _version_panels:
        _version_panels.append(panel)


def version_panels(request: HttpRequest, version: ContractVersion) -> list[SafeString | str]:
    return [panel(request, version) for panel in list(_version_panels)]


def register_pack_panel(panel: PackPanel) -> None:
    """Add an HTML fragment to the pack page (rendered for the viewing request)."""
    if panel not in _pack_panels:
        _pack_panels.append(panel)


def pack_panels(request: HttpRequest, pack: Pack) -> list[SafeString | str]:
    return [panel(request, pack) for panel in list(_pack_panels)]

