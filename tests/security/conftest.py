"""Fixtures of the security suites: each sandbox backend (bwrap and Docker, a missing one is a
skip or, when required, a failure) with a host folder a slot uid can traverse; and, shared
with the pipeline tests, real workers (the dead-worker janitor test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runs.conftest import broker, docker_run, workers  # noqa: F401 - pytest fixtures
from tests.security.sandbox_backends import backend_for, make_host_dir, settle_containers
from verifiers.sandbox import Sandbox


@pytest.fixture(params=["bwrap", "docker"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    yield from backend_for(request.param, monkeypatch, module=request.module.__name__)


@pytest.fixture(scope="module", autouse=True)
def _pool_drained_after_the_module() -> Iterator[None]:
    """Docker sandboxes of a module share its label and the process's pool; what the pool
    still holds for them is removed when the module ends, not left to its idle timeout."""
    yield
    settle_containers()


@pytest.fixture
def host_dir() -> Iterator[Path]:
    yield from make_host_dir()
