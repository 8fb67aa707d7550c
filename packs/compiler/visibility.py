"""Turning one row into named resources, each in its visibility lane (spec §2, DESIGN.md §2).

input.* is public, `assets` is public, eval.* goes where the family's lane map says (unknown
keys hidden). File references are checked against the walked asset trees here, so a compiled
resource never points at a file that is missing, unsafe or under the wrong root.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from packs.compiler.digest import canonical_json, sha256_hex
from packs.compiler.paths import (
    EVALUATION_INPUTS_ROOT,
    EVALUATOR_ROOT,
    PackFileEntry,
    RootTree,
    is_within,
    normalise,
    overlaps,
    public_target_problem,
    unsafe_path_reason,
)
from packs.compiler.rows import CONTROL_CHARACTERS, Row
from verifiers.families.base import FamilySpec, FieldProblem, unknown_fields
from verifiers.lanes import EVALUATION_INPUTS, PUBLIC, Lane

ResourceKind = Literal["text", "json", "file", "directory"]
FILE_REF_KEYS = frozenset({"path", "mount", "read_only"})
ASSET_KEYS = ("path", "mount", "read_only")


@dataclass(frozen=True)
class CompiledResource:
    name: str
    lane: Lane
    kind: ResourceKind
    value: Any  # the JSON value as authored (file refs: the descriptor; assets: the list)
    files: tuple[tuple[str, str], ...]  # (root, path) keys into CompiledPack.files
    size: int
    sha256: str


@dataclass(frozen=True)
class PackTrees:
    public: RootTree
    eval: RootTree


def build_resources(
    row: Row, spec: FamilySpec, trees: PackTrees
) -> tuple[tuple[CompiledResource, ...], list[FieldProblem]]:
    problems: list[FieldProblem] = []
    resources: list[CompiledResource] = []
    origins: dict[str, str] = {}  # resource name -> field it came from, for duplicate errors

    def add(resource: CompiledResource | None, origin: str) -> None:
        if resource is None:
            return
        if resource.name in origins:
            problems.append(
                (
                    origin,
                    f"duplicate resource name '{resource.name}' (also {origins[resource.name]})",
                )
            )
            return
        origins[resource.name] = origin
        resources.append(resource)

    for key, value in row.input.items():
        problems += _name_problems(key, f"input.{key}")
        add(_value_resource(key, PUBLIC, value), f"input.{key}")
    if row.assets:
        add(_assets_resource(row.assets, trees, problems), "assets")
    add_eval = _EvalBuilder(spec, trees, problems)
    for key, value in row.eval.items():
        problems += _name_problems(key, f"eval.{key}")
        add(add_eval.resource(key, value), f"eval.{key}")
    problems += add_eval.mount_overlaps()
    return tuple(resources), problems


def _name_problems(name: str, field: str) -> list[FieldProblem]:
    # Resource names become file names (securebench/public/<name>.json) when materialised.
    if name.strip() == "" or name in (".", "..") or "/" in name or "\\" in name:
        return [(field, "is not a usable resource name (it becomes a file name)")]
    if CONTROL_CHARACTERS.search(name):
        return [(field, "is not a usable resource name (it contains control characters)")]
    return []


def _value_resource(name: str, lane: Lane, value: Any) -> CompiledResource:
    """A value resource, hashed over its canonical JSON. Its size is what a reader means by
    it: a text's length in characters (a one-letter answer is 1, not the 3 bytes of
    ``"B"``), a JSON value's encoded length in bytes."""
    data = canonical_json(value)
    if isinstance(value, str):
        return CompiledResource(name, lane, "text", value, (), len(value), sha256_hex(data))
    return CompiledResource(name, lane, "json", value, (), len(data), sha256_hex(data))


def _files_sha256(entries: list[PackFileEntry]) -> str:
    return sha256_hex(canonical_json(sorted([entry.path, entry.sha256] for entry in entries)))


# --- assets ----------------------------------------------------------------------------------


def _assets_resource(
    assets: list[Any], trees: PackTrees, problems: list[FieldProblem]
) -> CompiledResource | None:
    entries: list[PackFileEntry] = []
    mounts: list[tuple[str, str]] = []  # (field, mount)
    for index, descriptor in enumerate(assets):
        field = f"assets[{index}]"
        found = _check_asset(descriptor, field, trees, problems)
        if found is not None:
            mount, files = found
            for earlier_field, earlier in mounts:
                if overlaps(mount, earlier):
                    problems.append(
                        (
                            f"{field}.mount",
                            f"overlaps {earlier_field}.mount ({earlier}); mounts in"
                            " one task may not be equal or nested",
                        )
                    )
            mounts.append((field, mount))
            entries += files
    # Two descriptors may share source files (a directory and a file inside it).
    entries = list({entry.path: entry for entry in entries}.values())
    data = canonical_json(assets)
    return CompiledResource(
        name="assets",
        lane=PUBLIC,
        kind="json",
        value=assets,
        files=tuple(("public", entry.path) for entry in entries),
        size=sum(entry.size for entry in entries),
        sha256=sha256_hex(data),
    )


