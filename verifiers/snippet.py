"""Run an agent's own Python snippet in a sandbox that holds nothing but that snippet.

Episodes of ``code_completion`` tasks give the agent a ``run_python {code, stdin?}`` tool. Its
code is not a candidate and decides no verdict: it is run only so the agent can see what it
prints. So the sandbox holds the snippet and nothing else — no task files, tests or pack data
(the image is always the site's default one, never a pack's, which could bake tests in), no
variable of the worker's environment — under limits short enough for the caller's 10 s
budget.

The snippet is written to a fresh host folder mounted read-only, the only extra mount; it runs
as the backend's unprivileged sandbox user with a cleared environment, no network, a
read-only root, and fresh size-capped tmpfs folders for its cwd and ``/tmp`` that are gone
when the run ends. Output is capped by the sandbox and again here.
"""

from __future__ import annotations

import re
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from verifiers.sandbox.base import Limits, MiB, Mount, Sandbox, SandboxResult, SandboxSpec

SNIPPET_LIMITS = Limits(
    wall_seconds=5.0,
    # Above the wall limit: the wall watchdog ends a busy loop first, always the same way (a
    # CPU limit equal to it races the watchdog and kills with SIGKILL or SIGXCPU instead).
    cpu_seconds=7,
    memory_bytes=256 * MiB,
    pids=16,
    file_size_bytes=8 * MiB,
    tmp_bytes=16 * MiB,
    work_bytes=16 * MiB,
    open_files=64,
    # glibc reserves RLIMIT_STACK for every thread against RLIMIT_AS (bwrap): the code
    # profile's 64 MiB would let four threads eat the whole memory limit.
    stack_bytes=8 * MiB,
    output_bytes=16 * 1024,  # per stream, head and tail kept
)
MAX_CODE_BYTES = 64 * 1024
MAX_STDIN_BYTES = 64 * 1024
# Kept per stream here whatever the sandbox returned (the sandbox adds its own marker).
OUTPUT_CAP_BYTES = SNIPPET_LIMITS.output_bytes

SNIPPET_DIR = "/opt/securebench/snippet"  # the read-only mount, outside the writable cwd
SNIPPET_FILE = "main.py"
WORKDIR = "/work"
# -I: no PYTHON* variables, no user site, no script folder on sys.path; -B: no bytecode next to
# the snippet; -u: output printed before a kill at the wall limit still reaches the agent;
# -X utf8: UTF-8 stdio whatever locale the image has.
COMMAND = ["python3", "-I", "-B", "-u", "-X", "utf8", f"{SNIPPET_DIR}/{SNIPPET_FILE}"]
# Fixed, never derived from the worker's os.environ (the backends also start from a cleared one).
SNIPPET_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": WORKDIR}

# What a snippet stopped by the process limit prints: fork() or a new thread refused (EAGAIN).
_PROCESS_LIMIT = re.compile(
    rb"BlockingIOError: \[Errno 11\]|Resource temporarily unavailable|can't start new thread"
)
# The bwrap backend's note when its watchdog (not root: no RLIMIT_NPROC) killed for process count.
_PIDS_WATCHDOG_NOTE = "process count above limits.pids"
# RLIMIT_CPU ends a process with SIGXCPU; both backends report it as a shell would.
_SIGKILL_EXITS = (137, -9)
_CPU_LIMIT_EXIT = 128 + signal.SIGXCPU


class SnippetRejected(ValueError):
    """The snippet or its stdin cannot be run as given; the message says why."""


@dataclass(frozen=True)
class SnippetOutcome:
    stdout: str
    stderr: str
    exit_code: int | None  # None when the sandbox killed it
    limit: str | None  # "timeout" | "memory" | "output" | "processes" | None
    duration_seconds: float
    backend: str


