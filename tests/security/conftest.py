"""Fixtures shared with the pipeline tests: real workers (the dead-worker janitor test)."""

from tests.runs.conftest import broker, docker_run, workers  # noqa: F401 - pytest fixtures
