"""The repeat check on real verifications (bubblewrap): a pack whose hidden tests pass by a coin
toss is caught as flaky, and its deterministic twin is not.

Each flaky task's reference passes with probability 1/2 in each isolated verification, so the
oracle and its repeat disagree with probability 1/2 per task: with 16 tasks, no flip at all
happens once in 65,536 runs of this test.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.pack_health.support import check_inline, store_draft
from tests.runs.conftest import bwrap_or_skip

pytestmark = pytest.mark.django_db

TASKS = 16
DEFAULTS = {
    "family": "code_completion",
    "environment": {"image": "python:3.11-slim", "timeout_seconds": 60},
}
COIN_TOSS = (
    "import random\n\ndef check():\n    assert random.random() < 0.5\n    assert double(4) == 8\n"
)
STEADY = "def check():\n    assert double(4) == 8\n"


def rows(tests: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"t{n:02d}",
            "input": {"language": "python", "prompt": "Write double(x) in candidate.py.\n"},
            "eval": {
                "tests": {"source": "inline", "code": tests + "\ncheck()\n"},
                "canonical_solution": "def double(x):\n    return 2 * x\n",
            },
        }
        for n in range(TASKS)
    ]


@pytest.fixture(autouse=True)
def sandbox(monkeypatch) -> None:
    bwrap_or_skip()
    monkeypatch.setenv("SECUREBENCH_SANDBOX", "bwrap")


def test_a_reference_that_passes_by_chance_is_flaky(make_pack):
    version = store_draft(make_pack, {"id": "coin", "version": 1, "defaults": DEFAULTS},
                          rows(COIN_TOSS))  # fmt: skip

    report = check_inline(version)

    flaky = list(report.findings.filter(check_name="repeat", code="flaky"))
    assert flaky, list(report.findings.values_list("check_name", "code", "task_label"))
    assert report.verdict == "failing" and report.counts["repeat"]["failing"] == len(flaky)
    for finding in flaky:
        first, second = finding.evidence["first"]["status"], finding.evidence["second"]["status"]
        assert {first, second} == {"passed", "failed"}, finding.evidence
    version.refresh_from_db()
    assert version.state == "draft"


def test_its_steady_twin_is_healthy(make_pack):
    version = store_draft(make_pack, {"id": "steady", "version": 1, "defaults": DEFAULTS},
                          rows(STEADY))  # fmt: skip

    report = check_inline(version)

    assert (report.verdict, report.error) == ("healthy", ""), list(report.findings.values())
    assert report.counts["repeat"] == {
        "checked": TASKS,
        "failing": 0,
        "not_checked": 0,
        "warning": 0,
        "info": 0,
    }
    version.refresh_from_db()
    assert version.state == "published"
