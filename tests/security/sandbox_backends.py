"""Sandbox backends for the escape and mount suites, and the after-test cleanliness checks.

A missing backend is a skip with its printed reason, or a failure when SECUREBENCH_REQUIRE
names it (tests/components.py). After each test the machine must be clean: no
container with this test's label (Docker) and no process of any slot uid the sandbox used
(bwrap as root; without root the tests that leave processes check by token and namespace).
Host folders mounted into a sandbox are made under /tmp and traversable by others, because
bwrap resolves mount sources as the slot uid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.components import LOCAL_IMAGE, require
from verifiers.sandbox import Limits, MiB, Sandbox, SandboxUnavailable, get_sandbox
from verifiers.sandbox import bwrap as bwrap_backend
from verifiers.sandbox.bwrap import pids_of_uid

TEST_LABEL = "securebench.test-run"
WORKDIR = "/work"

SMALL = Limits(
    wall_seconds=5.0,
    cpu_seconds=10,
    memory_bytes=256 * MiB,
    pids=32,
    file_size_bytes=16 * MiB,
    tmp_bytes=8 * MiB,
    work_bytes=8 * MiB,
    open_files=64,
    output_bytes=64 * 1024,
)
TIGHT_MEMORY = replace(SMALL, memory_bytes=128 * MiB)


# --- backends --------------------------------------------------------------------------------


def unavailable(name: str, exc: Exception) -> NoReturn:
    require(name, f"{name} sandbox unavailable: {exc}")


def backend_for(
    name: str, monkeypatch: pytest.MonkeyPatch, *, module: str | None = None
) -> Iterator[Sandbox]:
    """The backend ``name`` for one test, then the cleanliness check (use with yield from).
    With ``module``, Docker sandboxes carry that test module's label (module_run_id)."""
    if name == "bwrap":
        yield from bwrap_sandbox()
    else:
        run_id = None if module is None else module_run_id(module)
        yield from docker_sandbox(monkeypatch, run_id=run_id)


_module_run_ids: dict[str, str] = {}


def module_run_id(module: str) -> str:
    """One label value per test module and process. A container configuration's labels are
    part of it, so the tests of one module share the process's container pool, as a
    worker's verifications do (a label per test would leave every pooled container unused
    at the test's end)."""
    return _module_run_ids.setdefault(module, f"sandbox-escapes-{uuid.uuid4().hex}")


def bwrap_sandbox() -> Iterator[Sandbox]:
    try:
        sandbox = get_sandbox("bwrap")
    except SandboxUnavailable as exc:
        unavailable("bwrap", exc)
    yield sandbox
    # Not root: no slot uid, used_uids stays empty; tests that leave processes behind then
    # look for them by token and pid namespace (sandbox_probes.survivors).
    left = {uid: pids for uid in sorted(sandbox.used_uids) if (pids := slot_leftovers(uid))}
    assert not left, f"processes of slot uids survived the test: {left}"


def slot_leftovers(uid: int) -> list[int]:
    """Processes of a slot uid, checked while holding its slot lock (so no other run of the
    machine is using the uid at that moment)."""
    folder = Path(os.environ.get("SECUREBENCH_SANDBOX_SLOT_DIR", bwrap_backend.DEFAULT_SLOT_DIR))
    fd = os.open(folder / f"slot-{uid}.lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + 10.0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    warnings.warn(
                        f"slot uid {uid} is busy with another run; not checked", stacklevel=2
                    )
                    return []
                time.sleep(0.05)
        return pids_of_uid(uid)
    finally:
        os.close(fd)  # drops the lock


def local_docker_client(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A client of the engine with the local sandbox image as the default (never pulled);
    a skip naming the reason, or a failure when docker is required, without one."""
    image = os.environ.get("SECUREBENCH_DEFAULT_IMAGE") or LOCAL_IMAGE
    monkeypatch.setenv("SECUREBENCH_DEFAULT_IMAGE", image)
    try:
        from verifiers.sandbox.docker import docker_client, resolve_image  # noqa: PLC0415

        client = docker_client()
        resolve_image(client, None)  # the image must be present locally (never pulled)
    except SandboxUnavailable as exc:
        unavailable("docker", exc)
    return client


def docker_sandbox(
    monkeypatch: pytest.MonkeyPatch, *, run_id: str | None = None
) -> Iterator[Sandbox]:
    """A Docker backend labelled ``run_id`` (default: a label of the test's own), then the
    check that every container it handed out is gone. With a label shared by other tests,
    the pool's idle containers (never handed out) stay for the next test."""
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415 - optional SDK

    client = local_docker_client(monkeypatch)
    own_label = run_id is None
    run_id = run_id or f"sandbox-escapes-{uuid.uuid4().hex}"
    yield DockerSandbox(client, labels={TEST_LABEL: run_id})
    left = containers_left(client, run_id, keep_idle=not own_label)
    for container in left:  # leave the machine clean even when failing
        with contextlib.suppress(Exception):
            container.remove(force=True)
    assert not left, f"containers of this test were left behind: {[c.name for c in left]}"


def containers_left(client: Any, run_id: str, *, keep_idle: bool) -> list[Any]:
    """Containers labelled ``run_id`` once background removals are done: with ``keep_idle``,
    all but the pool's idle ones (looked at with the pool's filler held still); otherwise
    the idle ones are removed first and every container counts."""
    from verifiers.sandbox.docker_pool import process_pool, wait_for_removals  # noqa: PLC0415

    def labelled() -> list[Any]:
        return client.containers.list(
            all=True, filters={"label": f"{TEST_LABEL}={run_id}"}, ignore_removed=True
        )

    pool = process_pool() if keep_idle else None
    if pool is None:
        settle_containers()
        return labelled()
    wait_for_removals()
    with pool.paused() as idle:
        return [container for container in labelled() if container.id not in idle]


def settle_containers() -> None:
    """Before counting containers: remove this process's idle pooled ones (never handed out,
    so never a run's) and wait for the removals handed to background threads."""
    from verifiers.sandbox.docker_pool import drain_process_pool  # noqa: PLC0415

    drain_process_pool()


def make_host_dir() -> Iterator[Path]:
    """A host folder under /tmp that a slot uid can traverse (pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="sb-escapes-", dir="/tmp"))  # noqa: S108
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def on_gvisor(backend: Any) -> bool:
    """Docker sandboxes run by gVisor's runsc: a kernel of its own between candidate and
    host, which answers some refusals with other errnos and keeps no kernel state outside
    the container's memory cgroup."""
    from verifiers.sandbox.docker_pool import docker_runtime  # noqa: PLC0415

    return getattr(backend, "name", "") == "docker" and docker_runtime() == "runsc"
