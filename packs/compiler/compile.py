"""compile_pack: a pack directory in, a CompiledPack (or a PackError naming every problem) out.

Order matters: the manifest first (rows need its defaults and roots), then the two asset
trees (rows point into them), then the rows, streamed into the digest as they are read.
A manifest with problems stops the compile, but only after the rows' own checks (JSON,
shape, ids, each family's fields), so one upload names the problems of both.

``open_pack`` is the streaming form for large packs: it yields each compiled task as its row
is read, so a caller can write tasks somewhere in batches instead of holding all of them;
``PackCompilation.finish`` then raises ``PackError`` if any row (or anything else) was bad,
so the caller must treat what it wrote as provisional until ``finish`` returns.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from packs.compiler.digest import PackDigest
from packs.compiler.errors import Problem, ProblemLog
from packs.compiler.limits import CompileLimits
from packs.compiler.manifest import Manifest, ManifestReading, read_manifest
from packs.compiler.paths import PackFileEntry, ignored_files, walk_root
from packs.compiler.rows import MAX_ID_CHARS, Row, check_row, look_alike_key, read_rows
from packs.compiler.visibility import CompiledResource, PackTrees, build_resources
from verifiers.families import get_family, is_known_family
from verifiers.families.base import FieldProblem
from verifiers.lanes import LANES, PUBLIC
from verifiers.task import TaskFile, TaskLanes


@dataclass(frozen=True)
class CompiledTask:
    task_id: str
    family: str
    position: int  # 0-based among the rows
    line: int  # 1-based line in the tasks file
    has_verifier: bool  # False for deferred and unknown families: results stay pending
    metadata: dict[str, Any]
    environment: dict[str, Any]
    resources: tuple[CompiledResource, ...]

    def agent_payload(self) -> dict[str, Any]:
        """Exactly the public resources; never metadata, environment or another lane."""
        # A copy, so a caller editing the payload cannot change the compiled task.
        return {r.name: copy.deepcopy(r.value) for r in self.resources if r.lane == PUBLIC}


@dataclass(frozen=True)
class CompiledPack:
    manifest: Manifest
    tasks: list[CompiledTask]
    files: dict[tuple[str, str], PackFileEntry]  # every file under both roots, by (root, path)
    digest: str  # hex sha256 of manifest, rows and files
    report: dict[str, Any]


@dataclass(frozen=True)
class CompileSummary:
    """What is known once every row has been read without a problem."""

    digest: str  # hex sha256 of manifest, rows and files
    report: dict[str, Any]
    task_count: int


def agent_task_json(payload: dict[str, Any]) -> str:
    """The agent's task.json, byte-compatible with upstream harnesses."""
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def compile_pack(
    root: Path,
    *,
    limits: CompileLimits = CompileLimits(),  # noqa: B008 - frozen, so one shared default is safe
    manifest_name: str = "manifest.yaml",
    tasks_name: str = "tasks.jsonl",
) -> CompiledPack:
    compilation = open_pack(root, limits=limits, manifest_name=manifest_name, tasks_name=tasks_name)
    tasks = list(compilation.tasks())
    summary = compilation.finish()
    return CompiledPack(
        manifest=compilation.manifest,
        tasks=tasks,
        files=compilation.files,
        digest=summary.digest,
        report=summary.report,
    )


def open_pack(
    root: Path,
    *,
    limits: CompileLimits = CompileLimits(),  # noqa: B008 - frozen, so one shared default is safe
    manifest_name: str = "manifest.yaml",
    tasks_name: str = "tasks.jsonl",
) -> PackCompilation:
    """Read the manifest and walk the asset roots; the rows are read by ``tasks()``. A bad
    manifest raises PackError here, listing the rows' own problems after the manifest's."""
    root = Path(root).absolute()
    reading = read_manifest(root, manifest_name, limits)
    if reading.manifest is None:
        _refuse_manifest(reading, root / tasks_name, tasks_name, limits)
    return PackCompilation(root, reading.manifest, limits, manifest_name, tasks_name)


