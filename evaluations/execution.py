"""Running an uploaded evaluation on a worker: its files from the sealed store into a scratch
folder, the tasks' lanes as a verifier may see them, the candidates' files, then one sandboxed
call of its program (verifiers.evaluation_program), whose answer the host has validated.

Whose fault: anything the program does wrong is ``evaluation_error`` (its authors', shown to
them with its log in debug mode), never the candidate's failure; a sandbox that could not
start is ours (``sandbox_unavailable``, retried like any verification).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from evaluations.manifest import EvaluationManifest
from evaluations.models import EvaluationDefinition, FileRole
from evaluations.registry import manifest_of
from packs.blobs import local_blob
from packs.models import FileRoot
from verifiers.evaluation_messages import MetricDeclaration
from verifiers.evaluation_program import (
    ProgramOutcome,
    ProgramSpec,
    ProgramTask,
    run_evaluation_program,
)
from verifiers.evaluation_relay import CandidateProgram
from verifiers.sandbox import MiB, Sandbox, SandboxUnavailable
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import ERROR, FAILED, PASSED, Reason, Verdict


@dataclass(frozen=True)
class ScoredCandidate:
    """One task result to score: the task as a verifier may see it, and what was submitted."""

    lanes: TaskLanes
    candidate: Candidate | None
    sample: int = 0


def program_spec(manifest: EvaluationManifest) -> ProgramSpec:
    candidate_program = None
    if manifest.has_candidate_program:
        candidate_program = CandidateProgram(
            command=manifest.candidate_command,
            command_file=manifest.candidate_command_file,
            reply_timeout_seconds=manifest.reply_timeout_seconds,
        )
    return ProgramSpec(
        key=manifest.key,
        scope=manifest.scope,
        command=manifest.command,
        image=manifest.image,
        timeout_seconds=float(manifest.timeout_seconds),
        memory_bytes=manifest.memory_mb * MiB,
        metrics=tuple(
            MetricDeclaration(
                name=metric.name,
                direction=metric.direction,
                minimum=metric.minimum,
                maximum=metric.maximum,
                primary=metric.primary,
            )
            for metric in manifest.metrics
        ),
        candidate_program=candidate_program,
    )


def evaluation_call(
    definition: EvaluationDefinition, sandbox: Sandbox | None, items: Sequence[ScoredCandidate]
) -> ProgramOutcome:
    """One call of the program over these task results (one for task scope, all for run)."""
    if sandbox is None:
        raise SandboxUnavailable("no sandbox backend is usable on this worker")
    manifest = manifest_of(definition)
    with _scratch() as scratch:
        program_dir, sealed_dir = _stage_definition(definition, scratch)
        tasks = [
            _program_task(item, scratch / "tasks" / str(n), _visible_outputs(manifest))
            for n, item in enumerate(items)
        ]
        return run_evaluation_program(
            sandbox, program_spec(manifest), program_dir, sealed_dir, tasks
        )


def task_verdict(
    definition: EvaluationDefinition, sandbox: Sandbox | None, item: ScoredCandidate
) -> tuple[Verdict, dict[str, Any]]:
    """A task-scope call as a result's verdict, with the metrics it stores."""
    try:
        outcome = evaluation_call(definition, sandbox, [item])
    except SandboxUnavailable as exc:
        return Verdict(ERROR, reason=Reason.SANDBOX_UNAVAILABLE, stderr=str(exc)[:2000]), {}
    return outcome_verdict(manifest_of(definition), outcome), dict(outcome.metrics)


