from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runs.conftest import broker, workers  # noqa: F401 - pytest fixtures
from tests.storage.s3_server import S3Server, start_s3_server


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    yield from start_s3_server(tmp_path_factory.mktemp("s3-server"))