class PackCompilation:
    """One pass over a pack's rows: ``tasks()`` once, to the end, then ``finish()``."""

    def __init__(
        self,
        root: Path,
        manifest: Manifest,
        limits: CompileLimits,
        manifest_name: str,
        tasks_name: str,
    ) -> None:
        self.root = root
        self.manifest = manifest
        self.limits = limits
        self.manifest_name = manifest_name
        self.tasks_name = tasks_name
        self.log = ProblemLog(limits.max_problems)
        self.trees = PackTrees(
            public=walk_root(root, "public", manifest.public_root, self.log),
            eval=walk_root(root, "eval", manifest.eval_root, self.log),
        )
        self.files: dict[tuple[str, str], PackFileEntry] = {
            (tree.name, path): entry
            for tree in (self.trees.public, self.trees.eval)
            for path, entry in sorted(tree.files.items())
        }
        self._digest = PackDigest(manifest.digest_source)
        self._counts = _ReportCounts()
        self._read = False

    @property
    def failed(self) -> bool:
        """True once any problem is known: finish() will raise, so nothing need be kept."""
        return bool(self.log.problems)

    def tasks(self) -> Iterator[CompiledTask]:
        """Every valid task in row order. Bad rows are logged, not raised (so one upload
        names many problems), unless a limit stops reading with PackError."""
        if self._read:
            raise RuntimeError("the rows of a PackCompilation are read once")
        self._read = True
        for task in _compile_rows(
            self.root,
            self.tasks_name,
            self.manifest,
            self.trees,
            self.limits,
            self.log,
            self._digest,
        ):
            self._counts.add(task)
            yield task

    def finish(self) -> CompileSummary:
        """The digest and report, or PackError naming every problem found."""
        if not self._read:
            raise RuntimeError("finish() comes after reading every task")
        if not self._counts.tasks and not self.log.problems:
            self.log.add(
                Problem(self.tasks_name, None, None, "has no task rows; a pack needs at least one")
            )
        self.log.raise_if_any()
        manifest = self.manifest
        skip = {self.manifest_name, self.tasks_name, manifest.public_root, manifest.eval_root}
        files = self.files
        return CompileSummary(
            digest=self._digest.finish(
                (root_name, path, e.sha256) for (root_name, path), e in files.items()
            ),
            report=self._counts.report(files, ignored_files(self.root, skip)),
            task_count=self._counts.tasks,
        )


def _compile_rows(
    root: Path,
    tasks_name: str,
    manifest: Manifest,
    trees: PackTrees,
    limits: CompileLimits,
    log: ProblemLog,
    digest: PackDigest,
) -> Iterator[CompiledTask]:
    position = 0
    ids = _SeenIds()
    for line, data, row_json in read_rows(root / tasks_name, tasks_name, limits, log):
        digest.add_row(row_json)
        row, problems = check_row(line, data, manifest.default_family)
        if row is not None:
            problems = ids.problems(row)
        if row is not None and not problems:
            task, problems = _compile_row(row, position, manifest, trees)
            if task is not None:
                position += 1
                yield task
        _log_row_problems(log, tasks_name, line, data, manifest.default_family, problems)


def _refuse_manifest(
    reading: ManifestReading, path: Path, tasks_name: str, limits: CompileLimits
) -> NoReturn:
    """Raise PackError with the manifest's problems and the rows' own ones.

    Without a valid manifest the asset roots are unknown, so file references wait for the
    next upload; everything a row says about itself is checked now.
    """
    log = ProblemLog(limits.max_problems)
    for problem in reading.problems:
        log.add(problem)
    default = reading.default_family
    ids = _SeenIds()
    for line, data, _ in read_rows(path, tasks_name, limits, log):
        row, problems = check_row(line, data, default, default_known=reading.default_family_known)
        if row is not None:
            problems = ids.problems(row) or get_family(row.family).validate(row.input, row.eval)
        _log_row_problems(log, tasks_name, line, data, default, problems)
    raise log.error()


def _log_row_problems(
    log: ProblemLog,
    tasks_name: str,
    line: int,
    data: dict[str, Any],
    default_family: str | None,
    problems: list[FieldProblem],
) -> None:
    if problems:
        context = _context(data, default_family)
        for field, message in problems:
            log.add(Problem(tasks_name, line, field, message + context))


class _SeenIds:
    """Task ids seen so far, by look-alike key, with the line each first appeared on."""

    def __init__(self) -> None:
        self._first: dict[str, tuple[str, int]] = {}

    def problems(self, row: Row) -> list[FieldProblem]:
        """No problem (and the id is remembered) the first time; else the duplicate's."""
        key = look_alike_key(row.id)
        seen = self._first.get(key)
        if seen is None:
            self._first[key] = (row.id, row.line)
            return []
        return [("id", _duplicate_id(row.id, *seen))]


def _duplicate_id(task_id: str, first_id: str, first_line: int) -> str:
    if task_id == first_id:
        return f"duplicate task id '{task_id}': already used on line {first_line}"
    return (
        f"task id '{task_id}' looks the same as '{first_id}' on line {first_line} "
        "(they differ only in compatibility forms such as full-width letters)"
    )


