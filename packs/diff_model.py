"""The result of comparing two contract versions (packs.diff builds it): plain dataclasses,
no database. Public values appear only where a side is public; a non-public side carries its
lane, kind and sha256 digest, never a value, and eval-root files only counts and a digest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from packs.compiler.digest import canonical_json, sha256_hex
from packs.diff_rules import RULES, Impact, Rule, Segment, inline_segments
from packs.models import ContractVersion, FileRoot
from verifiers.lanes import LANES, PUBLIC

FileKey = tuple[str, str]  # (root, path)


def show(value: Any) -> str:
    """A public manifest, contract or task value as the page prints it."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def same(a: Any, b: Any) -> bool:
    # Canonical JSON tells true from 1 and ignores key order, as the digests do.
    return canonical_json(a) == canonical_json(b)


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: Any
    after: Any
    impact: Impact
    rule: str
    note: str = ""

    @property
    def before_text(self) -> str:
        return show(self.before)

    @property
    def after_text(self) -> str:
        return show(self.after)


@dataclass(frozen=True)
class FileEntry:
    path: str
    status: str  # added, removed or changed
    sha_before: str | None
    sha_after: str | None


@dataclass(frozen=True)
class FilesChange:
    """Files of one resource, or of one asset root. Public paths are listed; eval-root paths
    are not (they are sealed): counts and the digest of the whole set only."""

    root: str
    added: int
    removed: int
    changed: int
    digest_before: str | None
    digest_after: str | None
    entries: tuple[FileEntry, ...]

    @property
    def sealed(self) -> bool:
        return self.root != FileRoot.PUBLIC


def files_digest(files: dict[FileKey, str]) -> str | None:
    if not files:
        return None
    return sha256_hex(
        canonical_json(sorted([root, path, sha] for (root, path), sha in files.items()))
    )


def files_change(before: dict[FileKey, str], after: dict[FileKey, str]) -> FilesChange | None:
    if before == after:
        return None
    counts = {"added": 0, "removed": 0, "changed": 0}
    entries: list[FileEntry] = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        status = "added" if old is None else "removed" if new is None else "changed"
        if old == new:
            continue
        counts[status] += 1
        if key[0] == FileRoot.PUBLIC:
            entries.append(FileEntry(key[1], status, old, new))
    roots = {root for root, _path in before.keys() | after.keys()}
    root = FileRoot.PUBLIC if roots == {FileRoot.PUBLIC} else FileRoot.EVAL
    return FilesChange(root, **counts, digest_before=files_digest(before),
                       digest_after=files_digest(after), entries=tuple(entries))  # fmt: skip


class ResourceSide(NamedTuple):
    """One version's side of a changed resource: never its value, never its file paths."""

    pk: int
    lane: str
    kind: str
    sha256: str


@dataclass
class ResourceChange:
    name: str
    status: str  # added, removed or changed
    before: ResourceSide | None
    after: ResourceSide | None
    files: FilesChange | None
    impact: Impact = Impact.BREAKING
    rule: str = "evaluation-lanes"
    note: str = ""
    # Public sides only (a value is public in the version where its lane is public).
    public_before: Any = None
    public_after: Any = None

    @property
    def lane_before(self) -> str | None:
        return self.before.lane if self.before else None

    @property
    def lane_after(self) -> str | None:
        return self.after.lane if self.after else None

    @property
    def sha_before(self) -> str | None:
        return self.before.sha256 if self.before else None

    @property
    def sha_after(self) -> str | None:
        return self.after.sha256 if self.after else None

    @property
    def lanes(self) -> list[str]:
        return [lane for lane in LANES if lane in (self.lane_before, self.lane_after)]

    @property
    def sealed(self) -> bool:
        """A non-public side, or sealed files: shown by digest only."""
        return any(lane != PUBLIC for lane in self.lanes) or bool(self.files and self.files.sealed)

    @property
    def value_changed(self) -> bool:
        return self.sha_before != self.sha_after or self.lane_before != self.lane_after

    @property
    def shows_before(self) -> bool:
        return self.lane_before == PUBLIC

    @property
    def shows_after(self) -> bool:
        return self.lane_after == PUBLIC

    @property
    def before_text(self) -> str:
        return show(self.public_before) if self.shows_before else ""

    @property
    def after_text(self) -> str:
        return show(self.public_after) if self.shows_after else ""

    @cached_property
    def segments(self) -> list[Segment] | None:
        both = isinstance(self.public_before, str) and isinstance(self.public_after, str)
        if not (self.shows_before and self.shows_after and both):
            return None
        return inline_segments(self.public_before, self.public_after)


@dataclass
class TaskChange:
    task_id: str
    family_before: str
    family_after: str
    resources: list[ResourceChange]
    setup: list[FieldChange]

    @property
    def parts(self) -> list[str]:
        found = [lane for lane in LANES if any(lane in r.lanes for r in self.resources)]
        if any(r.files for r in self.resources):
            found.append("files")
        return found + [change.field for change in self.setup]

    @property
    def sealed_changed(self) -> bool:
        return any(r.sealed for r in self.resources)

    @property
    def rule(self) -> str:
        """The rule behind the task's verdict: that of its first breaking change, if any."""
        changes = [*self.setup, *self.resources]
        breaking = [change for change in changes if change.impact == Impact.BREAKING]
        return (breaking or changes)[0].rule

    @property
    def impact(self) -> Impact:
        impacts = {r.impact for r in self.resources} | {c.impact for c in self.setup}
        return Impact.BREAKING if Impact.BREAKING in impacts else Impact.WORDING


class TaskRef(NamedTuple):
    task_id: str
    family: str


@dataclass
class VersionDiff:
    old: ContractVersion
    new: ContractVersion
    manifest: list[FieldChange] = field(default_factory=list)
    contract: list[FieldChange] = field(default_factory=list)
    tasks_added: list[TaskRef] = field(default_factory=list)
    tasks_removed: list[TaskRef] = field(default_factory=list)
    tasks_changed: list[TaskChange] = field(default_factory=list)
    files: list[FilesChange] = field(default_factory=list)
    order_changed: bool = False
    rules: tuple[Rule, ...] = RULES

    @property
    def empty(self) -> bool:
        return not (self.manifest or self.contract or self.tasks_added or self.tasks_removed
                    or self.tasks_changed or self.files or self.order_changed)  # fmt: skip

    @property
    def breaking_tasks(self) -> int:
        return sum(1 for task in self.tasks_changed if task.impact == Impact.BREAKING)

    @property
    def comparable(self) -> bool:
        fields = [*self.manifest, *self.contract]
        return not (
            self.tasks_added
            or self.tasks_removed
            or self.files
            or self.breaking_tasks
            or any(change.impact == Impact.BREAKING for change in fields)
        )
