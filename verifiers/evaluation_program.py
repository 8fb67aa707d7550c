"""One call of an uploaded evaluation program, in a sandbox of either backend (issue 33).

Pure data in, pure data out: no Django, no storage. The caller hands the program's and the
sealed data's host folders, and per task its public input, evaluation-input lane values,
sandbox-visible files and the candidate's files; it gets back a ``ProgramOutcome``.

The sandbox sees (eval-spec "What the evaluation program sees")::

    /evaluation/program/        the program's files            read-only
    /evaluation/sealed/         its sealed data (may be empty) read-only
    /evaluation/input.json      the call's input               read-only
    /evaluation/tasks/<n>/files each task's eval files          read-only
    /candidates/<n>/            each task's candidate files     read-only
    /work                       writable scratch (cwd), size-capped tmpfs; no network

Everything visible is first copied into one scratch folder of this call (regular files and
folders only: a link or a device in an uploaded folder is refused, never followed), made
readable by the sandbox's uid, and mounted as two read-only folders, ``/evaluation`` and
``/candidates``. A copy costs little next to a sandbox start, and it makes both backends
see the same tree: bubblewrap's slot uid cannot traverse a private storage folder, and
Docker binds whatever the host path holds at start.

The host trusts nothing the program writes except its stdout lines, each parsed and
checked (``verifiers.evaluation_messages``); files it leaves in /work vanish with the
sandbox. Its stderr is its log, capped. The candidate's player, when the evaluation
declares one, runs in a second sandbox behind ``verifiers.evaluation_relay``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verifiers.evaluation_messages import (
    FINAL,
    TO_CANDIDATE,
    MetricDeclaration,
    parse_line,
    validated_final,
    validated_metrics,
)
from verifiers.evaluation_relay import CandidateProgram, Player, request_problem
from verifiers.families.code_relay import DeadlinePassed, FrameTooLarge, LineReader, write_all
from verifiers.sandbox.base import (
    CODE_LIMITS,
    Limits,
    MiB,
    Mount,
    Sandbox,
    SandboxProcess,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.verdict import cap_text, storable_text

__all__ = [
    "CandidateProgram",
    "MetricDeclaration",
    "ProgramOutcome",
    "ProgramSpec",
    "ProgramTask",
    "run_evaluation_program",
    "validated_final",
    "validated_metrics",
]

OK = "ok"
ERROR = "error"
EVALUATION_ERROR = "evaluation_error"

EVALUATION_ROOT = "/evaluation"
CANDIDATES_ROOT = "/candidates"
MAX_STDOUT_LINE = 1 * MiB
MAX_STDOUT_TOTAL = 8 * MiB
LOG_CHARS = 64 * 1024  # of the program's stderr kept in the outcome
# The host reads past the program's wall limit a little: the backend kills it at the limit
# and says so, which names the cause better than our own deadline would.
HOST_GRACE_SECONDS = 2.0
MAX_COPIED_FILES = 20_000
MAX_COPIED_BYTES = 1024 * MiB


@dataclass(frozen=True)
class ProgramSpec:
    """What evaluation.yaml says about running its program."""

    key: str  # "id@version"
    scope: str  # "task" | "run"
    command: tuple[str, ...]
    image: str | None
    timeout_seconds: float
    memory_bytes: int
    metrics: tuple[MetricDeclaration, ...]
    candidate_program: CandidateProgram | None = None


@dataclass(frozen=True)
class ProgramTask:
    task_id: str
    family: str
    sample: int
    input: dict[str, Any]  # the task's public input
    eval: dict[str, Any]  # its evaluation-input lane values only (what a verifier may see)
    files_dir: Path | None  # host folder of the task's sandbox-visible eval files
    candidate_dir: Path  # host folder holding the candidate's files


@dataclass(frozen=True)
class ProgramOutcome:
    status: str  # "ok" | "error"
    reason: str | None  # None when ok, else "evaluation_error"
    problem: str  # what was wrong, naming the field and value ("" when ok)
    metrics: dict[str, dict[str, float | None]]  # {name: {"value", "ci_low", "ci_high"}}
    passed: bool | None  # the program's own "passed", when it gave one
    log: str  # the program's stderr, capped
    duration_seconds: float
    backend: str | None  # None when no sandbox ran (the inputs were refused first)
    image: str | None
    candidate_notes: list[str] = field(default_factory=list)  # what the player did wrong
    notes: list[str] = field(default_factory=list)  # the sandbox's own notes


class UnsafeTree(ValueError):
    """A folder we refuse to copy into the sandbox's view (a link, a device, too big)."""