def _compile_row(
    row: Row, position: int, manifest: Manifest, trees: PackTrees
) -> tuple[CompiledTask | None, list[FieldProblem]]:
    spec = get_family(row.family)
    problems = spec.validate(row.input, row.eval)
    resources, resource_problems = build_resources(row, spec, trees)
    problems += resource_problems
    if problems:
        return None, problems
    environment = {**manifest.default_environment, **row.environment}
    metadata = {
        **row.metadata,
        # Reserved keys win over row metadata of the same name (spec §2.4).
        "benchmark_pack": {"id": manifest.id, "version": manifest.version},
        "environment": environment,
        "asset_roots": {"public": manifest.public_root, "eval": manifest.eval_root},
        "asset_defaults": {"read_only": manifest.read_only_default},
    }
    task = CompiledTask(
        task_id=row.id,
        family=row.family,
        position=position,
        line=row.line,
        has_verifier=spec.active,
        metadata=metadata,
        environment=dict(environment),
        resources=resources,
    )
    return task, []


def _context(data: dict[str, Any], default_family: str | None) -> str:
    """' (task 'x', family)' once the row's id is readable, so messages say which task."""
    task_id = data.get("id")
    if not isinstance(task_id, str) or not task_id.strip() or len(task_id) > MAX_ID_CHARS:
        return ""
    family = data.get("family", default_family)
    shown = f"task {task_id!r}"
    return f" ({shown}, {family})" if isinstance(family, str) and family else f" ({shown})"


class _ReportCounts:
    """The report's per-task tallies, kept as tasks stream past."""

    def __init__(self) -> None:
        self.tasks = 0
        self.families: Counter[str] = Counter()
        # (resource name, lane) -> resources; a flat dict, as this runs for every resource.
        self.name_lanes: dict[tuple[str, str], int] = {}

    def add(self, task: CompiledTask) -> None:
        self.tasks += 1
        self.families[task.family] += 1
        counts = self.name_lanes
        for resource in task.resources:
            key = (resource.name, resource.lane)
            counts[key] = counts.get(key, 0) + 1

    def report(
        self, files: dict[tuple[str, str], PackFileEntry], ignored: list[str]
    ) -> dict[str, Any]:
        lanes = dict.fromkeys(LANES, 0)
        resource_lanes: dict[str, dict[str, int]] = {}
        for (name, lane), count in self.name_lanes.items():
            lanes[lane] += count
            resource_lanes.setdefault(name, {})[lane] = count
        return {
            "family_counts": dict(sorted(self.families.items())),
            "lane_counts": lanes,
            "resource_lanes": dict(sorted(resource_lanes.items())),
            "warnings": _family_warnings(self.families),
            "ignored_files": ignored,
            "file_count": len(files),
            "file_bytes": sum(entry.size for entry in files.values()),
        }


def _family_warnings(families: Counter[str]) -> list[str]:
    warnings = []
    for family, count in sorted(families.items()):
        if not is_known_family(family):
            warnings.append(
                f"family '{family}' is not a known family; its tasks have no verifier and every"
                " eval key is hidden"
            )
        elif not get_family(family).active:
            warnings.append(
                f"family '{family}' has no verifier yet; its {count} task(s) will stay pending"
            )
    return warnings


def compiled_task_lanes(
    task: CompiledTask,
    files: dict[tuple[str, str], PackFileEntry],
    contract: dict[str, Any] | None = None,
) -> TaskLanes:
    """All three lanes of a freshly compiled task, for verifying without a database
    (tests and benchmarks); the site builds the same view from stored rows. ``contract``:
    the manifest's, for families that judge by it (artifact_task)."""
    lanes: dict[str, dict[str, Any]] = {lane: {} for lane in LANES}
    attached: dict[str, tuple[TaskFile, ...]] = {}
    for resource in task.resources:
        lanes[resource.lane][resource.name] = copy.deepcopy(resource.value)
        if resource.files:
            attached[resource.name] = tuple(
                TaskFile(path=path, source=files[(root, path)].source)
                for root, path in resource.files
            )
    return TaskLanes(
        task_id=task.task_id,
        family=task.family,
        public=lanes[PUBLIC],
        evaluation_inputs=lanes["evaluation_inputs"],
        hidden=lanes["hidden"],
        environment=copy.deepcopy(task.environment),
        metadata=copy.deepcopy(task.metadata),
        files=attached,
        contract=copy.deepcopy(contract or {}),
    )
