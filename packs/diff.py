"""What changed between two contract versions of a pack, classified by packs.diff_rules.

Reads only what a viewer may see, plus digests: task rows, resource digests (sha256), the
public values of changed public resources, and file digests. Never the sealed-value table
and never a file's content. Eval-root file paths stay out of the result too (listing them is
a privileged, audited view, runs.privileged): a sealed file change is counted and digested.

A fixed number of queries per version whatever the task count (tasks, resources, file links,
files), then the public values of changed public resources in chunks: no query per task.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.core.cache import cache

from packs.diff_model import (
    FieldChange,
    FileKey,
    ResourceChange,
    ResourceSide,
    TaskChange,
    TaskRef,
    VersionDiff,
    files_change,
    same,
)
from packs.diff_rules import (
    MANIFEST_SKIPPED,
    RULES_VERSION,
    Impact,
    author_metadata,
    flatten,
    manifest_field_impact,
    measure_edit,
)
from packs.models import ContractVersion, FileRoot, PackFile, Resource, ResourceFile, Task
from verifiers.lanes import PUBLIC

VALUE_CHUNK = 500  # public values fetched per query (well under SQLite's variable limit)


# --- loading one version -------------------------------------------------------------------


class _TaskRow(NamedTuple):
    pk: int
    family: str
    position: int
    environment: dict[str, Any]
    metadata: dict[str, Any]


class ResourceDigest(NamedTuple):
    """A resource as compared: digest and linked files (eval paths never leave this module)."""

    pk: int
    lane: str
    kind: str
    sha256: str
    files: dict[FileKey, str]

    def side(self) -> ResourceSide:
        return ResourceSide(self.pk, self.lane, self.kind, self.sha256)


@dataclass
class _Snapshot:
    tasks: dict[str, _TaskRow]
    resources: dict[int, dict[str, ResourceDigest]]  # task pk -> name -> resource
    files: dict[FileKey, str]


def _snapshot(cv: ContractVersion) -> _Snapshot:
    rows = Task.objects.filter(contract_version=cv).values_list(
        "task_id", "pk", "family", "position", "environment", "metadata"
    )
    tasks = {task_id: _TaskRow(*rest) for task_id, *rest in rows}
    linked: dict[int, dict[FileKey, str]] = {}
    links = ResourceFile.objects.filter(resource__task__contract_version=cv).values_list(
        "resource_id", "pack_file__root", "pack_file__path", "pack_file__sha256"
    )
    for resource_pk, root, path, sha in links:
        linked.setdefault(resource_pk, {})[(root, path)] = sha
    resources: dict[int, dict[str, ResourceDigest]] = {}
    digests = (
        Resource.objects.filter(task__contract_version=cv)
        .order_by("task_id", "position")
        .values_list("task_id", "name", "pk", "lane", "kind", "sha256")
    )
    for task_pk, name, pk, lane, kind, sha in digests:
        resources.setdefault(task_pk, {})[name] = ResourceDigest(
            pk, lane, kind, sha, linked.get(pk, {})
        )
    files = {
        (root, path): sha
        for root, path, sha in PackFile.objects.filter(contract_version=cv).values_list(
            "root", "path", "sha256"
        )
    }
    return _Snapshot(tasks, resources, files)


def _public_values(pks: Iterable[int]) -> dict[int, Any]:
    """Public values by resource pk; the lane filter keeps this off every non-public row."""
    wanted, values = sorted(set(pks)), {}
    for start in range(0, len(wanted), VALUE_CHUNK):
        chunk = wanted[start : start + VALUE_CHUNK]
        rows = Resource.objects.filter(pk__in=chunk, lane=PUBLIC).values_list("pk", "public_value")
        values.update(rows)
    return values


# --- comparing -----------------------------------------------------------------------------


def version_diff(old: ContractVersion, new: ContractVersion) -> VersionDiff:
    diff = VersionDiff(old, new)
    diff.manifest = _manifest_changes(old.manifest, new.manifest)
    diff.contract = [
        FieldChange(name, before, after, Impact.BREAKING, "contract")
        for name, before, after in _changed_fields(flatten(old.contract), flatten(new.contract))
    ]
    a, b = _snapshot(old), _snapshot(new)
    diff.tasks_removed = [TaskRef(t, a.tasks[t].family) for t in a.tasks if t not in b.tasks]
    diff.tasks_added = [TaskRef(t, b.tasks[t].family) for t in b.tasks if t not in a.tasks]
    for task_id, before in sorted(a.tasks.items(), key=lambda item: item[1].position):
        after = b.tasks.get(task_id)
        if after is not None:
            change = _task_change(task_id, before, after, a, b)
            if change is not None:
                diff.tasks_changed.append(change)
    common = [t for t in a.tasks if t in b.tasks]
    diff.order_changed = sorted(common, key=lambda t: a.tasks[t].position) != sorted(
        common, key=lambda t: b.tasks[t].position
    )
    for root in (FileRoot.PUBLIC, FileRoot.EVAL):
        change = files_change(
            {k: v for k, v in a.files.items() if k[0] == root},
            {k: v for k, v in b.files.items() if k[0] == root},
        )
        if change is not None:
            diff.files.append(change)
    _classify_public_edits(diff.tasks_changed)
    return diff


def _changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    names = list(before) + [name for name in after if name not in before]
    return [
        (name, before.get(name), after.get(name))
        for name in names
        if name not in before or name not in after or not same(before[name], after[name])
    ]


def _manifest_changes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    changes = []
    flat_old, flat_new = flatten(old, skip=MANIFEST_SKIPPED), flatten(new, skip=MANIFEST_SKIPPED)
    for name, before, after in _changed_fields(flat_old, flat_new):
        impact, rule = manifest_field_impact(name)
        changes.append(FieldChange(name, before, after, impact, rule))
    return changes


def _task_change(
    task_id: str, before: _TaskRow, after: _TaskRow, a: _Snapshot, b: _Snapshot
) -> TaskChange | None:
    setup = [
        FieldChange(name, old, new, Impact.BREAKING, "task-setup")
        for name, old, new in (
            ("family", before.family, after.family),
            ("environment", before.environment, after.environment),
            ("metadata", author_metadata(before.metadata), author_metadata(after.metadata)),
        )
        if not same(old, new)
    ]
    old_res, new_res = a.resources.get(before.pk, {}), b.resources.get(after.pk, {})
    names = list(old_res) + [name for name in new_res if name not in old_res]
    resources = [
        _resource_change(name, old_res.get(name), new_res.get(name))
        for name in names
        if not _same_resource(old_res.get(name), new_res.get(name))
    ]
    if not setup and not resources:
        return None
    return TaskChange(task_id, before.family, after.family, resources, setup)


def _same_resource(a: ResourceDigest | None, b: ResourceDigest | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.lane, a.kind, a.sha256, a.files) == (b.lane, b.kind, b.sha256, b.files)


def _resource_change(
    name: str, before: ResourceDigest | None, after: ResourceDigest | None
) -> ResourceChange:
    """A resource change, classified except for public value edits (they need the values)."""
    status = "added" if before is None else "removed" if after is None else "changed"
    files = files_change(before.files if before else {}, after.files if after else {})
    change = ResourceChange(
        name, status, before.side() if before else None, after.side() if after else None, files
    )
    lanes = {r.lane for r in (before, after) if r is not None}
    if lanes != {PUBLIC}:
        moved = before and after and before.lane != after.lane
        change.note = "moved between lanes" if moved else _sealed_note(change)
        if status == "changed" and not moved and before.sha256 == after.sha256:
            change.rule = "files"  # the value is the same; only its files changed
    elif status != "changed":
        change.rule, change.note = "public-wording", f"a public input {status}"
    elif files is not None:
        change.rule, change.note = "files", "public asset files changed"
    elif before.files or before.kind != after.kind:
        change.rule, change.note = "public-wording", "asset descriptor or kind changed"
    else:
        change.rule = "public-wording"
        change.impact = Impact.WORDING  # provisional: _classify_public_edits measures it
    return change


def _sealed_note(change: ResourceChange) -> str:
    if change.status != "changed":
        return f"{change.status} (digest only)"
    parts = ["value digest changed"] if change.sha_before != change.sha_after else []
    if change.files is not None:
        parts.append("files changed")
    return ", ".join(parts)


def _classify_public_edits(tasks: list[TaskChange]) -> None:
    public = [r for task in tasks for r in task.resources if PUBLIC in r.lanes]
    pks = [side.pk for r in public for side in (r.before, r.after) if side and side.lane == PUBLIC]
    values = _public_values(pks)
    for r in public:
        if r.shows_before:
            r.public_before = values.get(r.before.pk)
        if r.shows_after:
            r.public_after = values.get(r.after.pk)
    for task in tasks:
        sealed = task.sealed_changed
        for r in task.resources:
            if r.impact != Impact.WORDING:
                continue
            if sealed:
                r.impact, r.note = Impact.BREAKING, "the task's evaluation lanes changed too"
                continue
            measure = measure_edit(r.public_before, r.public_after)
            r.impact = Impact.WORDING if measure.small else Impact.BREAKING
            r.note = measure.describe()


# --- for other pages -----------------------------------------------------------------------


def previous_version(cv: ContractVersion) -> ContractVersion | None:
    """The stored version just below this one (numbers may skip), or None."""
    earlier = ContractVersion.objects.filter(pack_id=cv.pack_id, version__lt=cv.version)
    return earlier.select_related("pack").order_by("-version").first()


@dataclass(frozen=True)
class PreviousVersion:
    cv: ContractVersion
    comparable: bool


def previous_comparison(cv: ContractVersion) -> PreviousVersion | None:
    """The version before this one and whether scores of both compare (for leaderboards)."""
    previous = previous_version(cv)
    if previous is None:
        return None
    return PreviousVersion(previous, versions_comparable(previous, cv))


def versions_comparable(old: ContractVersion, new: ContractVersion) -> bool:
    """Whether scores of the two versions compare (no breaking change). Versions never change,
    so the verdict is cached by their digests (and the rules' version)."""
    if old.pk == new.pk:
        return True
    if not same(old.contract or {}, new.contract or {}) or old.task_count != new.task_count:
        return False  # cheap answers first: a contract change or a different task set
    key = f"securebench:versions-comparable:{RULES_VERSION}:{old.digest}:{new.digest}"
    verdict = cache.get(key)
    if verdict is None:
        verdict = version_diff(old, new).comparable
        cache.set(key, verdict, timeout=None)
    return bool(verdict)