# --- the scratch folder ------------------------------------------------------------------------


@dataclass
class _Budget:
    files: int = 0
    bytes: int = 0

    def spend(self, label: str, size: int) -> None:
        self.files += 1
        self.bytes += size
        if self.files > MAX_COPIED_FILES:
            raise UnsafeTree(f"more than {MAX_COPIED_FILES} files to copy ({label})")
        if self.bytes > MAX_COPIED_BYTES:
            raise UnsafeTree(f"more than {MAX_COPIED_BYTES} bytes to copy ({label})")


def copy_tree(source: Path | None, target: Path, label: str, budget: _Budget) -> list[str]:
    """Copy ``source``'s regular files and folders to ``target`` (readable by every uid);
    the copied files' relative paths. A link or special file refuses the whole call."""
    target.mkdir(mode=0o755)
    target.chmod(0o755)  # whatever the umask
    copied: list[str] = []
    if source is None:
        return copied
    pending = [(source, target, "")]  # a stack, not recursion: depth is the uploader's
    while pending:
        folder, copy, prefix = pending.pop()
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda item: item.name):
                relative = prefix + entry.name
                where = f"{label}/{relative}"
                if entry.is_dir(follow_symlinks=False):
                    (copy / entry.name).mkdir(mode=0o755)
                    (copy / entry.name).chmod(0o755)
                    pending.append((Path(entry.path), copy / entry.name, relative + "/"))
                elif entry.is_file(follow_symlinks=False):
                    budget.spend(where, entry.stat(follow_symlinks=False).st_size)
                    _copy_file(Path(entry.path), copy / entry.name, where)
                    copied.append(relative)
                else:
                    raise UnsafeTree(f"{where} is a link or special file, not a regular file")
    return sorted(copied)


def _copy_file(source: Path, target: Path, where: str) -> None:
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:  # swapped for a link since the scan
        raise UnsafeTree(f"{where} cannot be opened: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as reading:
        info = os.fstat(reading.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeTree(f"{where} is not a regular file")
        mode = 0o755 if info.st_mode & 0o100 else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(target, flags, mode), "wb") as writing:
            shutil.copyfileobj(reading, writing)
    target.chmod(mode)


def lay_out(
    root: Path,
    spec: ProgramSpec,
    program_dir: Path,
    sealed_dir: Path | None,
    tasks: Sequence[ProgramTask],
) -> None:
    """The call's scratch folder: ``root/evaluation`` and ``root/candidates``."""
    root.chmod(0o755)
    budget = _Budget()
    evaluation = root / "evaluation"
    evaluation.mkdir(mode=0o755)
    evaluation.chmod(0o755)
    copy_tree(program_dir, evaluation / "program", "program", budget)
    copy_tree(sealed_dir, evaluation / "sealed", "sealed", budget)
    (evaluation / "tasks").mkdir(mode=0o755)
    (evaluation / "tasks").chmod(0o755)
    candidates = root / "candidates"
    candidates.mkdir(mode=0o755)
    candidates.chmod(0o755)
    entries = []
    for index, task in enumerate(tasks):
        (evaluation / "tasks" / str(index)).mkdir(mode=0o755)
        (evaluation / "tasks" / str(index)).chmod(0o755)
        files_at = evaluation / "tasks" / str(index) / "files"
        copy_tree(task.files_dir, files_at, f"tasks/{index}/files", budget)
        names = copy_tree(task.candidate_dir, candidates / str(index), f"candidate {index}", budget)
        entries.append(_task_entry(task, index, names))
    document = {
        "evaluation": spec.key,
        "scope": spec.scope,
        "metrics": [metric.as_input() for metric in spec.metrics],
        "tasks": entries,
    }
    input_path = evaluation / "input.json"
    input_path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    input_path.chmod(0o644)


def _task_entry(task: ProgramTask, index: int, candidate_files: list[str]) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "family": task.family,
        "sample": task.sample,
        "input": task.input,
        "eval": task.eval,
        "files": f"{EVALUATION_ROOT}/tasks/{index}/files",
        "candidate": f"{CANDIDATES_ROOT}/{index}",
        "candidate_files": candidate_files,
    }


