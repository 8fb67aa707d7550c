"""Docker sandbox lifecycle: teardown right after the command, and the stale-container janitor.

Docker only (bubblewrap has no containers). Skipped with its printed reason when no engine
answers, or a failure when SECUREBENCH_REQUIRE names docker (tests/components.py). Every test
labels its containers with its own id, so other runs on the machine are never touched.
"""

from __future__ import annotations

import contextlib
import os
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from tests.security.sandbox_backends import SMALL as ESCAPE_LIMITS
from tests.security.sandbox_backends import (
    TEST_LABEL,
    local_docker_client,
    settle_containers,
)
from tests.security.sandbox_probes import processes_with_token, survivors, wait_for
from verifiers.sandbox import SandboxSpec

# The escape suites' small limits, with room for a container's start and teardown.
SMALL = replace(ESCAPE_LIMITS, wall_seconds=10.0)

# Leaves a detached process (own session, no inherited streams) and exits at once.
DAEMON = textwrap.dedent(
    """
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            fd = os.open("/dev/null", os.O_RDWR)
            for n in (0, 1, 2):
                os.dup2(fd, n)
            time.sleep(300)
        os._exit(0)
    os.wait()
    print("parent done")
    """
)


@dataclass
class Engine:
    client: Any
    run_id: str

    @property
    def labels(self) -> dict[str, str]:
        return {TEST_LABEL: self.run_id}

    def ours(self) -> list[Any]:
        """Every container of this test, running or not (idle pooled ones are not)."""
        settle_containers()
        return self.client.containers.list(
            all=True, filters={"label": f"{TEST_LABEL}={self.run_id}"}, ignore_removed=True
        )


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    found = Engine(local_docker_client(monkeypatch), f"docker-lifecycle-{uuid.uuid4().hex}")
    yield found
    left = found.ours()
    for container in left:  # leave the machine clean even when failing
        with contextlib.suppress(Exception):
            container.remove(force=True)
    assert not left, f"containers of this test were left behind: {[c.name for c in left]}"


def python(code: str, *args: str) -> list[str]:
    return ["python3", "-I", "-c", code, *args]


def daemon_token() -> str:
    """Put on the daemon's command line (it forks without exec, so it keeps it): the host sees
    a container's processes, so the token finds a survivor whoever runs the test."""
    return f"sb-lifecycle-{uuid.uuid4().hex}"


def sandbox(engine: Engine) -> Any:
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415

    return DockerSandbox(engine.client, labels=engine.labels)


# --- teardown --------------------------------------------------------------------------------


def test_a_detached_process_is_gone_when_run_returns(engine: Engine) -> None:
    token = daemon_token()
    result = sandbox(engine).run(SandboxSpec(command=python(DAEMON, token), limits=SMALL))
    assert result.exit_code == 0, result
    assert result.stdout == b"parent done\n"
    assert survivors(token) == {}  # no process of the run lives on anywhere on the host
    assert engine.ours() == []  # and the container is gone


def test_a_detached_process_is_gone_when_an_interactive_finish_returns(engine: Engine) -> None:
    token = daemon_token()
    process = sandbox(engine).start(SandboxSpec(command=python(DAEMON, token), limits=SMALL))
    assert process.stdout.read() == b"parent done\n"
    process.stdin.close()
    result = process.finish()
    assert result.exit_code == 0, result
    assert survivors(token) == {}
    assert engine.ours() == []


def test_the_survivor_check_sees_a_containers_processes_while_they_live(engine: Engine) -> None:
    # Without this, survivors() == {} above could pass by seeing nothing at all.
    token = daemon_token()
    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    process = sandbox(engine).start(SandboxSpec(command=python(code, token), limits=SMALL))
    try:
        assert process.stdout.readline() == b"ready\n"
        assert processes_with_token(token) != []
    finally:
        process.stdin.close()
        result = process.finish()
    assert result.exit_code == 0, result
    assert survivors(token) == {}


