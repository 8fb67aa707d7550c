"""``manage.py audit_pack``: a pack's health checks offline, with an exit status for CI
(0 healthy, 1 warnings, 2 failing, 3 invalid pack) and a JSON report."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from packs.audit import UnavailableSandbox, audit_folder
from tests.conftest import mc_row, sandbox_or_skip, zip_folder
from verifiers.pack_findings import CHECKS


def audit(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("audit_pack", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def audit_json(*args: str) -> tuple[int, dict[str, Any]]:
    status, out, _ = audit(*args, "--json")
    return status, json.loads(out)


def codes(report: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(f["check"], f["code"], f["severity"]) for f in report["findings"]}


@pytest.fixture
def bwrap():
    return sandbox_or_skip("bwrap")


# --- tiny packs ----------------------------------------------------------------------------------


def short_row(task_id: str, question: str, answer: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "family": "short_answer",
        "input": {"question": question},
        "eval": {"accepted_answers": [answer]},
    }


def clean_rows() -> list[dict[str, Any]]:
    return [
        mc_row("q1", "A"),
        mc_row("q2", "B"),
        mc_row("q3", "C"),
        short_row("s1", "What is the capital of France?", "Paris"),
    ]


ADD_TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\n"


def code_row(task_id: str, solution: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "family": "code_completion",
        "input": {"prompt": "Write add(a, b) returning the sum.", "language": "python"},
        "eval": {
            "tests": {"source": "inline", "code": ADD_TESTS},
            "reference_solution": solution,
        },
        "metadata": {"entry_point": "add"},
        "environment": {"timeout_seconds": 30},
    }


# --- exit statuses ---------------------------------------------------------------------------


def test_a_clean_pack_is_healthy_and_exits_0(make_pack):
    status, out, _ = audit(str(make_pack({"id": "clean", "version": 1}, clean_rows())))

    assert status == 0
    assert "verdict: healthy" in out
    assert "clean v1: 4 tasks" in out


def test_a_multiple_choice_pack_answering_one_letter_warns_and_exits_1(make_pack):
    rows = [mc_row(f"q{i}", "B") for i in range(1, 6)]

    status, report = audit_json(str(make_pack({"id": "same", "version": 1}, rows)))

    assert status == 1
    assert report["verdict"] == "warnings"
    assert {(f["check"], f["severity"]) for f in report["findings"]} == {("leak", "warning")}


def test_a_reference_that_fails_its_tests_exits_2(make_pack, bwrap):
    folder = make_pack(
        {"id": "wrong-oracle", "version": 1},
        [code_row("add", "def add(a, b):\n    return a - b\n")],
    )

    status, report = audit_json(str(folder), "--sandbox", "bwrap")

    assert status == 2
    assert ("oracle", "oracle_failed", "failing") in codes(report)
    (finding,) = [f for f in report["findings"] if f["code"] == "oracle_failed"]
    assert finding["task_id"] == "add" and finding["evidence"]["reason"] == "tests_failed"
    # The author owns the pack: the JSON report carries the verifier's output too.
    assert "output" in finding["sealed_evidence"]
    assert report["timing"]["sandbox"] == "bwrap"


def test_the_same_code_task_with_a_right_reference_is_healthy(make_pack, bwrap):
    folder = make_pack(
        {"id": "right-oracle", "version": 1},
        [code_row("add", "def add(a, b):\n    return a + b\n")],
    )

    status, report = audit_json(str(folder), "--sandbox", "bwrap")

    assert status == 0, report["findings"]
    assert report["counts"]["oracle"]["checked"] == 1
    assert report["counts"]["repeat"]["checked"] == 1
    assert report["counts"]["adversarial"]["checked"] == 2
    assert report["timing"]["slowest"][0]["task_id"] == "add"


def test_a_checker_that_passes_an_empty_workspace_exits_2(make_pack, bwrap):
    row = {
        "id": "vacuous",
        "family": "terminal_task",
        "input": {"instructions": "Create out.txt holding the word done."},
        "eval": {"checker": {"command": ["true"], "timeout_seconds": 30}},
    }

    status, report = audit_json(
        str(make_pack({"id": "vacuous", "version": 1}, [row])), "--sandbox", "bwrap"
    )

    assert status == 2
    found = codes(report)
    assert ("null", "null_passed", "failing") in found
    assert ("adversarial", "attack_passed", "failing") in found
    assert ("oracle", "unverifiable", "info") in found


def test_a_leaked_answer_exits_2(make_pack):
    answer = "sunlight scattered by the molecules of the air, strongest for blue light"
    row = {
        "id": "sky",
        "family": "free_response",
        "input": {"prompt": "Why is the sky blue?", "context": f"Hint: {answer}."},
        "eval": {"rubric": {"type": "contains_any", "accepted_answers": [answer]}},
    }

    status, report = audit_json(str(make_pack({"id": "leaky", "version": 1}, [row])))

    assert status == 2
    assert any(f["check"] == "leak" and f["severity"] == "failing" for f in report["findings"])
    # The leak also hands the answer to the echo attack.
    assert ("adversarial", "attack_passed", "failing") in codes(report)


def test_an_invalid_pack_exits_3_naming_file_line_and_field(make_pack):
    folder = make_pack({"id": "bad", "version": 1}, [mc_row("q1"), {"id": "q2", "input": {}}])

    status, out, err = audit(str(folder))
    json_status, report = audit_json(str(folder))

    assert (status, json_status) == (3, 3)
    assert out == "" and "invalid pack" in err and "tasks.jsonl, line 2" in err
    assert report["verdict"] == "invalid"
    first = report["problems"][0]
    assert (first["file"], first["line"]) == ("tasks.jsonl", 2)


def test_an_invalid_pack_past_the_problem_cap_counts_the_rest(make_pack):
    bad_rows = [{**mc_row(f"q{n}"), "extra": 1} for n in range(60)]  # one problem each
    folder = make_pack({"id": "bad", "version": 1}, bad_rows)

    status, _, err = audit(str(folder))
    _, report = audit_json(str(folder))

    assert status == 3 and err.rstrip().endswith("and 10 more problems")
    assert (len(report["problems"]), report["more_problems"]) == (50, 10)


def test_a_missing_path_or_a_refused_archive_exits_3(tmp_path):
    not_an_archive = tmp_path / "pack.zip"
    not_an_archive.write_bytes(b"this is not a zip file")

    assert audit(str(tmp_path / "absent"))[0] == 3
    status, _, err = audit(str(not_an_archive))
    assert status == 3 and "not a .zip or .tar.gz archive" in err


def test_an_archive_is_extracted_like_an_upload(tmp_path, make_pack):
    archive = tmp_path / "pack.zip"
    archive.write_bytes(zip_folder(make_pack({"id": "zipped", "version": 2}, clean_rows())))

    status, report = audit_json(str(archive))

    assert status == 0
    assert report["pack"] == {"id": "zipped", "version": 2, "tasks": 4}


def test_the_json_report_shape(make_pack):
    status, report = audit_json(str(make_pack({"id": "clean", "version": 1}, clean_rows())))

    assert status == 0
    assert set(report) == {"pack", "verdict", "counts", "findings", "timing"}
    assert set(report["counts"]) == set(CHECKS)
    assert set(report["counts"]["oracle"]) == {
        "checked",
        "failing",
        "not_checked",
        "warning",
        "info",
    }
    assert report["counts"]["oracle"]["checked"] == 4
    assert report["counts"]["adversarial"]["checked"] == 3 * 3 + 4
    assert {"median_seconds", "total_seconds", "slowest", "audit_seconds"} <= set(report["timing"])
    assert report["timing"]["sandbox"] is None  # text tasks need no sandbox
    assert report["findings"] == []


def test_a_backend_that_cannot_open_makes_the_checks_errors_not_passes(make_pack):
    folder = make_pack(
        {"id": "no-backend", "version": 1}, [code_row("add", "def add(a, b):\n    return a + b\n")]
    )

    report = audit_folder(folder, sandbox=lambda: UnavailableSandbox("no backend here"))

    # Not the pack's fault, and not a pass either: its own verdict and exit status.
    assert report.verdict == "not_checked" and report.exit_status == 4
    assert {f.code for f in report.findings} == {"not_checked_infrastructure"}
    assert all("No sandbox backend is usable" in f.message for f in report.findings)


def test_text_report_lists_findings_with_the_check_and_task(make_pack, bwrap):
    folder: Path = make_pack(
        {"id": "wrong-oracle", "version": 1},
        [code_row("add", "def add(a, b):\n    return a - b\n")],
    )

    status, out, _ = audit(str(folder), "--sandbox", "bwrap")

    assert status == 2
    assert "verdict: failing" in out
    assert "[failing] oracle · task add · oracle_failed" in out
    assert "return a - b" not in out  # sealed output only in the JSON report
