"""What a verification leaves behind, looked for wherever it lives and whoever runs the test.

Each verification under test runs on a fresh instance of the backend under test, wrapped so
that every command it starts carries a token of its own: a ``-X`` option of python3, which the
program ignores and every fork inherits. The verification's processes are then found:

* by that token in the host's process table: ``/proc/<pid>/cmdline`` is readable by every uid,
  and a Docker container's processes are host processes of the same kernel (so this holds as
  root or not, bwrap or Docker);
* by the slot uids the fresh bwrap instance ran under (as root; a candidate that exec()s
  another program drops the token but keeps its uid);
* by the Docker containers the fresh Docker instance ran in (a container left behind holds
  whatever still runs in it, and is a leftover itself). They may come from the process's
  container pool, so they carry the suite's labels, not one of their own: the instance
  records their ids. A container whose removal was handed to a background thread (nothing
  but its keeper left in it) is waited for first: that removal is bounded, the run's
  processes were already checked by token.

Other runs on the machine have other tokens, container ids, and slot uids held under their
locks, so they are never counted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from dataclasses import dataclass, replace
from typing import Any

from tests.security.sandbox_backends import slot_leftovers
from tests.security.sandbox_probes import processes_with_token
from verifiers.sandbox.base import Sandbox, SandboxProcess, SandboxResult, SandboxSpec
from verifiers.sandbox.bwrap import BwrapSandbox

TOKEN_OPTION = "securebench_test_run"


class TokenSandbox(Sandbox):
    """The backend under test, with the verification's token on every command it starts."""

    def __init__(self, inner: Sandbox, token: str) -> None:
        self.inner = inner
        self.token = token
        self.name = inner.name

    def tagged(self, spec: SandboxSpec) -> SandboxSpec:
        program, *rest = spec.command
        # Only python3 takes the token as an option it ignores; any other program would see it.
        assert program == "python3", f"cannot carry a token on {spec.command}"
        return replace(spec, command=[program, "-X", f"{TOKEN_OPTION}={self.token}", *rest])

    def run(self, spec: SandboxSpec) -> SandboxResult:
        return self.inner.run(self.tagged(spec))

    def start(self, spec: SandboxSpec) -> SandboxProcess:
        return self.inner.start(self.tagged(spec))


@dataclass(frozen=True)
class TrackedRun:
    """One verification's sandbox and what identifies its processes."""

    sandbox: TokenSandbox
    backend: Sandbox  # a fresh instance: what it used is this verification's alone
    token: str


def tracked(sandbox: Sandbox) -> TrackedRun:
    """A fresh instance of ``sandbox``'s backend, labelled and tokened for one verification."""
    token = f"sb-run-{uuid.uuid4().hex}"
    backend = _fresh_backend(sandbox, token)
    return TrackedRun(TokenSandbox(backend, token), backend, token)


def _fresh_backend(sandbox: Sandbox, token: str) -> Sandbox:
    if isinstance(sandbox, BwrapSandbox):
        return BwrapSandbox(
            uid_base=sandbox.uid_base,
            uid_count=sandbox.uid_count,
            slot_timeout=sandbox.slot_timeout,
        )
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415 - optional SDK

    assert isinstance(sandbox, DockerSandbox), f"no leftover check for {sandbox.name}"
    # The suite's labels, not the run's: the run then takes containers from the pool.
    return DockerSandbox(sandbox.client, labels=sandbox.labels)


def leftovers(run: TrackedRun) -> dict[str, Any]:
    """Every way of finding the run's processes, with what each found (empty: none left)."""
    found: dict[str, Any] = {"by command-line token": processes_with_token(run.token)}
    if isinstance(run.backend, BwrapSandbox):
        found["by slot uid"] = {
            uid: pids for uid in sorted(run.backend.used_uids) if (pids := slot_leftovers(uid))
        }
    else:
        found["containers with the run's label"] = [c.name for c in labelled_containers(run)]
    return {how: what for how, what in found.items() if what}


def clean_up(run: TrackedRun, found: dict[str, Any]) -> None:
    """Leave the machine clean after a failed check: kill, by pid, what carries the run's token
    or was found under its slot uids (while their locks were held), and remove its containers."""
    pids = processes_with_token(run.token)
    pids += [pid for uid_pids in found.get("by slot uid", {}).values() for pid in uid_pids]
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if not isinstance(run.backend, BwrapSandbox):
        for container in labelled_containers(run):
            with contextlib.suppress(Exception):
                container.remove(force=True)


def labelled_containers(run: TrackedRun) -> list[Any]:
    """The run's Docker containers still on the engine, running or not."""
    from verifiers.sandbox.docker_pool import wait_for_removals  # noqa: PLC0415 - optional SDK

    wait_for_removals()  # idle pooled containers are not counted: they are not in used_ids
    client = run.backend.client  # type: ignore[attr-defined] - a DockerSandbox
    used = set(run.backend.used_ids)  # type: ignore[attr-defined]
    return [
        container
        for container in client.containers.list(all=True, ignore_removed=True)
        if container.id in used
    ]
