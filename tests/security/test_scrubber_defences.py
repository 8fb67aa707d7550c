"""Scrubber and detail-count defences the other suites did not tell apart (``make mutation``).

- The last scrub before storing (verifiers.scoring) covers stdout and every string nested in
  the details, not only stderr: a family that forgot to scrub is still caught there.
- A workspace family's sandbox logs are scrubbed where they are read (verifiers.trusted_runner).
- A result page shows no verifier fact at all of an oracle run, not even counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.models import CandidateOrigin
from runs.selectors import public_detail_counts
from verifiers.sandbox import SandboxResult
from verifiers.scoring import _finalised
from verifiers.task import TaskFile, TaskLanes
from verifiers.trusted_runner import log_secrets, sandbox_fields
from verifiers.verdict import REDACTED, failed

pytestmark = pytest.mark.database_independent

SEALED_TEST = "tests/sealed_only_check.py"
HIDDEN_ANSWER = "expected-value-0xC0FFEE"


def lanes() -> TaskLanes:
    return TaskLanes(
        task_id="t",
        family="repo_patch",
        public={"instructions": "Fix add().", "assets": [{"path": "calc", "mount": "repo"}]},
        evaluation_inputs={"tests": {"command": ["python3", SEALED_TEST]}},
        hidden={"expected": HIDDEN_ANSWER},
        files={"assets": (TaskFile("calc/src/calculator_core.py", Path("/nonexistent")),)},
    )


def test_the_last_scrub_covers_stdout_and_nested_details() -> None:
    verdict = failed(
        "tests_failed",
        stdout=f"ran {SEALED_TEST}: wanted {HIDDEN_ANSWER}",
        details={"runs": [{"log": f"assert x == {HIDDEN_ANSWER!r}"}], "tests_count": 3},
    )

    stored = _finalised(verdict, lanes(), 0.1)

    assert stored.stdout == f"ran {REDACTED}: wanted {REDACTED}"
    assert stored.details == {"runs": [{"log": f"assert x == '{REDACTED}'"}], "tests_count": 3}


def test_workspace_logs_are_scrubbed_where_they_are_read() -> None:
    result = SandboxResult(
        exit_code=1,
        stdout=f"FAILED {SEALED_TEST}: {HIDDEN_ANSWER}".encode(),
        stderr=f"python3 {SEALED_TEST}".encode(),
        duration_seconds=0.1,
        backend="bwrap",
        image=None,
    )

    fields = sandbox_fields(result, log_secrets(lanes()))

    assert fields["stdout"] == f"FAILED {REDACTED}: {REDACTED}"
    assert fields["stderr"] == f"python3 {REDACTED}"


def test_an_oracle_runs_details_show_no_fact_at_all() -> None:
    details = {"tests_count": 3, "tests_exit_code": 0, "passed": True, "log": "secret"}

    assert public_detail_counts(details, origin=CandidateOrigin.ORACLE) == {}
    # The same details of an agent's run show their counts and flags, never the text.
    shown = public_detail_counts(details, origin=CandidateOrigin.AGENT)
    assert shown == {"passed": True, "tests_count": 3, "tests_exit_code": 0}