def run_snippet(sandbox: Sandbox, code: str, stdin: str = "") -> SnippetOutcome:
    """Run ``code`` with ``stdin`` on ``sandbox``; SandboxUnavailable propagates."""
    started = time.monotonic()
    code_bytes = _checked_bytes("code", code, MAX_CODE_BYTES)
    if not code.strip():
        raise SnippetRejected("code is empty")
    if "\x00" in code:
        raise SnippetRejected("code contains NUL bytes")
    # NUL is ordinary data on a pipe: stdin may hold it.
    stdin_bytes = _checked_bytes("stdin", stdin, MAX_STDIN_BYTES)
    with tempfile.TemporaryDirectory(prefix="securebench-snippet-") as folder:
        source = Path(folder)
        _write_snippet(source, code_bytes)
        result = sandbox.run(_spec(source, stdin_bytes))
    return SnippetOutcome(
        stdout=capped_text(result.stdout),
        stderr=capped_text(result.stderr),
        exit_code=result.exit_code,
        limit=_limit(result),
        duration_seconds=time.monotonic() - started,
        backend=result.backend,
    )


def _checked_bytes(name: str, value: object, cap: int) -> bytes:
    if not isinstance(value, str):
        raise SnippetRejected(f"{name} must be a string, not {type(value).__name__}")
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates, e.g. "\ud800" in JSON
        raise SnippetRejected(f"{name} is not valid Unicode text: {exc.reason}") from exc
    if len(data) > cap:
        raise SnippetRejected(f"{name} is {len(data)} bytes; at most {cap} bytes are accepted")
    return data


def _write_snippet(folder: Path, code: bytes) -> None:
    # Readable by the sandbox user (a bwrap slot uid, Docker's nobody); the folder holds
    # nothing else, and the mount is read-only.
    path = folder / SNIPPET_FILE
    path.write_bytes(code)
    path.chmod(0o644)
    folder.chmod(0o755)


def _spec(folder: Path, stdin: bytes) -> SandboxSpec:
    return SandboxSpec(
        command=list(COMMAND),
        image=None,  # the Docker backend then runs the site's default image
        workdir=WORKDIR,
        mounts=(Mount(folder, SNIPPET_DIR, read_only=True),),
        env=dict(SNIPPET_ENV),
        limits=SNIPPET_LIMITS,
        stdin=stdin,
    )


def _limit(result: SandboxResult) -> str | None:
    """Which limit ended the run, most specific first."""
    if result.memory_exceeded:
        return "memory"
    # Output past the cap that did not end the run is only cut (the marker in it says so).
    if result.output_exceeded:
        return "output"
    if result.timed_out or result.exit_code == _CPU_LIMIT_EXIT:
        return "timeout"
    if result.process_limit or any(_PIDS_WATCHDOG_NOTE in note for note in result.notes):
        return "processes"
    if result.exit_code not in (None, 0) and _PROCESS_LIMIT.search(result.stderr[-4096:]):
        return "processes"
    # RLIMIT_CPU's soft and hard limits are equal: the kernel may send SIGKILL instead of
    # SIGXCPU. Memory and processes were ruled out above; the snippet ran out of time.
    if result.exit_code in _SIGKILL_EXITS:
        return "timeout"
    return None


def capped_text(data: bytes, cap: int = OUTPUT_CAP_BYTES) -> str:
    """UTF-8 text (invalid bytes replaced) of at most ``cap`` bytes of ``data``: past it, the
    head and the tail around an explicit marker, each cut on a character boundary."""
    if len(data) <= cap:
        return data.decode("utf-8", errors="replace")
    head_end = cap // 2
    while head_end > 0 and _continuation(data[head_end]):
        head_end -= 1
    tail_start = len(data) - (cap - cap // 2)
    while tail_start < len(data) and _continuation(data[tail_start]):
        tail_start += 1
    marker = f"\n[… output truncated at {cap} bytes: only its start and end are kept]\n"
    head = data[:head_end].decode("utf-8", errors="replace")
    return head + marker + data[tail_start:].decode("utf-8", errors="replace")


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80  # 10xxxxxx: inside a multi-byte UTF-8 character


__all__ = [
    "MAX_CODE_BYTES",
    "MAX_STDIN_BYTES",
    "OUTPUT_CAP_BYTES",
    "SNIPPET_LIMITS",
    "SnippetOutcome",
    "SnippetRejected",
    "capped_text",
    "run_snippet",
]
