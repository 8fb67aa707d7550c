"""A SIGKILL is a memory kill only when the container's memory cgroup says so (security.md §7).

On a local engine the cgroup's ``oom_kill`` counter is found when the container starts and
read before it is removed; guessing "memory" from exit 137 is kept for a remote engine whose
cgroups cannot be read at all. These runs end with a SIGKILL that is not the kernel's memory
killer, so none of them may be reported as a memory kill (a candidate must not be scored
``memory_limit`` for an engine-side stop or its own kill).
"""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import BinaryIO

import pytest

from tests.security.sandbox_backends import SMALL, TEST_LABEL, docker_sandbox
from verifiers.sandbox import Sandbox, SandboxSpec

EXIT_SIGKILL = 128 + 9
# Generous: the container's start counts against the wall time, and a busy engine is slow.
ROOMY = replace(SMALL, wall_seconds=60.0)


@pytest.fixture
def docker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    yield from docker_sandbox(monkeypatch)


def python(code: str) -> list[str]:
    return ["python3", "-c", code]


def pending_bytes(stream: BinaryIO | socket.socket) -> int:
    """Bytes waiting in a pipe or a socket, unread."""
    return struct.unpack("i", fcntl.ioctl(stream.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_container_stopped_before_its_counter_is_read_is_not_a_memory_kill(
    docker: Sandbox,
) -> None:
    # The engine stops the container under the running command (an operator's `docker kill`,
    # a daemon under load tearing it down first): the command dies by SIGKILL and the cgroup
    # is gone by the time the run is read, which on a local engine is no sign of memory use.
    # Output the caller does not read holds the run open until the container has exited.
    # Enough to fill the pipe to the caller, little enough for the engine's buffers to take
    # all of it (more would block the command, and the engine's stop would wait for it).
    code = f"import sys; sys.stdout.write('x' * {256 << 10}); sys.stdout.flush(); input()"
    proc = docker.start(SandboxSpec(command=python(code), limits=ROOMY))
    assert proc.stdout is not None
    capacity = fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ)
    # The pipe to the caller is full and more output waits on the exec's socket: the thread
    # that reads the run is stuck until the caller reads, so it cannot see the run end.
    exec_socket = proc._cmd.sock  # type: ignore[attr-defined]  # noqa: SLF001
    wait_until(lambda: pending_bytes(proc.stdout) >= capacity and pending_bytes(exec_socket) > 0)
    run_id = docker.labels[TEST_LABEL]  # type: ignore[attr-defined]
    (container,) = docker.client.containers.list(  # type: ignore[attr-defined]
        filters={"label": f"{TEST_LABEL}={run_id}"}
    )
    container.kill()
    assert container.wait()["StatusCode"] == EXIT_SIGKILL  # the keeper: the container is gone
    # More than the pipe held: the run was still being read after the container exited.
    assert len(proc.stdout.read()) > capacity

    result = proc.finish()

    assert result.exit_code == EXIT_SIGKILL, result
    assert result.memory_exceeded is False, result


def test_many_candidates_killing_themselves_at_once_are_never_memory_kills(
    docker: Sandbox,
) -> None:
    # Seen once under load: a run that SIGKILLs itself was scored as a memory kill because the
    # counter was not read. Concurrent runs keep the engine busy with starts and removals.
    spec = SandboxSpec(command=python("import os; os.kill(os.getpid(), 9)"), limits=ROOMY)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: docker.run(spec), range(12)))

    wrong = [r for r in results if (r.exit_code, r.memory_exceeded) != (EXIT_SIGKILL, False)]
    assert not wrong, wrong
