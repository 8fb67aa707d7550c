"""The Docker backend at pace, keeping every guarantee of a fresh container.

- The pool (verifiers.sandbox.docker_pool) hands a container out once: nothing can put a used
  one back, two sandboxes never share one, and the runs that took pooled containers still
  leave nothing behind.
- A command that is silent for longer than the engine client's timeout keeps its output and
  exit status (the attach socket once took the client's timeout as the command's end).
- The copy-in folded into the command's exec: a failed extraction is ours (SandboxUnavailable),
  and a run that prints look-alike text and exits 125 is only its own exit.
- The OCI runtime setting: an unknown runtime is an error naming it; gVisor's runsc runs a
  sandbox where the engine offers it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.components import require
from tests.security.sandbox_backends import (
    SMALL,
    TEST_LABEL,
    local_docker_client,
    settle_containers,
    write,
)
from tests.security.sandbox_probes import wait_for
from verifiers.sandbox import MiB, SandboxSpec, SandboxUnavailable


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield local_docker_client(monkeypatch)


@pytest.fixture
def labels(client: Any) -> Iterator[dict[str, str]]:
    run_id = f"docker-pool-{uuid.uuid4().hex}"
    yield {TEST_LABEL: run_id}
    settle_containers()
    left = client.containers.list(
        all=True, filters={"label": f"{TEST_LABEL}={run_id}"}, ignore_removed=True
    )
    for container in left:
        container.remove(force=True)
    assert not left, f"containers of this test were left behind: {[c.name for c in left]}"


def _spec(command: list[str], **kwargs: Any) -> SandboxSpec:
    return SandboxSpec(command=command, **{"limits": SMALL, **kwargs})


def test_a_pooled_container_is_handed_out_once(client: Any, labels: dict[str, str]) -> None:
    from verifiers.sandbox.docker_pool import ContainerPool, config_for  # noqa: PLC0415

    image = os.environ["SECUREBENCH_DEFAULT_IMAGE"]
    config = config_for(_spec(["true"]), image, labels)
    pool = ContainerPool(client, max_per_config=2)
    try:
        assert pool.take(config) is None  # asked once: not worth a spare yet
        pool.release(config)
        assert pool.take(config) is None  # asked twice: the filler now stocks it
        pool.release(config)
        assert wait_for(lambda: pool.idle_ids() != [], 60), "the pool made no idle container"
        first = pool.take(config)
        assert first is not None
        pool.release(config)
        # Whatever path a used container might come back by, the pool refuses it...
        with pytest.raises(ValueError, match="handed out once"):
            pool._offer(config, first)  # noqa: SLF001 - the door the filler uses
        assert first not in pool.idle_ids()
        # ...and the next takes get other containers.
        assert wait_for(lambda: pool.idle_ids() != [], 60), "the pool made no idle container"
        second = pool.take(config)
        assert second not in (None, first)
        client.api.remove_container(first, force=True)
        client.api.remove_container(second, force=True)
    finally:
        pool.close()
    assert pool.hits == 2


def test_sandboxes_never_share_a_container_and_leave_none(
    client: Any, labels: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415
    from verifiers.sandbox.docker_pool import process_pool  # noqa: PLC0415

    monkeypatch.setenv("SECUREBENCH_DOCKER_POOL", "2")
    sandbox = DockerSandbox(client, labels=labels)
    pool = process_pool()
    assert pool is not None
    hits_before = pool.hits
    # Each run leaves a mark in its work dir and reports what it found there: a container
    # that ran anything before would show the earlier mark.
    seen: list[str] = []
    for number in range(8):
        result = sandbox.run(
            _spec(["sh", "-c", f"ls -A; echo {number} > mark; cat mark"])  # one line: "N"
        )
        assert result.stdout == f"{number}\n".encode(), result
        seen.append(sandbox.used_ids[-1])
        time.sleep(0.3)  # lets the filler stock the pool between runs, as a worker's pace does
    assert len(set(seen)) == len(seen), "a container was used twice"
    assert pool.hits > hits_before, "no run took a pooled container"
    settle_containers()
    still_there = {c.id for c in client.containers.list(all=True, ignore_removed=True)}
    assert not still_there & set(seen), "a used container outlived its run"


def test_a_command_silent_for_longer_than_the_client_timeout_keeps_its_output(
    labels: dict[str, str],
) -> None:
    from verifiers.sandbox.docker import DockerSandbox, docker_client  # noqa: PLC0415

    impatient = docker_client(timeout=2.0)
    result = DockerSandbox(impatient, labels=labels).run(
        # A wall clock well past the silence: under gVisor and load the start alone can
        # take a second or more of the default 5 s.
        _spec(
            ["sh", "-c", "sleep 4; echo still here; exit 3"], limits=replace(SMALL, wall_seconds=15)
        )
    )
    assert (result.exit_code, result.stdout, result.timed_out) == (3, b"still here\n", False)


def test_a_failed_copy_in_is_ours(client: Any, labels: dict[str, str], host_dir: Path) -> None:
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415

    (host_dir / "big.bin").write_bytes(os.urandom(3 * MiB))  # the work dir holds 1 MiB
    limits = replace(SMALL, work_bytes=1 * MiB)
    spec = SandboxSpec(command=["true"], limits=limits, work_files=host_dir)
    with pytest.raises(SandboxUnavailable, match="copy-in failed"):
        DockerSandbox(client, labels=labels).run(spec)


def test_a_run_that_imitates_a_failed_copy_in_is_only_its_own_exit(
    client: Any, labels: dict[str, str], host_dir: Path
) -> None:
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415

    write(host_dir / "input.txt", "x")
    # It cannot know the nonce: whatever it prints before exiting 125 is its own stderr.
    forged = "cat /proc/$PPID/cmdline | tr '\\0' ' ' >&2; echo ' tar: fake' >&2; exit 125"
    result = DockerSandbox(client, labels=labels).run(
        _spec(["sh", "-c", forged], work_files=host_dir)
    )
    assert result.exit_code == 125, result


def test_an_unknown_runtime_is_an_error_naming_it(
    client: Any, labels: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415

    monkeypatch.setenv("SECUREBENCH_DOCKER_RUNTIME", "no-such-runtime")
    with pytest.raises(SandboxUnavailable, match="no-such-runtime"):
        DockerSandbox(client, labels=labels).run(_spec(["true"]))


def test_gvisor_runs_a_sandbox_where_the_engine_offers_it(
    client: Any, labels: dict[str, str], monkeypatch: pytest.MonkeyPatch, host_dir: Path
) -> None:
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415

    if "runsc" not in (client.info().get("Runtimes") or {}):
        require("docker", "the Docker engine offers no runsc runtime (make sandbox-image adds it)")
    monkeypatch.setenv("SECUREBENCH_DOCKER_RUNTIME", "runsc")
    write(host_dir / "input.txt", "from the host\n")
    result = DockerSandbox(client, labels=labels).run(
        # gVisor's own kernel answers uname: the run is not on the host's kernel.
        _spec(["sh", "-c", "cat input.txt; uname -r"], work_files=host_dir)
    )
    assert result.exit_code == 0, result
    assert result.stdout.startswith(b"from the host\n"), result
    assert os.uname().release.encode() not in result.stdout, result


def test_a_pooled_container_removed_behind_the_pools_back_is_replaced(
    client: Any, labels: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stale-container janitor (or an engine restart) may remove an idle container the
    pool still offers: the sandbox that takes it notices at its first exec and runs in a
    fresh one instead, and the result is the run's own."""
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415
    from verifiers.sandbox.docker_pool import process_pool  # noqa: PLC0415

    monkeypatch.setenv("SECUREBENCH_DOCKER_POOL", "1")
    sandbox = DockerSandbox(client, labels=labels)
    spec = _spec(["sh", "-c", "echo ran"])
    for _ in range(2):  # asked twice: pooled
        assert sandbox.run(spec).stdout == b"ran\n"
    pool = process_pool()
    assert pool is not None
    assert wait_for(lambda: pool.idle_ids() != [], 60), "the pool made no idle container"
    for container_id in pool.idle_ids():
        client.api.remove_container(container_id, force=True)  # what the janitor does
    result = sandbox.run(spec)
    assert (result.exit_code, result.stdout) == (0, b"ran\n"), result
    assert any("pooled container was gone" in note for note in result.notes), result.notes
