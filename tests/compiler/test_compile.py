"""compile_pack end to end: resources, metadata, the agent payload, the report and the digest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from packs.compiler import PackError, Problem, agent_task_json, compile_pack
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN, PUBLIC

MANIFEST = """\
id: demo
version: 1
defaults:
  family: code_completion
  environment: {image: python:3.12-slim, timeout_seconds: 30}
"""
CODE_ROW = {
    "id": "cc/1",
    "input": {"prompt": "def add(a, b):", "language": "python", "starter_code": ""},
    "assets": [{"path": "helper.py"}],
    "eval": {
        "tests": {"source": "inline", "code": "assert add(1, 2) == 3"},
        "canonical_solution": "    return a + b",
    },
    "environment": {"timeout_seconds": 60, "network": "none"},
    "metadata": {
        "entry_point": "add",
        "environment": "row value is overridden",
        "benchmark_pack": "also overridden",
    },
}


def write_pack(
    root: Path, rows: list[dict], manifest: str = MANIFEST, files: dict[str, str] | None = None
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.yaml").write_text(manifest)
    (root / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    files = (
        {"assets/helper.py": "def helper():\n    pass\n", "hidden/notes.txt": "secret\n"}
        if files is None
        else files
    )
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def only_problem(root: Path):
    with pytest.raises(PackError) as caught:
        compile_pack(root)
    assert len(caught.value.problems) == 1, str(caught.value)
    return caught.value.problems[0]


# --- resources and metadata --------------------------------------------------------------------


def test_resources_come_in_order_input_then_assets_then_eval(tmp_path):
    task = compile_pack(write_pack(tmp_path, [CODE_ROW])).tasks[0]

    assert [(r.name, r.lane, r.kind) for r in task.resources] == [
        ("prompt", PUBLIC, "text"),
        ("language", PUBLIC, "text"),
        ("starter_code", PUBLIC, "text"),
        ("assets", PUBLIC, "json"),
        ("tests", EVALUATION_INPUTS, "json"),
        ("canonical_solution", HIDDEN, "text"),
    ]


def test_a_value_resource_is_sized_and_hashed_by_its_canonical_json(tmp_path):
    task = compile_pack(write_pack(tmp_path, [CODE_ROW])).tasks[0]

    tests = next(r for r in task.resources if r.name == "tests")
    canonical = b'{"code":"assert add(1, 2) == 3","source":"inline"}'
    assert tests.value == CODE_ROW["eval"]["tests"]
    assert tests.files == ()
    assert (tests.size, tests.sha256) == (len(canonical), hashlib.sha256(canonical).hexdigest())


def test_a_file_backed_resource_is_hashed_over_its_files(tmp_path):
    row = {
        "id": "t",
        "family": "terminal_task",
        "input": {"instructions": "i"},
        "eval": {"checker": {"command": "true"}, "test_files": {"path": "notes.txt"}},
    }
    pack = compile_pack(write_pack(tmp_path, [row]))

    test_files = pack.tasks[0].resources[-1]
    entry = pack.files[("eval", "notes.txt")]
    expected = hashlib.sha256(
        json.dumps([["notes.txt", entry.sha256]], separators=(",", ":")).encode()
    ).hexdigest()
    assert (test_files.kind, test_files.size, test_files.sha256) == ("file", entry.size, expected)


def test_environment_is_the_manifest_default_shallow_merged_with_the_row(tmp_path):
    task = compile_pack(write_pack(tmp_path, [CODE_ROW])).tasks[0]

    assert task.environment == {
        "image": "python:3.12-slim",
        "timeout_seconds": 60,
        "network": "none",
    }


def test_reserved_metadata_keys_override_row_metadata(tmp_path):
    task = compile_pack(write_pack(tmp_path, [CODE_ROW])).tasks[0]

    assert task.metadata == {
        "entry_point": "add",
        "benchmark_pack": {"id": "demo", "version": 1},
        "environment": {"image": "python:3.12-slim", "timeout_seconds": 60, "network": "none"},
        "asset_roots": {"public": "assets", "eval": "hidden"},
        "asset_defaults": {"read_only": True},
    }


def test_the_agent_payload_is_exactly_the_public_resources(tmp_path):
    task = compile_pack(write_pack(tmp_path, [CODE_ROW])).tasks[0]

    payload = task.agent_payload()

    assert payload == {**CODE_ROW["input"], "assets": CODE_ROW["assets"]}
    for hidden_word in (
        "tests",
        "canonical_solution",
        "entry_point",
        "environment",
        "metadata",
        "benchmark_pack",
    ):
        assert hidden_word not in payload
    assert "return a + b" not in agent_task_json(payload)


def test_editing_the_agent_payload_does_not_change_the_task(tmp_path):
    task = compile_pack(write_pack(tmp_path, [CODE_ROW])).tasks[0]

    task.agent_payload()["assets"].append({"path": "x"})

    assert task.agent_payload()["assets"] == [{"path": "helper.py"}]


def test_agent_task_json_is_pretty_sorted_unicode_with_a_trailing_newline():
    assert agent_task_json({"b": "é", "a": [1]}) == '{\n  "a": [\n    1\n  ],\n  "b": "é"\n}\n'


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        (
            {"input": {"assets": "mine"}, "assets": [{"path": "helper.py"}]},
            "assets",
            "duplicate resource name 'assets' (also input.assets)",
        ),
        (
            {"input": {"checker": "x"}, "eval": {"checker": "y"}},
            "eval.checker",
            "duplicate resource name 'checker' (also input.checker)",
        ),
        (
            {"assets": [{"path": "helper.py"}], "eval": {"assets": "x"}},
            "eval.assets",
            "duplicate resource name 'assets' (also assets)",
        ),
    ],
)
def test_it_rejects_duplicate_resource_names(tmp_path, row, field, message):
    full = {"id": "t", "family": "tool_call"} | row
    problem = only_problem(write_pack(tmp_path, [full]))

    assert (problem.line, problem.field) == (1, field)
    assert problem.message == f"{message} (task 't', tool_call)"


@pytest.mark.parametrize("name", ["a/b", "..", "", "x\\y", "tab\there"])
def test_it_rejects_resource_names_that_cannot_be_file_names(tmp_path, name):
    problem = only_problem(
        write_pack(tmp_path, [{"id": "t", "family": "tool_call", "eval": {name: 1}}])
    )

    assert problem.field == f"eval.{name}"
    assert problem.message.startswith("is not a usable resource name")


def test_the_report_counts_families_lanes_and_resources(tmp_path):
    rows = [
        CODE_ROW,
        {**CODE_ROW, "id": "cc/2", "assets": []},
        {
            "id": "mc",
            "family": "multiple_choice",
            "input": {"question": "q", "choices": ["a"]},
            "eval": {"answer": 0},
        },
    ]
    report = compile_pack(write_pack(tmp_path, rows)).report

    assert report["family_counts"] == {"code_completion": 2, "multiple_choice": 1}
    assert report["lane_counts"] == {"public": 9, "evaluation_inputs": 2, "hidden": 3}
    assert report["resource_lanes"]["assets"] == {"public": 1}
    assert report["resource_lanes"]["tests"] == {"evaluation_inputs": 2}
    assert report["warnings"] == [] and report["ignored_files"] == []
    assert (report["file_count"], report["file_bytes"]) == (2, 30)
    assert json.loads(json.dumps(report)) == report


def test_a_problem_prints_only_what_it_knows():
    assert str(Problem("manifest.yaml", None, None, "is missing")) == "manifest.yaml: is missing"
    assert str(Problem("tasks.jsonl", 3, None, "bad")) == "tasks.jsonl, line 3: bad"
    assert str(Problem("manifest.yaml", None, "id", "bad")) == "manifest.yaml, field id: bad"


# --- digest ------------------------------------------------------------------------------------


DIGEST_ROWS = [CODE_ROW, {**CODE_ROW, "id": "cc/2"}]


def digest_of(
    root: Path,
    rows: list[dict] = DIGEST_ROWS,
    manifest: str = MANIFEST,
    files: dict[str, str] | None = None,
) -> str:
    return compile_pack(write_pack(root, rows, manifest, files)).digest


def test_the_same_content_in_another_folder_and_format_has_the_same_digest(tmp_path):
    first = digest_of(tmp_path / "a")
    reformatted = write_pack(
        tmp_path / "b",
        [],
        manifest=(
            "# a comment\nversion: 1\nid: 'demo'\ndefaults:\n  environment:\n"
            '    timeout_seconds: 30\n    image: "python:3.12-slim"\n  family: code_completion\n'
        ),
    )
    lines = [
        json.dumps(dict(reversed(list(row.items()))), indent=None, separators=(" , ", " : "))
        for row in DIGEST_ROWS
    ]
    (reformatted / "tasks.jsonl").write_text("\n" + "\n\n".join(lines) + "\n\n")
    (reformatted / "ignored.txt").write_text("not part of the contract")

    assert compile_pack(reformatted).digest == first
    assert len(first) == 64 and int(first, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        "manifest value",
        "row value",
        "row order",
        "hidden file byte",
        "added file",
        "removed file",
        "renamed file",
    ],
)
def test_any_change_to_the_contract_changes_the_digest(tmp_path, change):
    base_files = {"assets/helper.py": "def helper():\n    pass\n", "hidden/notes.txt": "secret\n"}
    manifest, rows, files = MANIFEST, list(DIGEST_ROWS), dict(base_files)
    if change == "manifest value":
        manifest = MANIFEST.replace("timeout_seconds: 30", "timeout_seconds: 31")
    elif change == "row value":
        rows[1] = {**rows[1], "metadata": {"entry_point": "add2"}}
    elif change == "row order":
        rows.reverse()
    elif change == "hidden file byte":
        files["hidden/notes.txt"] = "secreT\n"
    elif change == "added file":
        files["assets/extra.txt"] = ""
    elif change == "removed file":
        del files["hidden/notes.txt"]
    elif change == "renamed file":
        files["hidden/notes2.txt"] = files.pop("hidden/notes.txt")

    before = digest_of(tmp_path / "before", files=base_files)
    after = digest_of(tmp_path / "after", rows, manifest, files)

    assert before != after