def test_a_command_that_kills_its_wrapper_shell_still_leaves_nothing(engine: Engine) -> None:
    # The run's own uid may kill the trusted `sh` that runs `kill -9 -1` after the command;
    # the container removal before finish() returns must still take the daemon with it.
    code = DAEMON + "import signal; os.kill(os.getppid(), signal.SIGKILL)\n"
    token = daemon_token()
    result = sandbox(engine).run(SandboxSpec(command=python(code, token), limits=SMALL))
    assert not result.timed_out, result
    assert survivors(token) == {}
    assert engine.ours() == []


def test_a_run_finished_long_before_a_late_finish_is_not_a_timeout(engine: Engine) -> None:
    # The teardown starts when the command ends; the wall-limit watchdog must not count it,
    # nor a finish() called after the wall limit has passed.
    limits = SMALL.with_wall(1.0)
    started = time.monotonic()
    process = sandbox(engine).start(SandboxSpec(command=python("print('ok')"), limits=limits))
    assert process.stdout.read() == b"ok\n"
    process.stdin.close()
    # Waiting only: until the early teardown removed the container and the wall has passed.
    assert wait_for(lambda: engine.ours() == [])
    assert wait_for(lambda: time.monotonic() > started + limits.wall_seconds)
    result = process.finish()
    assert (result.exit_code, result.timed_out) == (0, False), result
    assert engine.ours() == []


def test_collecting_runs_still_read_files_after_the_command(engine: Engine) -> None:
    spec = SandboxSpec(
        command=["sh", "-c", "echo made > out.txt"], collect=("out.txt",), limits=SMALL
    )
    result = sandbox(engine).run(spec)
    assert result.exit_code == 0, result
    assert result.collected == {"out.txt": b"made\n"}
    assert engine.ours() == []


# --- janitor ---------------------------------------------------------------------------------


def _keeper(engine: Engine, labels: dict[str, str]) -> Any:
    image = os.environ["SECUREBENCH_DEFAULT_IMAGE"]
    return engine.client.containers.create(
        image, entrypoint=["sleep", "infinity"], network_mode="none", labels=labels
    )


def test_the_janitor_removes_only_our_containers_older_than_the_limit(engine: Engine) -> None:
    from verifiers.sandbox.docker import LABEL, remove_stale_containers  # noqa: PLC0415

    ours = _keeper(engine, {**engine.labels, LABEL: "1"})
    ours.start()
    foreign = _keeper(engine, engine.labels)  # not a sandbox container: never touched
    try:
        # Fresh: younger than the limit, kept.
        assert remove_stale_containers(engine.client, 3600, labels=engine.labels) == []
        # An hour later it is an orphan of a dead worker: removed, running or not.
        later = time.time() + 7200
        removed = remove_stale_containers(engine.client, 3600, labels=engine.labels, now=later)
        assert removed == [ours.id]
        assert [c.id for c in engine.ours()] == [foreign.id]
    finally:
        foreign.remove(force=True)


@pytest.mark.django_db(transaction=True)
def test_the_workers_beat_removes_sandboxes_of_a_dead_worker(docker_run: Any, workers: Any) -> None:
    """A worker SIGKILLed mid-verification leaves its containers running; the janitor on a
    second worker's beat removes them once they are older than any live run can be, and the
    reaper hands the result to that worker, which finishes it."""
    from tests.runs.dead_worker import dead_worker_scenario  # noqa: PLC0415

    outcome = dead_worker_scenario(workers, docker_run)
    assert outcome.orphans, "the killed worker left no container: nothing was proved"
    assert outcome.status_at_kill == "running", outcome
    assert outcome.removed_by_janitor, (outcome.orphans, outcome.janitor_log)
    assert (outcome.status, outcome.attempts) == ("passed", 2), outcome
    assert outcome.left_after_shutdown == [], outcome
