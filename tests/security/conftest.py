"""Fixtures of the security suites: each sandbox backend (bwrap and Docker, a missing one is a
skip or, when required, a failure) with a host folder a slot uid can traverse; and, shared
with the pipeline tests, real workers (the dead-worker janitor test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runs.conftest import broker, docker_run, workers  # noqa: F401 - pytest fixtures
from tests.security.sandbox_backends import backend_for, make_host_dir
from verifiers.sandbox import Sandbox


@pytest.fixture(params=["bwrap", "docker"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    yield from backend_for(request.param, monkeypatch)


@pytest.fixture
def host_dir() -> Iterator[Path]:
    yield from make_host_dir()
