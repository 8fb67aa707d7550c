"""Docker sandbox lifecycle: teardown right after the command, and the stale-container janitor.

Docker only (bubblewrap has no containers). Skipped with its printed reason when no engine
answers, except when SECUREBENCH_REQUIRE_DOCKER=1 (then it fails). Every test labels its
containers with its own id, so other runs on the machine are never touched.
"""

from __future__ import annotations

import contextlib
import os
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from verifiers.sandbox import Limits, SandboxSpec, SandboxUnavailable
from verifiers.sandbox.base import MiB

LOCAL_IMAGE = "securebench-local/python:3.11"
TEST_LABEL = "securebench.test-run"

SMALL = Limits(
    wall_seconds=10.0,
    cpu_seconds=10,
    memory_bytes=256 * MiB,
    pids=32,
    file_size_bytes=16 * MiB,
    tmp_bytes=8 * MiB,
    work_bytes=8 * MiB,
    open_files=64,
    output_bytes=64 * 1024,
)

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
        """Every container of this test, running or not."""
        return self.client.containers.list(
            all=True, filters={"label": f"{TEST_LABEL}={self.run_id}"}
        )


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    monkeypatch.setenv(
        "SECUREBENCH_DEFAULT_IMAGE", os.environ.get("SECUREBENCH_DEFAULT_IMAGE") or LOCAL_IMAGE
    )
    try:
        from verifiers.sandbox.docker import docker_client, resolve_image  # noqa: PLC0415

        client = docker_client()
        resolve_image(client, None)  # the image must be present locally (never pulled)
    except SandboxUnavailable as exc:
        reason = f"docker sandbox unavailable: {exc}"
        print(reason)
        if os.environ.get("SECUREBENCH_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{reason} (SECUREBENCH_REQUIRE_DOCKER=1)")
        pytest.skip(reason)
    found = Engine(client, f"docker-lifecycle-{uuid.uuid4().hex}")
    yield found
    left = found.ours()
    for container in left:  # leave the machine clean even when failing
        with contextlib.suppress(Exception):
            container.remove(force=True)
    assert not left, f"containers of this test were left behind: {[c.name for c in left]}"


def python(code: str) -> list[str]:
    return ["python3", "-I", "-c", code]


def sandbox(engine: Engine) -> Any:
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415

    return DockerSandbox(engine.client, labels=engine.labels)


# --- teardown --------------------------------------------------------------------------------


def test_a_detached_process_is_gone_when_run_returns(engine: Engine) -> None:
    result = sandbox(engine).run(SandboxSpec(command=python(DAEMON), limits=SMALL))
    assert result.exit_code == 0, result
    assert result.stdout == b"parent done\n"
    assert engine.ours() == []  # the container (and the daemon with it) is gone


def test_a_detached_process_is_gone_when_an_interactive_finish_returns(engine: Engine) -> None:
    process = sandbox(engine).start(SandboxSpec(command=python(DAEMON), limits=SMALL))
    assert process.stdout.read() == b"parent done\n"
    process.stdin.close()
    result = process.finish()
    assert result.exit_code == 0, result
    assert engine.ours() == []


def test_a_command_that_kills_its_wrapper_shell_still_leaves_nothing(engine: Engine) -> None:
    # The run's own uid may kill the trusted `sh` that runs `kill -9 -1` after the command;
    # the container removal before finish() returns must still take the daemon with it.
    code = DAEMON + "import signal; os.kill(os.getppid(), signal.SIGKILL)\n"
    result = sandbox(engine).run(SandboxSpec(command=python(code), limits=SMALL))
    assert not result.timed_out, result
    assert engine.ours() == []


def test_a_run_finished_long_before_a_late_finish_is_not_a_timeout(engine: Engine) -> None:
    # The teardown starts when the command ends; the wall-limit watchdog must not count it,
    # nor a finish() called after the wall limit has passed.
    limits = SMALL.with_wall(1.0)
    process = sandbox(engine).start(SandboxSpec(command=python("print('ok')"), limits=limits))
    assert process.stdout.read() == b"ok\n"
    process.stdin.close()
    time.sleep(1.5)
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


def test_the_workers_beat_removes_sandboxes_of_a_dead_worker(engine: Engine, settings) -> None:
    """The periodic task every worker's beat runs: a sandbox older than any live verification
    can be (the sandbox task's hard limit) is an orphan and goes; a fresh one stays."""
    from runs.pipeline import stale_sandboxes_remove  # noqa: PLC0415
    from verifiers.sandbox.docker import LABEL  # noqa: PLC0415

    orphan = _keeper(engine, {**engine.labels, LABEL: "1"})
    orphan.start()
    limit = settings.SECUREBENCH_SANDBOX_TASK_SECONDS

    assert stale_sandboxes_remove(labels=engine.labels) == []
    assert stale_sandboxes_remove(now=time.time() + limit + 3600, labels=engine.labels) == [
        orphan.id
    ]
    assert engine.ours() == []
    schedule = settings.CELERY_BEAT_SCHEDULE.values()
    assert "runs.tasks.remove_stale_sandboxes" in {entry["task"] for entry in schedule}
