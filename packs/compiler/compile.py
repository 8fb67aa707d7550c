"""compile_pack: a pack directory in, a CompiledPack (or a PackError naming every problem) out.

Order matters: the manifest first (rows need its defaults and roots), then the two asset
trees (rows point into them), then the rows, streamed into the digest as they are read.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packs.compiler.digest import PackDigest
from packs.compiler.errors import Problem, ProblemLog
from packs.compiler.limits import CompileLimits
from packs.compiler.manifest import Manifest, load_manifest
from packs.compiler.paths import PackFileEntry, ignored_files, walk_root
from packs.compiler.rows import MAX_ID_CHARS, Row, check_row, read_rows
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
    root = Path(root).absolute()
    manifest = load_manifest(root, manifest_name, limits)
    log = ProblemLog(limits.max_problems)
    trees = PackTrees(
        public=walk_root(root, "public", manifest.public_root, log),
        eval=walk_root(root, "eval", manifest.eval_root, log),
    )
    digest = PackDigest(manifest.canonical)
    tasks = _compile_rows(root, tasks_name, manifest, trees, limits, log, digest)
    if not tasks and not log.problems:
        log.add(Problem(tasks_name, None, None, "has no task rows; a pack needs at least one"))
    log.raise_if_any()
    files = {
        (tree.name, path): entry
        for tree in (trees.public, trees.eval)
        for path, entry in sorted(tree.files.items())
    }
    skip = {manifest_name, tasks_name, manifest.public_root, manifest.eval_root}
    return CompiledPack(
        manifest=manifest,
        tasks=tasks,
        files=files,
        digest=digest.finish((root_name, path, e.sha256) for (root_name, path), e in files.items()),
        report=_report(tasks, files, ignored_files(root, skip)),
    )


def _compile_rows(
    root: Path,
    tasks_name: str,
    manifest: Manifest,
    trees: PackTrees,
    limits: CompileLimits,
    log: ProblemLog,
    digest: PackDigest,
) -> list[CompiledTask]:
    tasks: list[CompiledTask] = []
    first_line: dict[str, int] = {}  # task id -> line it first appeared on
    for line, data, row_json in read_rows(root / tasks_name, tasks_name, limits, log):
        digest.add_row(row_json)
        row, problems = check_row(line, data, manifest.default_family)
        context = _context(data, manifest.default_family)
        if row is not None and row.id in first_line:
            problems.append(
                ("id", f"duplicate task id '{row.id}': already used on line {first_line[row.id]}")
            )
        elif row is not None:
            first_line[row.id] = line
            task, problems = _compile_row(row, len(tasks), manifest, trees)
            if task is not None:
                tasks.append(task)
        for field, message in problems:
            log.add(Problem(tasks_name, line, field, message + context))
    return tasks


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


def _report(
    tasks: list[CompiledTask], files: dict[tuple[str, str], PackFileEntry], ignored: list[str]
) -> dict[str, Any]:
    families = Counter(task.family for task in tasks)
    lanes: Counter[str] = Counter({lane: 0 for lane in LANES})
    resource_lanes: dict[str, Counter[str]] = {}
    for task in tasks:
        for resource in task.resources:
            lanes[resource.lane] += 1
            resource_lanes.setdefault(resource.name, Counter())[resource.lane] += 1
    return {
        "family_counts": dict(sorted(families.items())),
        "lane_counts": {lane: lanes[lane] for lane in LANES},
        "resource_lanes": {name: dict(counts) for name, counts in sorted(resource_lanes.items())},
        "warnings": _family_warnings(families),
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
    task: CompiledTask, files: dict[tuple[str, str], PackFileEntry]
) -> TaskLanes:
    """All three lanes of a freshly compiled task, for verifying without a database
    (tests and benchmarks); the site builds the same view from stored rows."""
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
    )
