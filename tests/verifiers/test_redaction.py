"""What stored verifier output redacts: sealed strings the agent was not also shown."""

from __future__ import annotations

from pathlib import Path

from verifiers.redaction import output_secrets
from verifiers.scoring import _finalised
from verifiers.task import TaskFile, TaskLanes
from verifiers.verdict import REDACTED, failed, storable, storable_text


def task(**eval_inputs: object) -> TaskLanes:
    return TaskLanes(
        task_id="t",
        family="repo_patch",
        public={"instructions": "Fix add().", "assets": [{"path": "calc", "mount": "repo"}]},
        evaluation_inputs=dict(eval_inputs),
        hidden={"gold_patch": "diff --git a/secret_gold_file.py", "answer": "Fix add()."},
        files={"assets": (TaskFile("calc/src/calculator_core.py", Path("/nonexistent")),)},
    )


def test_public_file_names_are_not_secrets_and_sealed_ones_are():
    lanes = task(
        candidate_policy={"allow_paths": ["src/calculator_core.py", "calculator_core.py"]},
        tests={"command": ["python3", "tests/sealed_only_check.py"]},
    )

    secrets = output_secrets(lanes)

    assert "src/calculator_core.py" not in secrets and "calculator_core.py" not in secrets
    assert "tests/sealed_only_check.py" in secrets
    # Hidden values stay secret even when they equal a public string: that a public string
    # is also the answer is itself the secret.
    assert "Fix add()." in secrets and "diff --git a/secret_gold_file.py" in secrets


def test_stored_output_shows_public_names_and_redacts_sealed_ones():
    lanes = task(
        candidate_policy={"allow_paths": ["src/calculator_core.py"]},
        tests={"command": ["python3", "tests/sealed_only_check.py"]},
    )
    verdict = failed(
        "tests_failed",
        details={"actual_candidate_patch_paths": ["src/calculator_core.py"]},
        stderr="ran tests/sealed_only_check.py against src/calculator_core.py",
    )

    stored = _finalised(verdict, lanes, 0.1)

    assert stored.details["actual_candidate_patch_paths"] == ["src/calculator_core.py"]
    assert stored.stderr == f"ran {REDACTED} against src/calculator_core.py"


def test_what_a_sandbox_reports_is_made_text_every_database_can_hold():
    assert storable_text("before\x00after") == "before\\x00after"
    assert storable_text("evil-\udcff.txt") == "evil-\\udcff.txt"
    assert storable_text("plain, ünïcode") == "plain, ünïcode"
    reported = storable({"name\x00": ["x\ud800", ("y", 1)], "n": None})
    assert reported == {"name\\x00": ["x\\ud800", ("y", 1)], "n": None}
