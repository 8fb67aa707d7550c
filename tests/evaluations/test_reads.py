"""What of a candidate an evaluation's program gets (evaluations.execution): only the outputs
its ``reads`` names, when it names any; every file when it names none. An output kept for
audit (a log, the agent's notes) never reaches a program that did not ask for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluations.execution import _write_candidate, reads_output
from verifiers.task import Candidate

pytestmark = pytest.mark.database_independent

FILES = {
    "predictions.jsonl": '{"id": "a"}\n',
    "shards/0.bin": b"\x00\x01",
    "notes/audit.txt": "kept for people, not for the scorer",
}


def written(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_only_the_outputs_reads_names_are_written(tmp_path: Path) -> None:
    _write_candidate(Candidate.of_artifact(FILES), tmp_path, ("predictions.jsonl", "shards/"))

    assert written(tmp_path) == ["predictions.jsonl", "shards/0.bin"]


def test_no_reads_means_every_output(tmp_path: Path) -> None:
    _write_candidate(Candidate.of_artifact(FILES), tmp_path, ())

    assert written(tmp_path) == sorted(FILES)


def test_a_glob_in_reads_names_its_matches_only() -> None:
    assert reads_output(("*.jsonl",), "predictions.jsonl")
    assert not reads_output(("*.jsonl",), "notes/audit.txt")
    assert not reads_output(("shards",), "shardsX/0.bin")
