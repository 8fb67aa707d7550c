from tests.runs.conftest import broker, workers  # noqa: F401 - pytest fixtures
