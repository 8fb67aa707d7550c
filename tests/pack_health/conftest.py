import pytest

from tests.runs.conftest import broker, workers  # noqa: F401 - pytest fixtures


@pytest.fixture(autouse=True)
def health_checks_on_upload(isolated_data_dir, settings):
    """Here the checks a stored version triggers, and the gate they open, are the subject: on,
    as in production (the suite's root conftest turns both off everywhere else)."""
    settings.SECUREBENCH_HEALTH_ON_UPLOAD = True
    settings.SECUREBENCH_PUBLISH_GATE = True
