from tests.runs.conftest import broker, docker_run, workers  # noqa: F401 - pytest fixtures
