"""Sandbox backends behind one interface (DESIGN.md §5).

``get_sandbox()`` picks the backend from its argument or ``SECUREBENCH_SANDBOX``:
``auto`` (default: Docker when an engine answers a quick ping, else bubblewrap), ``docker``
or ``bwrap``. There is never an unsandboxed fallback: no usable backend raises
``SandboxUnavailable``.
"""

from __future__ import annotations

import os

from verifiers.sandbox.base import (
    CODE_LIMITS,
    REPO_LIMITS,
    GiB,
    Limits,
    MiB,
    Mount,
    Sandbox,
    SandboxProcess,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.sandbox.bwrap import BwrapSandbox
from verifiers.sandbox.docker import DockerSandbox, docker_client

PING_TIMEOUT = 3.0  # seconds; "auto" must not hang on a dead engine socket


def get_sandbox(name: str | None = None) -> Sandbox:
    choice = (name or os.environ.get("SECUREBENCH_SANDBOX") or "auto").strip().lower()
    if choice == "docker":
        return DockerSandbox()
    if choice == "bwrap":
        return BwrapSandbox()
    if choice == "auto":
        return _auto()
    raise SandboxUnavailable(f"unknown sandbox backend {choice!r} (use auto, docker or bwrap)")


def _auto() -> Sandbox:
    reasons = []
    try:
        client = docker_client(timeout=PING_TIMEOUT)
        client.api.timeout = 60  # the ping was short; real calls may take longer
        return DockerSandbox(client)
    except SandboxUnavailable as exc:
        reasons.append(str(exc))
    try:
        return BwrapSandbox()
    except SandboxUnavailable as exc:
        reasons.append(str(exc))
    raise SandboxUnavailable("no sandbox backend is usable: " + "; ".join(reasons))


__all__ = [
    "CODE_LIMITS",
    "REPO_LIMITS",
    "GiB",
    "Limits",
    "MiB",
    "Mount",
    "Sandbox",
    "SandboxProcess",
    "SandboxResult",
    "SandboxSpec",
    "SandboxUnavailable",
    "get_sandbox",
]
