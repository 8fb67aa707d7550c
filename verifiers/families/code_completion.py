"""code_completion: write code that hidden tests call (spec §3.4, §4.4).

The tests go to the verifier sandbox (evaluation_inputs); solutions stay hidden.

``verify`` runs the candidate and the tests in two separate sandboxes joined by a host relay
(code_worker.py, code_harness.py, code_relay.py, code_codec.py). Verdict mapping, first
match wins:

    task language not python / tests not inline        → error  task_misconfigured
    empty, NUL-containing or > 1 MiB candidate          → failed invalid_candidate
    no backend / a sandbox cannot start                 → error  sandbox_unavailable
    memory limit (either sandbox, or W reported MemoryError) → failed memory_limit
    a fork refused at the process limit (either sandbox)  → failed process_limit
    output limit (either sandbox) or a W frame > 1 MiB  → failed output_limit
    wall limit (either sandbox, or the host deadline)   → failed timeout
    W wrote a frame that answers no request             → failed tamper_detected
    T sent no result frame / broke the protocol         → error  infrastructure
    tests define check() nobody calls, no entry point   → error  task_misconfigured
    T's result: passed, and T exited 0                  → passed
    candidate could not be imported or served (syntax error, exception or exit at import,
      W died before listing its names)                  → failed invalid_candidate
    any other failed test run                           → failed tests_failed
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import contextvars
import keyword
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.families.base import (
    FamilySpec,
    Field,
    equals,
    non_empty_string,
    strict_object,
    string,
)
from verifiers.families.code_relay import MAX_FRAME, RelayOutcome, relay
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN
from verifiers.redaction import output_secrets
from verifiers.sandbox import get_sandbox
from verifiers.sandbox.base import (
    CODE_LIMITS,
    Mount,
    Sandbox,
    SandboxProcess,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.sandbox.trusted_files import staged
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import (
    ERROR,
    FAILED,
    MIN_SCRUB_LENGTH,
    PASSED,
    Reason,
    Verdict,
    cap_text,
    error,
    failed,
    scrub,
    secret_strings,
)

# The only test form any verifier generation runs; checking it here catches packs that
# would otherwise fail every verification.
INLINE_TESTS = strict_object(
    {
        "source": Field(equals("inline"), required=True),
        "code": Field(non_empty_string, required=True),
    }
)

SPEC = FamilySpec(
    name="code_completion",
    active=True,
    candidate_kind="code",
    eval_lanes={
        "tests": EVALUATION_INPUTS,
        "reference_solution": HIDDEN,
        "canonical_solution": HIDDEN,
    },
    input_fields={
        "prompt": Field(non_empty_string, required=True),
        "language": Field(non_empty_string),
        "starter_code": Field(string),
    },
    eval_fields={
        "tests": Field(INLINE_TESTS, required=True),
        "reference_solution": Field(string),
        "canonical_solution": Field(string),
    },
)


# --- verification ---------------------------------------------------------------------------
#
# Two sandboxes per verification, joined only through this (trusted) process:
#   W runs code_worker.py, which imports the candidate and answers call/get requests;
#   T runs code_harness.py with the tests mounted read-only; it never runs candidate code.
# The verdict comes only from T's final frame on T's own stdout plus T's exit status, a
# channel no candidate code can write (security.md §0.1, §8.1-2; A05-A08, A13).

SCRIPTS = Path(__file__).resolve().parent
LIB_DIR = "/opt/securebench/lib"  # read-only script mounts, outside the writable workdir
# Copied into T's own work dir only (not mounted: a mount per verification would make every
# T container's configuration new, and the Docker backend's pool could never serve one).
TESTS_PATH = "/work/tests.py"
CANDIDATE_FILE = "candidate.py"
MAX_CANDIDATE_BYTES = 1024 * 1024
OUTPUT_KEPT = 64 * 1024  # characters of candidate / harness output kept in the verdict
# T outlives W a little, so that when W is killed at its wall limit T can still report.
TESTS_GRACE_SECONDS = 5.0
HOST_GRACE_SECONDS = 2.0
WORKER_EXIT_SECONDS = 1.0  # a worker told to stop (end of input) must be gone by then


def reference_candidate(task: TaskLanes) -> str:
    """The oracle candidate: HumanEval solutions are a function body to append to the prompt."""
    solution = task.hidden.get("canonical_solution") or task.hidden.get("reference_solution")
    if not isinstance(solution, str):
        return ""
    first = next((line for line in solution.splitlines() if line.strip()), "")
    if first[:1] in (" ", "\t"):
        prompt = task.public.get("prompt")
        return f"{prompt if isinstance(prompt, str) else ''}{solution}"
    return solution


def _task_problem(task: TaskLanes) -> str | None:
    language = task.public.get("language", "python")
    if not isinstance(language, str) or language.strip().lower() != "python":
        return "code_completion only supports Python tasks"
    tests = task.evaluation_inputs.get("tests")
    if not isinstance(tests, dict) or tests.get("source") != "inline":
        return "tests must be {source: inline, code: ...}"
    code = tests.get("code")
    if not isinstance(code, str) or not code.strip():
        return "tests.code must be a non-empty string"
    return None


def _entry_point(task: TaskLanes) -> str | None:
    name = task.metadata.get("entry_point")
    if isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name):
        return name
    return None


def _wall_seconds(task: TaskLanes) -> float:
    """The task's own timeout, never above the code profile's wall limit."""
    wanted = task.environment.get("timeout_seconds")
    ceiling = CODE_LIMITS.wall_seconds
    if isinstance(wanted, int | float) and not isinstance(wanted, bool) and wanted > 0:
        return min(float(wanted), ceiling)
    return ceiling


def scrub_secrets(task: TaskLanes) -> list[str]:
    """Strings that must not appear in stored output: lane values, plus every literal and
    line of the test source (so a leaked assertion or echoed input is not shown verbatim)."""
    # Lane values not also public (verifiers.redaction), short evaluation inputs included.
    secrets = set(output_secrets(task, min_input_length=MIN_SCRUB_LENGTH))
    code = task.evaluation_inputs.get("tests", {}).get("code", "")
    if isinstance(code, str):
        secrets.update(line.strip() for line in code.splitlines() if len(line.strip()) >= 8)
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            tree = None
        literals = [
            node.value
            for node in (ast.walk(tree) if tree is not None else ())
            if isinstance(node, ast.Constant)
        ]
        secrets.update(secret_strings(literals))
    return sorted(secrets, key=len, reverse=True)


def script_mounts() -> tuple[Mount, Mount, Mount]:
    """The codec, worker and harness scripts, from staged copies the sandbox uid can read
    wherever the checkout lives."""
    return (
        Mount(staged(SCRIPTS / "code_codec.py"), f"{LIB_DIR}/code_codec.py"),
        Mount(staged(SCRIPTS / "code_worker.py"), f"{LIB_DIR}/code_worker.py"),
        Mount(staged(SCRIPTS / "code_harness.py"), f"{LIB_DIR}/code_harness.py"),
    )


def _specs(task: TaskLanes, root: Path, wall: float) -> tuple[SandboxSpec, SandboxSpec]:
    image = task.environment.get("image")
    image = image if isinstance(image, str) and image.strip() else None
    codec, worker_script, harness_script = script_mounts()
    # -I: no PYTHON* variables, no user site, no script folder on sys.path (A11).
    # -S on T only: T needs nothing beyond the stdlib, so no .pth file of the image can run
    # there. W keeps site so candidates may use packages the pack's image provides.
    # -B: nothing writes bytecode next to the candidate or onto the read-only mounts.
    worker = SandboxSpec(
        command=["python3", "-I", "-B", f"{LIB_DIR}/code_worker.py", f"/work/{CANDIDATE_FILE}"],
        image=image,
        work_files=root / "work",
        mounts=(codec, worker_script),
        limits=CODE_LIMITS.with_wall(wall),
    )
    harness_command = ["python3", "-I", "-S", "-B", f"{LIB_DIR}/code_harness.py"]
    harness_command += ["--tests", TESTS_PATH]
    entry_point = _entry_point(task)
    if entry_point is not None:
        harness_command += ["--entry-point", entry_point]
    tests = SandboxSpec(
        command=harness_command,
        image=image,
        work_files=root / "tests",
        mounts=(codec, harness_script),
        limits=CODE_LIMITS.with_wall(wall + TESTS_GRACE_SECONDS),
    )
    return worker, tests


def _write_inputs(root: Path, candidate_code: str, test_code: str) -> None:
    # World-readable: the sandbox user (Docker runs as nobody) must read them; nothing
    # secret from other tasks lives in this private temp folder.
    for folder, name, text in (
        ("work", CANDIDATE_FILE, candidate_code),
        ("tests", "tests.py", test_code),
    ):
        (root / folder).mkdir(mode=0o755)
        path = root / folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)
    root.chmod(0o755)


def _text(data: bytes, secrets: list[str]) -> str:
    return cap_text(scrub(data.decode("utf-8", errors="replace"), secrets), OUTPUT_KEPT)


def _candidate_problem(candidate: Candidate) -> str | None:
    if candidate.kind not in ("code", "text"):
        return f"expected code, got a {candidate.kind} candidate"
    if not candidate.text.strip():
        return "empty candidate"
    if "\x00" in candidate.text:
        return "candidate contains NUL bytes"
    if len(candidate.text.encode("utf-8", errors="surrogatepass")) > MAX_CANDIDATE_BYTES:
        return f"candidate is larger than {MAX_CANDIDATE_BYTES} bytes"
    return None


def verify(task: TaskLanes, candidate: Candidate, *, sandbox: Sandbox | None = None) -> Verdict:
    started = time.monotonic()
    problem = _task_problem(task)
    if problem is not None:
        return error(Reason.TASK_MISCONFIGURED, details={"problem": problem})
    problem = _candidate_problem(candidate)
    if problem is not None:
        return failed(Reason.INVALID_CANDIDATE, details={"problem": problem})
    if sandbox is None:
        try:
            sandbox = get_sandbox()
        except (ImportError, SandboxUnavailable) as exc:
            return error(Reason.SANDBOX_UNAVAILABLE, details={"problem": str(exc)[:500]})

    wall = _wall_seconds(task)
    with tempfile.TemporaryDirectory(prefix="securebench-code-") as tmp:
        root = Path(tmp)
        _write_inputs(root, candidate.text, task.evaluation_inputs["tests"]["code"])
        worker_spec, tests_spec = _specs(task, root, wall)
        # Both start at once: container creation dominates a Docker verification. Each start
        # runs in a copy of this context, so that whoever watches a sandbox's wait for its
        # image (docker_engine.pull_observer) is told from those threads too.
        with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="code-start") as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, sandbox.start, spec)
                for spec in (worker_spec, tests_spec)
            ]
        processes, problems = [], []
        for future in futures:
            try:
                processes.append(future.result())
            except (SandboxUnavailable, OSError) as exc:
                problems.append((Reason.SANDBOX_UNAVAILABLE, str(exc)[:500]))
            except Exception as exc:  # noqa: BLE001 - a backend bug: ours, and reported
                problems.append((Reason.INFRASTRUCTURE, f"{type(exc).__name__}: {exc}"[:500]))
        if problems:
            for process in processes:  # the one that did start must not linger
                process.kill()
                with contextlib.suppress(Exception):
                    process.finish()
            return error(problems[0][0], details={"problem": problems[0][1]})
        worker, tests = processes
        try:
            run = _run_session(tests, worker, started + wall + HOST_GRACE_SECONDS)
        except SandboxUnavailable as exc:  # e.g. the backend could not tear a sandbox down
            return error(Reason.SANDBOX_UNAVAILABLE, details={"problem": str(exc)[:500]})
    return _verdict(task, run, wall, time.monotonic() - started)


@dataclass(frozen=True)
class _Session:
    outcome: RelayOutcome
    tests: SandboxResult
    worker: SandboxResult


def _run_session(tests: SandboxProcess, worker: SandboxProcess, deadline: float) -> _Session:
    try:
        outcome = relay(tests, worker, deadline)
    except BaseException:
        worker.kill()
        tests.kill()
        raise
    if outcome.result is None or outcome.worker_gone is not None:
        worker.kill()
    else:
        # A healthy worker exits on end-of-input; anything still running after the grace is
        # killed by finish(), and the backend kills every remaining process of W's sandbox
        # before reporting, so nothing of the candidate outlives the verdict (A08, A28).
        _close(worker.stdin)
    if outcome.result is None:
        tests.kill()
    tests_result = tests.finish(timeout=TESTS_GRACE_SECONDS)
    worker_result = worker.finish(timeout=WORKER_EXIT_SECONDS)
    return _Session(outcome, tests_result, worker_result)


def _close(stream: Any) -> None:
    with contextlib.suppress(OSError):
        stream.close()


def _failure_reason(session: _Session) -> tuple[str, str | None]:
    """(status, reason) from limits first, then from the trusted result frame."""
    outcome, tests, worker = session.outcome, session.tests, session.worker
    result = outcome.result or {}
    if (
        worker.memory_exceeded
        or tests.memory_exceeded
        or "MemoryError" in (outcome.worker_error_types)
    ):
        return FAILED, Reason.MEMORY_LIMIT
    if worker.process_limit or tests.process_limit:
        return FAILED, Reason.PROCESS_LIMIT
    if worker.output_exceeded or tests.output_exceeded or outcome.worker_oversize:
        return FAILED, Reason.OUTPUT_LIMIT
    if outcome.timed_out or worker.timed_out or tests.timed_out:
        return FAILED, Reason.TIMEOUT
    if outcome.tamper is not None:
        return FAILED, Reason.TAMPER_DETECTED
    if outcome.harness_problem is not None or outcome.result is None:
        return ERROR, Reason.INFRASTRUCTURE
    stage = result.get("stage")
    if stage == "setup":
        return ERROR, Reason.TASK_MISCONFIGURED
    if stage == "harness":
        return ERROR, Reason.INFRASTRUCTURE
    if result.get("passed") is True:
        # T said so on its own channel; it must also have exited cleanly.
        return (PASSED, None) if tests.exit_code == 0 else (ERROR, Reason.INFRASTRUCTURE)
    if stage == "import":
        return FAILED, Reason.INVALID_CANDIDATE
    return FAILED, Reason.TESTS_FAILED


def _verdict(task: TaskLanes, session: _Session, wall: float, elapsed: float) -> Verdict:
    outcome, tests, worker = session.outcome, session.tests, session.worker
    secrets = scrub_secrets(task)
    status, reason = _failure_reason(session)
    result = outcome.result or {}
    details: dict[str, Any] = {
        "stage": result.get("stage"),
        "entry_point": _entry_point(task),
        "exposed": result.get("exposed"),
        "calls": result.get("calls"),
        "assert_statements": result.get("assert_statements"),
        "worker_exit_code": worker.exit_code,
        "tests_exit_code": tests.exit_code,
        "durations": {
            "total": round(elapsed, 3),
            "worker": round(worker.duration_seconds, 3),
            "tests": round(tests.duration_seconds, 3),
        },
        "wall_seconds": wall,
    }
    if status != PASSED:
        if isinstance(result.get("error"), str):
            details["error"] = cap_text(scrub(result["error"], secrets), 2000)
        if isinstance(result.get("line"), int):
            details["failed_test_line"] = result["line"]
        for key in ("worker_gone", "tamper", "harness_problem"):
            if getattr(outcome, key):
                details[key] = getattr(outcome, key)
        if outcome.worker_error_types:
            details["candidate_exceptions"] = sorted(set(outcome.worker_error_types))[:20]
        if reason == Reason.TIMEOUT:
            details["timed_out"] = True
            details["timeout_seconds"] = wall
        if outcome.worker_oversize:
            details["frame_limit_bytes"] = MAX_FRAME
    notes = tuple(dict.fromkeys((*tests.notes, *worker.notes)))
    if notes:
        details["sandbox_notes"] = list(notes)
    return Verdict(
        status=status,
        score=1.0 if status == PASSED else 0.0,
        reason=reason,
        details=details,
        stdout=_text(worker.stderr + worker.stdout, secrets),
        stderr=_text(tests.stderr, secrets),
        duration_seconds=elapsed,
        sandbox_backend=tests.backend,
        sandbox_image=tests.image,
    )
