"""Sandbox defences the escape and mount suites did not tell apart (found by ``make mutation``).

- Docker's tmpfs mounts cap their inodes: a candidate creating empty files stops at the cap
  instead of filling kernel memory with millions of inodes that no byte cap counts.
- Docker's collection kills every process of the sandbox uid first, even when the command
  killed the trusted shell that runs ``kill -9 -1`` after it: a daemon left writing to a
  collected file never survives into the collection.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests.security.sandbox_backends import SMALL, backend_for, on_gvisor
from tests.security.sandbox_probes import survivors
from verifiers.sandbox import MiB, Sandbox, SandboxSpec

# 4 MiB of /tmp: the Docker backend allows max(4096, size // 2048) inodes for it.
INODE_LIMITS = replace(SMALL, tmp_bytes=4 * MiB, wall_seconds=60.0)
INODE_CAP = 4096
# Far past the cap, so an uncapped tmpfs shows, and still quick to create.
CREATE_CEILING = 4 * INODE_CAP
# Under gVisor: a small memory cap, and a ceiling no sandbox within it could reach (about 4 s
# to the cap here).
GVISOR_MEMORY = 64 * MiB
GVISOR_CEILING = 50_000_000


@pytest.fixture
def docker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    yield from backend_for("docker", monkeypatch, module=__name__)


def python(code: str, *args: str) -> list[str]:
    return ["python3", "-I", "-c", textwrap.dedent(code), *args]


EMPTY_FILES = """
import errno, json, os, sys
made, error = 0, None
for n in range(int(sys.argv[1])):
    try:
        os.close(os.open(f"/tmp/e{n}", os.O_WRONLY | os.O_CREAT))
    except OSError as exc:
        error = errno.errorcode.get(exc.errno, str(exc.errno))
        break
    made += 1
print(json.dumps({"made": made, "error": error}))
"""


def test_empty_files_stop_at_the_tmpfs_inode_cap_on_docker(docker: Sandbox) -> None:
    if on_gvisor(docker):
        # gVisor's tmpfs keeps no inode count, but its inodes are memory of its own kernel,
        # a process of the container's memory cgroup: the flood ends at the memory cap.
        limits = replace(INODE_LIMITS, memory_bytes=GVISOR_MEMORY)
        flood = SandboxSpec(command=python(EMPTY_FILES, str(GVISOR_CEILING)), limits=limits)
        result = docker.run(flood)
        assert result.memory_exceeded, result
        assert b"made" not in result.stdout  # never near the ceiling
        return
    spec = SandboxSpec(command=python(EMPTY_FILES, str(CREATE_CEILING)), limits=INODE_LIMITS)
    result = docker.run(spec)

    assert result.exit_code == 0, result
    outcome = json.loads(result.stdout)
    # The folder itself takes one inode of the cap.
    assert outcome == {"made": INODE_CAP - 1, "error": "ENOSPC"}


# Kills the trusted shell that would `kill -9 -1` after it, leaving a detached daemon that
# keeps rewriting the file to collect; the token finds the daemon on the host.
DAEMON_KILLS_ITS_SHELL = """
import os, signal, sys, time
with open("out.txt", "w") as fh:
    fh.write("by the command")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open("/dev/null", os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(fd, n)
        while True:
            with open("out.txt", "w") as fh:
                fh.write("by the daemon")
            time.sleep(0.01)
    os._exit(0)
os.wait()
time.sleep(0.2)  # the daemon has written at least once
os.kill(os.getppid(), signal.SIGKILL)
"""


def test_collection_kills_a_daemon_even_when_the_command_killed_its_shell(
    docker: Sandbox,
) -> None:
    token = f"sb-defences-{uuid.uuid4().hex}"
    spec = SandboxSpec(
        command=python(DAEMON_KILLS_ITS_SHELL, token), collect=("out.txt",), limits=SMALL
    )
    result = docker.run(spec)

    # Collected (not skipped because processes were still alive), after the daemon was gone.
    assert set(result.collected) == {"out.txt"}, result
    assert not any("collection skipped" in note for note in result.notes), result.notes
    assert survivors(token) == {}