def _check_asset(
    descriptor: Any, field: str, trees: PackTrees, problems: list[FieldProblem]
) -> tuple[str, list[PackFileEntry]] | None:
    """Returns (mount, files) of a valid descriptor, else logs why and returns None."""
    if not isinstance(descriptor, dict):
        problems.append((field, "must be an object"))
        return None
    before = len(problems)
    problems += unknown_fields(descriptor, ASSET_KEYS, field)
    if "read_only" in descriptor and not isinstance(descriptor["read_only"], bool):
        problems.append((f"{field}.read_only", "must be a boolean"))
    source = _source(descriptor.get("path"), f"{field}.path", trees.public, problems)
    mount = descriptor.get("mount", descriptor.get("path"))
    reason = unsafe_path_reason(mount)
    if "mount" in descriptor and reason:
        problems.append((f"{field}.mount", reason))
    if source is None or reason or len(problems) > before:
        return None
    path, files = source
    mount = normalise(mount)
    # Check where every file lands, so a directory mounted at "input" may not bring along a
    # file that would land on input/hidden.json.
    targets = [mount] + [
        f"{mount}/{entry.path[len(path) + 1 :]}" for entry in files if entry.path != path
    ]
    for target in targets:
        if why := public_target_problem(target):
            shown = "" if target == mount else f" (its file {target})"
            problems.append((f"{field}.mount", f"{mount}{shown} {why}"))
            return None
    return mount, files


def _source(
    value: Any, field: str, tree: RootTree, problems: list[FieldProblem]
) -> tuple[str, list[PackFileEntry]] | None:
    """Resolve a path under an asset root: (normalised path, its files) or None."""
    if value is None:
        problems.append((field, "is required"))
        return None
    if reason := unsafe_path_reason(value):
        problems.append((field, reason))
        return None
    path = normalise(value)
    if path in tree.rejected:
        problems.append((field, f"{tree.rel}/{path} is not a regular file or directory"))
        return None
    if tree.kind_of(path) is None:
        problems.append((field, f"{path} does not exist under the {tree.name} root {tree.rel}/"))
        return None
    return path, tree.files_at(path)


# --- eval ------------------------------------------------------------------------------------


class _EvalBuilder:
    """Builds eval resources, remembering file-reference mounts to check they do not overlap."""

    def __init__(self, spec: FamilySpec, trees: PackTrees, problems: list[FieldProblem]) -> None:
        self.spec = spec
        self.trees = trees
        self.problems = problems
        self.mounts: list[tuple[str, str]] = []  # (field, effective mount)

    def resource(self, key: str, value: Any) -> CompiledResource | None:
        lane = self.spec.lane_for(key)
        field = f"eval.{key}"
        if lane != PUBLIC and _is_file_ref(value):
            return self._file_ref(key, lane, value, field)
        checker_path = self.spec.eval_file_path(key, value)
        if checker_path is not None:
            return self._with_files(key, lane, value, checker_path, f"{field}.path")
        return _value_resource(key, lane, value)

    def _file_ref(
        self, key: str, lane: Lane, value: dict[str, Any], field: str
    ) -> CompiledResource | None:
        before = len(self.problems)
        if "read_only" in value and not isinstance(value["read_only"], bool):
            self.problems.append((f"{field}.read_only", "must be a boolean"))
        source = _source(value["path"], f"{field}.path", self.trees.eval, self.problems)
        root = EVALUATION_INPUTS_ROOT if lane == EVALUATION_INPUTS else EVALUATOR_ROOT
        mount = value.get("mount")
        if mount is not None:
            if reason := unsafe_path_reason(mount):
                self.problems.append((f"{field}.mount", reason))
            elif not is_within(normalise(mount), root) or normalise(mount) == root:
                self.problems.append(
                    (f"{field}.mount", f"must be under {root}/ for a {lane} resource")
                )
        if source is None or len(self.problems) > before:
            return None
        path, entries = source
        self.mounts.append((f"{field}.mount", normalise(mount) if mount else f"{root}/{path}"))
        return CompiledResource(
            name=key,
            lane=lane,
            kind="file" if self.trees.eval.kind_of(path) == "file" else "directory",
            value=value,
            files=tuple(("eval", entry.path) for entry in entries),
            size=sum(entry.size for entry in entries),
            sha256=_files_sha256(entries),
        )

    def _with_files(
        self, key: str, lane: Lane, value: Any, path: str, field: str
    ) -> CompiledResource | None:
        # A JSON value (e.g. a trusted-file checker) that names files under the eval root.
        source = _source(path, field, self.trees.eval, self.problems)
        if source is None:
            return None
        entries = source[1]
        data = canonical_json(value)
        return CompiledResource(
            name=key,
            lane=lane,
            kind="json",
            value=value,
            files=tuple(("eval", entry.path) for entry in entries),
            size=sum(entry.size for entry in entries),
            sha256=sha256_hex(data),
        )

    def mount_overlaps(self) -> list[FieldProblem]:
        problems: list[FieldProblem] = []
        for index, (field, mount) in enumerate(self.mounts):
            for earlier_field, earlier in self.mounts[:index]:
                if overlaps(mount, earlier):
                    problems.append((field, f"{mount} overlaps {earlier_field} ({earlier})"))
        return problems


def _is_file_ref(value: Any) -> bool:
    """Spec §2.5: an object with `path` and only {path, mount, read_only} is a file reference."""
    return isinstance(value, dict) and "path" in value and set(value) <= FILE_REF_KEYS