def program_limits(spec: ProgramSpec) -> Limits:
    """The code profile with the evaluation's own wall clock and memory; CPU time never
    below the wall clock (a busy program must meet its timeout, not an earlier CPU cap)."""
    return replace(
        CODE_LIMITS,
        wall_seconds=float(spec.timeout_seconds),
        memory_bytes=int(spec.memory_bytes),
        cpu_seconds=max(CODE_LIMITS.cpu_seconds, math.ceil(spec.timeout_seconds)),
    )


def program_sandbox_spec(spec: ProgramSpec, root: Path) -> SandboxSpec:
    return SandboxSpec(
        command=list(spec.command),
        image=spec.image,
        mounts=(
            Mount(root / "evaluation", EVALUATION_ROOT),
            Mount(root / "candidates", CANDIDATES_ROOT),
        ),
        limits=program_limits(spec),
    )


# --- the channel -------------------------------------------------------------------------------


@dataclass
class _Reading:
    final: dict[str, Any] | None = None
    problem: str = ""  # the channel broken by the program: it is killed at once
    timed_out: bool = False  # our deadline passed before its stdout ended
    lines: int = 0
    stdout_bytes: int = 0


class _Channel:
    """Reads the program's stdout line by line, never past the deadline, and relays to the
    player when asked. Stops at the first line that breaks the channel."""

    def __init__(self, process: SandboxProcess, player: Player | None, deadline: float) -> None:
        self.process, self.player, self.deadline = process, player, deadline
        self.reader = LineReader(process.stdout)
        self.reading = _Reading()
        self.stdin_open = True

    def run(self) -> _Reading:
        try:
            while not self.reading.problem:
                line = self.reader.read_line(self.deadline, MAX_STDOUT_LINE)
                if line is None:
                    break
                self._take(line)
        except DeadlinePassed:
            self.reading.timed_out = True
        except FrameTooLarge:
            self.reading.problem = f"a stdout line is over {MAX_STDOUT_LINE} bytes"
        return self.reading

    def _take(self, line: bytes) -> None:
        reading = self.reading
        reading.lines += 1
        reading.stdout_bytes += len(line) + 1
        if reading.stdout_bytes > MAX_STDOUT_TOTAL:
            reading.problem = f"stdout is over {MAX_STDOUT_TOTAL} bytes"
            return
        message, problem = parse_line(line, reading.lines)
        where = f"stdout line {reading.lines}"
        if message is None:
            reading.problem = problem
        elif reading.final is not None:
            second = message.kind == FINAL
            reading.problem = (
                "more than one final message" if second else f"{where} follows the final message"
            )
        elif message.kind == FINAL:
            reading.final = message.body
        elif self.player is None:
            reading.problem = (
                f"{where} is a {message.kind} message, but the evaluation declares no "
                "candidate_program"
            )
        else:
            self._relay(self.player, message.kind, message.body, where)

    def _relay(self, player: Player, kind: str, body: dict[str, Any], where: str) -> None:
        if kind == TO_CANDIDATE:
            problem = request_problem(body["to_candidate"])
            if problem:
                self.reading.problem = f"{where}: {problem}"
                return
            answer = player.ask(body["to_candidate"])
        else:
            answer = player.restart()
        if not self.stdin_open:
            return
        try:
            write_all(self.process.stdin, json.dumps(answer).encode() + b"\n", self.deadline)
        except OSError:
            # It closed its stdin (or exited): what it prints next, or its exit, decides.
            self.stdin_open = False


# --- one call ----------------------------------------------------------------------------------


