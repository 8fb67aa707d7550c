"""The one sandbox interface every backend implements (DESIGN.md §5, security.md §7).

A verifier describes what to run (``SandboxSpec``); a backend runs it isolated and returns a
``SandboxResult``. Nothing that runs inside decides a verdict: verifiers read only the exit
status, capped output and files collected after every sandbox process is dead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    """Per-verification limits; defaults are the "code" profile of security.md §7."""

    wall_seconds: float = 60.0
    cpu_seconds: int = 30
    memory_bytes: int = 512 * MiB
    pids: int = 64
    file_size_bytes: int = 16 * MiB
    tmp_bytes: int = 64 * MiB
    work_bytes: int = 64 * MiB
    open_files: int = 256
    stack_bytes: int = 64 * MiB
    output_bytes: int = 1 * MiB  # kept per stream (head + tail); far past it → output_limit

    def with_wall(self, seconds: float | None) -> Limits:
        """The same limits with another wall clock (a task's own timeout)."""
        return self if seconds is None else replace(self, wall_seconds=float(seconds))


CODE_LIMITS = Limits()
REPO_LIMITS = Limits(
    wall_seconds=900.0,
    cpu_seconds=1200,
    memory_bytes=4 * GiB,
    pids=512,
    file_size_bytes=1 * GiB,
    tmp_bytes=512 * MiB,
    work_bytes=2 * GiB,
    open_files=1024,
    output_bytes=4 * MiB,
)


@dataclass(frozen=True)
class Mount:
    """A trusted host file or folder made visible inside the sandbox."""

    source: Path
    # Absolute path inside the sandbox; read-only mounts may lie inside the work dir (a live
    # workspace's read-only assets), writable ones outside it.
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class SandboxSpec:
    command: list[str]  # an argument list, never a shell string
    image: str | None = None  # the pack's environment.image (docker); bwrap records it unused
    workdir: str = "/work"  # cwd: a fresh, size-capped, writable folder
    # Host folder whose regular files and folders are copied into workdir before start
    # (copy, never a writable bind of a host folder).
    work_files: Path | None = None
    mounts: tuple[Mount, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # added to a cleared environment
    limits: Limits = CODE_LIMITS
    capabilities: tuple[str, ...] = ()  # e.g. ("SYS_CHROOT",); only when site policy allows
    # Paths relative to workdir to copy out after every process has exited: regular files
    # only, read without following symlinks, each capped at limits.output_bytes.
    collect: tuple[str, ...] = ()
    stdin: bytes = b""  # for run(); start() gives a pipe instead


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int | None  # None when killed before it exited
    stdout: bytes  # capped per limits.output_bytes
    stderr: bytes
    duration_seconds: float
    backend: str  # "bwrap" | "docker"
    image: str | None  # the image that actually ran (docker), None for bwrap
    timed_out: bool = False
    memory_exceeded: bool = False
    output_exceeded: bool = False
    # The run was refused a new process at limits.pids (a fork bomb) and killed for it.
    process_limit: bool = False
    collected: dict[str, bytes] = field(default_factory=dict)
    # Collected paths refused because they were not regular files (symlinks, fifos, ...).
    refused: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # e.g. "pack image python:3.11-slim not used (bwrap)"


class SandboxProcess(ABC):
    """A started sandbox with pipes to its main process (for request/response protocols)."""

    stdin: BinaryIO
    stdout: BinaryIO

    @abstractmethod
    def finish(self, timeout: float | None = None) -> SandboxResult:
        """Wait for exit (killing everything at the wall limit), clean up, report."""

    @abstractmethod
    def kill(self) -> None:
        """Kill every process of the sandbox now; finish() still reports and cleans up."""


class Sandbox(ABC):
    name: str

    @abstractmethod
    def run(self, spec: SandboxSpec) -> SandboxResult:
        """Run to completion (or the wall limit) with spec.stdin as input."""

    @abstractmethod
    def start(self, spec: SandboxSpec) -> SandboxProcess:
        """Start and return pipes; stderr is captured (capped) and returned by finish()."""


class SandboxUnavailable(Exception):
    """No usable backend (e.g. bwrap not installed, Docker engine unreachable): our fault."""
