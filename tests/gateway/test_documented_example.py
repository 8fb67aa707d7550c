"""The example docs/agents.md prints for calling the model endpoint, run as printed against a
live server whose gateway forwards to the stand-in provider."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gateway.services import endpoint_open, endpoint_path
from runs.models import Run
from runs.services import RunMetadata, run_create
from tests.conftest import REPO_ROOT
from tests.gateway.conftest import budget_version

GUIDE = REPO_ROOT / "docs" / "agents.md"
MARKER = "### Calling it from Python"


def documented_example() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"```python\n(.*?)```", text[text.index(MARKER) :], re.S)
    assert found, f"{GUIDE.name}: no python block after {MARKER!r}"
    return found.group(1)


@pytest.mark.django_db(transaction=True)
def test_the_documented_example_calls_the_model_through_the_gateway(
    make_pack, gateway_settings, standin, live_server, tmp_path
):
    version = budget_version(make_pack, {"tokens": 10_000})
    run = run_create(
        contract_version=version, metadata=RunMetadata(agent_name="documented"), source="api"
    )
    endpoint = live_server.url + endpoint_path(endpoint_open(run))
    script = tmp_path / "call_model.py"
    script.write_text(documented_example())

    printed = subprocess.run(
        [sys.executable, str(script), endpoint, "q1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout

    assert "Hello from the stand-in." in printed and "tokens:" in printed
    assert Run.objects.get(pk=run.pk).measured_usage["calls"] == 1