def run_evaluation_program(
    sandbox: Sandbox,
    spec: ProgramSpec,
    program_dir: Path,
    sealed_dir: Path | None,
    tasks: list[ProgramTask],
) -> ProgramOutcome:
    """Run the program once over ``tasks`` (one for task scope) and check what it reports.

    Raises SandboxUnavailable when a sandbox could not start or be torn down (ours; the
    caller retries). Everything the program does wrong is an ``evaluation_error`` outcome.
    """
    if spec.scope == "task" and len(tasks) != 1:
        raise ValueError(f"a task-scope call takes exactly one task, not {len(tasks)}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="securebench-evaluation-") as tmp:
        root = Path(tmp)
        try:
            lay_out(root, spec, program_dir, sealed_dir, tasks)
        except (UnsafeTree, OSError) as exc:
            return _refused(f"cannot lay out the call's files: {exc}", started)
        try:
            process = sandbox.start(program_sandbox_spec(spec, root))
        except OSError as exc:  # the backend's own plumbing failed: ours, retried
            raise SandboxUnavailable(f"cannot start the program's sandbox: {exc}") from exc
        # The program's own wall clock starts now, not before a slow engine's container start.
        deadline = time.monotonic() + spec.timeout_seconds + HOST_GRACE_SECONDS
        player = None
        if spec.candidate_program is not None and tasks:
            candidate = root / "candidates" / "0"
            player = Player(sandbox, spec.candidate_program, candidate, spec.image, deadline)
        reading, result = _session(process, player, deadline)
    notes = player.notes if player is not None else []
    return _outcome(spec, reading, result, notes, time.monotonic() - started)


def _session(
    process: SandboxProcess, player: Player | None, deadline: float
) -> tuple[_Reading, SandboxResult]:
    """Drive the channel; both sandboxes are killed (when needed) and finished on every path."""
    reading = _Reading(problem="the host stopped reading (an error of ours)")
    try:
        if player is None:
            _close(process.stdin)  # nothing will ever be written: the program reads EOF
        reading = _Channel(process, player, deadline).run()
    finally:
        try:
            if player is not None:
                player.close()
        finally:
            if reading.problem or reading.timed_out:
                process.kill()
            # Without a kill this waits for the exit, up to the program's wall clock.
            result = process.finish()
    return reading, result


def _close(stream: Any) -> None:
    with contextlib.suppress(OSError):
        stream.close()


def _problem(spec: ProgramSpec, reading: _Reading, result: SandboxResult) -> str:
    """What ended the call badly, the channel first (a broken channel got the program
    killed, so its exit says nothing), then the limits and the clock, then the exit."""
    limits = program_limits(spec)
    if reading.problem:
        return reading.problem
    if result.memory_exceeded:
        return f"the program went over its memory limit of {limits.memory_bytes // MiB} MiB"
    if result.process_limit:
        return f"the program reached the limit of {limits.pids} processes"
    if result.output_exceeded:
        return f"the program wrote more than {limits.output_bytes} bytes to stderr"
    # After the limits: a fork bomb or a hog is usually also stopped by the clock.
    if reading.timed_out or result.timed_out:
        return f"the program timed out after {spec.timeout_seconds:g} s"
    if result.exit_code is None:
        return "the program was killed before it exited"
    if result.exit_code != 0:
        return f"the program exited with status {result.exit_code}"
    if reading.final is None:
        return "the program ended without a final message"
    return ""


def _outcome(
    spec: ProgramSpec,
    reading: _Reading,
    result: SandboxResult,
    candidate_notes: list[str],
    elapsed: float,
) -> ProgramOutcome:
    problem = _problem(spec, reading, result)
    metrics: dict[str, dict[str, float | None]] = {}
    passed = None
    if not problem and reading.final is not None:
        report = validated_final(reading.final, spec.metrics)
        metrics, passed, problem = report.metrics, report.passed, report.problem
    log = cap_text(storable_text(result.stderr.decode("utf-8", errors="replace")), LOG_CHARS)
    return ProgramOutcome(
        status=ERROR if problem else OK,
        reason=EVALUATION_ERROR if problem else None,
        problem=problem,
        metrics={} if problem else metrics,
        passed=None if problem else passed,
        log=log,
        duration_seconds=elapsed,
        backend=result.backend,
        image=result.image,
        candidate_notes=list(candidate_notes),
        notes=list(result.notes),
    )


def _refused(problem: str, started: float) -> ProgramOutcome:
    return ProgramOutcome(
        status=ERROR,
        reason=EVALUATION_ERROR,
        problem=problem,
        metrics={},
        passed=None,
        log="",
        duration_seconds=time.monotonic() - started,
        backend=None,
        image=None,
    )
