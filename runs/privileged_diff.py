"""Sealed before/after of one changed resource between two versions (the diff page's "reveal
before/after"), for users privileged for the pack, in debug mode, audited.

Each sealed side is read through ``privileged.SealedReader`` for its own version (the one way
a request reaches sealed values: privilege check first, an audit record per read); the
reader used here records those reads as ``view_diff`` with both versions named, so the audit
log says the value was looked at to compare versions. Public sides are read from the public
lane, as any page may.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from packs import selectors as pack_selectors
from packs.models import ContractVersion, PackFile, Resource, Task
from runs import privileged, rendering
from runs.models import AuditAction
from verifiers.lanes import PUBLIC


class _DiffReader(privileged.SealedReader):
    """A SealedReader whose reads are recorded as view_diff, naming both versions."""

    def __init__(self, request: HttpRequest, cv: ContractVersion, *, compared: str) -> None:
        super().__init__(request, cv)
        self.compared = compared

    def _audit(self, action: str, **fields: Any) -> None:
        fields["resource"] = f"{fields.get('resource', '')} · {self.compared}"
        super()._audit(AuditAction.VIEW_DIFF, **fields)


@dataclass(frozen=True)
class Side:
    cv: ContractVersion
    present: bool
    lane: str = ""
    kind: str = ""
    sha256: str = ""
    value: Any = None
    files: tuple[PackFile, ...] = ()
    blocks: tuple[rendering.Block, ...] = ()


def _number(request: HttpRequest, name: str) -> int:
    raw = request.GET.get(name, "")
    if not (raw.isascii() and raw.isdigit()):
        raise Http404("Not found.")
    return int(raw)


def _side(reader: _DiffReader, cv: ContractVersion, task_id: str, name: str) -> Side:
    task = Task.objects.filter(contract_version=cv, task_id=task_id).first()
    resource = (
        Resource.objects.filter(task=task, name=name).only("lane", "kind", "sha256").first()
        if task is not None
        else None
    )
    if task is None or resource is None:
        return Side(cv, present=False)
    if resource.lane == PUBLIC:
        public = Resource.objects.values_list("public_value", flat=True).get(pk=resource.pk)
        blocks = rendering.value_blocks(name, public)
        return Side(cv, True, PUBLIC, resource.kind, resource.sha256, public, (), tuple(blocks))
    found = reader.resource(task, name)  # audited (view_diff) before the value is returned
    blocks = rendering.value_blocks(found.name, found.value)
    return Side(
        cv, True, found.lane, found.kind, resource.sha256, found.value, tuple(found.files),
        tuple(blocks),
    )  # fmt: skip


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _unified(name: str, old: Side, new: Side) -> list[rendering.Block]:
    if not (old.present and new.present) or old.value == new.value:
        return []
    lines = difflib.unified_diff(
        _as_text(old.value).splitlines(keepends=True),
        _as_text(new.value).splitlines(keepends=True),
        fromfile=f"v{old.cv.version}/{name}",
        tofile=f"v{new.cv.version}/{name}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return rendering.patch_blocks(f"{name} v{old.cv.version} → v{new.cv.version}", text)


@require_GET
def reveal_diff(request: HttpRequest, pack_id: str) -> HttpResponse:
    old_cv = pack_selectors.version_get(pack_id, _number(request, "from"))
    new_cv = pack_selectors.version_get(pack_id, _number(request, "to"))
    compared = f"v{old_cv.version}→v{new_cv.version}"
    # Both readers check the privilege for the pack (404 without it, 403 in debug mode off)
    # before anything of the task is looked up.
    readers = (
        _DiffReader(request, old_cv, compared=compared),
        _DiffReader(request, new_cv, compared=compared),
    )
    task_id, name = request.GET.get("task", ""), request.GET.get("name", "")
    old, new = (_side(reader, reader.contract_version, task_id, name) for reader in readers)
    if not any(side.present and side.lane != PUBLIC for side in (old, new)):
        raise Http404("No sealed resource of that name in this task.")
    context = {
        "pack": new_cv.pack,
        "cv": new_cv,
        "task": pack_selectors.task_get(new_cv, task_id) if new.present else None,
        "task_id": task_id,
        "name": name,
        "old": old,
        "new": new,
        "diff_blocks": _unified(name, old, new),
        "files_differ": old.present and new.present and _file_keys(old) != _file_keys(new),
    }
    template = "runs/privileged/_diff.html"
    if request.htmx:
        return render(request, template, context)
    return render(request, "runs/privileged/page.html", {**context, "panel": template})


def _file_keys(side: Side) -> list[tuple[str, str]]:
    return [(f.path, f.sha256) for f in side.files]
