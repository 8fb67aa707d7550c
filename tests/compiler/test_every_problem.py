"""One compile names every problem it can: the manifest's and the rows' together, capped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from packs.compiler import CompileLimits, PackError, compile_pack

BAD_VERSION = "id: demo\nversion: '1'\n"
GOOD_ROW = {
    "id": "a",
    "family": "multiple_choice",
    "input": {"question": "2+2?", "choices": ["3", "4"]},
    "eval": {"answer": "B"},
}
NO_CHOICES = {**GOOD_ROW, "id": "c", "input": {"question": "2+2?"}}


def write_pack(root: Path, manifest: str, lines: list[str | dict]) -> Path:
    (root / "manifest.yaml").write_text(manifest, encoding="utf-8")
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    (root / "tasks.jsonl").write_text(text, encoding="utf-8")
    return root


def rejected(root: Path, **kwargs) -> PackError:
    with pytest.raises(PackError) as caught:
        compile_pack(root, **kwargs)
    return caught.value


def shown(error: PackError) -> list[str]:
    return [str(problem) for problem in error.problems]


def test_a_manifest_problem_and_two_row_problems_are_named_together(tmp_path):
    pack = write_pack(tmp_path, BAD_VERSION, [GOOD_ROW, "{oops", NO_CHOICES])

    error = rejected(pack)

    assert shown(error) == [
        "manifest.yaml, line 2, field version: must be an integer of at least 1"
        " (not a string or boolean)",
        "tasks.jsonl, line 2: invalid JSON: Expecting property name enclosed in double quotes"
        " (column 2)",
        "tasks.jsonl, line 3, field input.choices: is required (task 'c', multiple_choice)",
    ]
    assert error.unlisted == 0


def test_rows_use_the_default_family_of_a_manifest_with_other_problems(tmp_path):
    manifest = BAD_VERSION + "defaults:\n  family: multiple_choice\n"
    row = {key: value for key, value in NO_CHOICES.items() if key != "family"}

    error = rejected(write_pack(tmp_path, manifest, [row]))

    assert [(p.file, p.line, p.field) for p in error.problems] == [
        ("manifest.yaml", 2, "version"),
        ("tasks.jsonl", 1, "input.choices"),
    ]


def test_a_row_without_a_family_is_not_blamed_for_a_broken_default(tmp_path):
    manifest = "id: demo\nversion: 1\ndefaults:\n  family: 7\n"
    row = {"id": "x", "input": {}, "extra": 1}

    error = rejected(write_pack(tmp_path, manifest, [row]))

    assert [(p.file, p.field) for p in error.problems] == [
        ("manifest.yaml", "defaults.family"),
        ("tasks.jsonl", "extra"),
    ]


def test_with_no_default_family_a_row_still_needs_one_of_its_own(tmp_path):
    row = {key: value for key, value in GOOD_ROW.items() if key != "family"}

    error = rejected(write_pack(tmp_path, BAD_VERSION, [row]))

    assert str(error.problems[-1]) == (
        "tasks.jsonl, line 1, field family: is required when manifest defaults.family is not set"
        " (task 'a')"
    )


def test_an_unreadable_manifest_still_lets_rows_be_checked(tmp_path):
    pack = write_pack(tmp_path, "id: demo\nversion: [1\n", [GOOD_ROW, GOOD_ROW, "[]"])

    error = rejected(pack)

    assert [(p.file, p.line, p.field) for p in error.problems] == [
        ("manifest.yaml", 3, None),
        ("tasks.jsonl", 2, "id"),
        ("tasks.jsonl", 3, None),
    ]
    assert error.problems[1].message.startswith("duplicate task id 'a': already used on line 1")


def test_file_references_wait_for_a_valid_manifest(tmp_path):
    row = {**GOOD_ROW, "assets": [{"path": "absent.txt"}]}

    assert [p.file for p in rejected(write_pack(tmp_path, BAD_VERSION, [row])).problems] == [
        "manifest.yaml"
    ]
    fixed = write_pack(tmp_path, "id: demo\nversion: 1\n", [row])
    assert rejected(fixed).problems[0].field == "assets[0].path"


def test_a_missing_tasks_file_is_named_with_the_manifest_problem(tmp_path):
    pack = write_pack(tmp_path, BAD_VERSION, [])
    (pack / "tasks.jsonl").unlink()

    assert [p.file for p in rejected(pack).problems] == ["manifest.yaml", "tasks.jsonl"]


def test_the_cap_counts_manifest_and_row_problems_alike(tmp_path):
    pack = write_pack(tmp_path, BAD_VERSION + "extra: 1\n", ["{bad"] * 5)

    error = rejected(pack, limits=CompileLimits(max_problems=4))

    assert [(p.file, p.line) for p in error.problems] == [
        ("manifest.yaml", 3),
        ("manifest.yaml", 2),
        ("tasks.jsonl", 1),
        ("tasks.jsonl", 2),
    ]
    assert error.unlisted == 3 and error.total == 7
    assert str(error).splitlines()[-1] == "and 3 more problems"


def test_one_problem_past_the_cap_reads_in_the_singular(tmp_path):
    pack = write_pack(tmp_path, BAD_VERSION, ["{bad"])

    error = rejected(pack, limits=CompileLimits(max_problems=1))

    assert str(error).splitlines() == [shown(error)[0], "and 1 more problem"]