def outcome_verdict(manifest: EvaluationManifest, outcome: ProgramOutcome) -> Verdict:
    common = {
        "stderr": outcome.log,
        "duration_seconds": outcome.duration_seconds,
        "sandbox_backend": outcome.backend,
        "sandbox_image": outcome.image or "",
    }
    if outcome.status != "ok":
        details = {"evaluation": manifest.key, "problem": outcome.problem}
        return Verdict(ERROR, reason=Reason.EVALUATION_ERROR, details=details, **common)
    primary = manifest.primary
    value = outcome.metrics.get(primary.name, {}).get("value")
    passed = outcome.passed if outcome.passed is not None else _reaches(primary, value)
    details = {"evaluation": manifest.key, "notes": list(outcome.candidate_notes)[:20]}
    # The verdict's score is pass/fail; the metrics (any range: a Brier score, a PGR) are
    # stored beside it and are what the run's numbers come from.
    if passed:
        return Verdict(PASSED, score=1.0, details=details, **common)
    return Verdict(FAILED, score=0.0, reason=Reason.WRONG_ANSWER, details=details, **common)


def _reaches(primary: Any, value: Any) -> bool:
    if primary.pass_at is None or not isinstance(value, int | float):
        return False
    if primary.direction == "higher":
        return value >= primary.pass_at
    return value <= primary.pass_at


def _visible_outputs(manifest: EvaluationManifest) -> tuple[str, ...]:
    """What of a candidate's files the call copies: the outputs ``reads`` names, or all of
    them when it names none or when the candidate's own program plays (its player needs
    every file it shipped, and starts from the same copy)."""
    return () if manifest.has_candidate_program else manifest.reads


def reads_output(reads: tuple[str, ...], path: str) -> bool:
    """Whether the evaluation reads this output: every one when ``reads`` is empty; else a
    path named, a file under a folder named, or a glob's match."""
    if not reads:
        return True
    return any(
        path == entry or path.startswith(entry.rstrip("/") + "/") or fnmatchcase(path, entry)
        for entry in reads
    )


# --- staging ---------------------------------------------------------------------------------


@contextmanager
def _scratch() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="evaluation-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stage_definition(definition: EvaluationDefinition, scratch: Path) -> tuple[Path, Path]:
    """Copies of the program and sealed data (never the blob cache itself: a sandbox only
    ever sees copies, so nothing it does can reach another verification's files)."""
    program_dir, sealed_dir = scratch / "program", scratch / "sealed"
    program_dir.mkdir()
    sealed_dir.mkdir()
    for item in definition.files.all():
        target = (program_dir if item.role == FileRole.PROGRAM else sealed_dir) / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local_blob(FileRoot.EVAL, item.sha256), target)
        target.chmod(0o755 if item.mode & 0o111 else 0o644)
    return program_dir, sealed_dir


def _program_task(item: ScoredCandidate, folder: Path, reads: tuple[str, ...]) -> ProgramTask:
    candidate_dir, files_dir = folder / "candidate", folder / "files"
    candidate_dir.mkdir(parents=True)
    files_dir.mkdir()
    if item.candidate is not None:
        _write_candidate(item.candidate, candidate_dir, reads)
    lanes = item.lanes
    for name in lanes.evaluation_inputs:
        for task_file in lanes.files.get(name, ()):
            target = files_dir / task_file.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(task_file.source, target)
    return ProgramTask(
        task_id=lanes.task_id,
        family=lanes.family,
        sample=item.sample,
        input=dict(lanes.public),
        eval=dict(lanes.evaluation_inputs),
        files_dir=files_dir,
        candidate_dir=candidate_dir,
    )


def _write_candidate(candidate: Candidate, folder: Path, reads: tuple[str, ...]) -> None:
    """File candidates as their files (only the outputs the evaluation says it reads, when it
    names any); a text, code or patch candidate as one file named after its kind
    (``candidate.txt``, ``candidate.py``, ``candidate.patch``)."""
    if candidate.files:
        for path, content in candidate.files.items():
            if not reads_output(reads, path):
                continue
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.content)
            target.chmod(0o755 if content.mode & 0o111 else 0o644)
        return
    name = {"code": "candidate.py", "patch": "candidate.patch"}.get(candidate.kind, "candidate.txt")
    (folder / name).write_text(candidate.text, encoding="utf-8")
