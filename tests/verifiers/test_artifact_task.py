"""artifact_task: an artifact candidate against its contract's required outputs.

The built-in verifier passes an artifact whose every required output is present and valid and
fails it with the rule it broke; the same rules, through ``candidate_violations``, make a run
invalid. Each output rule is tried alone, the JSONL ones name their line and the JSON path of
the field, and a nesting bomb ends as ``output_malformed``, never a crash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verifiers.adversarial import attack_candidates
from verifiers.artifact_outputs import (
    MAX_JSON_DEPTH,
    OutputRule,
    json_nesting_exceeds,
    output_problems,
    output_rules,
)
from verifiers.artifact_paths import artifact_path_problem, folder_file_clashes
from verifiers.contract_check import candidate_violations
from verifiers.families import get_family
from verifiers.oracle import null_candidate, oracle_candidate
from verifiers.scoring import verify
from verifiers.task import Candidate, TaskFile, TaskLanes, WorkspaceFile

pytestmark = pytest.mark.database_independent

PREDICTION_SCHEMA = {
    "type": "object",
    "required": ["id", "answer"],
    "properties": {"id": {"type": "string"}, "answer": {"type": "integer"}},
}
CONTRACT: dict[str, Any] = {
    "required_outputs": [
        {"path": "predictions.jsonl", "schema": PREDICTION_SCHEMA, "max_bytes": 1000},
        {"path": "run_manifest.json", "format": "json", "schema": {"type": "object"}},
        {"path": "notes.txt", "format": "text", "optional": True},
        "final_checkpoint",
    ]
}
GOOD = {
    "predictions.jsonl": '{"id": "a", "answer": 1}\n{"id": "b", "answer": 2}\n',
    "run_manifest.json": '{"run": "r1"}',
    "final_checkpoint/weights.bin": b"\x00\x01\xff",
}


def task(contract: dict[str, Any] | None = None, **hidden: Any) -> TaskLanes:
    return TaskLanes(
        "art/t1",
        "artifact_task",
        {"instructions": "Write predictions"},
        {},
        hidden,
        contract=CONTRACT if contract is None else contract,
    )


def artifact(**changes: str | bytes | None) -> Candidate:
    files = {**GOOD, **changes}
    return Candidate.of_artifact({p: c for p, c in files.items() if c is not None})


def outcome(candidate: Candidate, contract: dict[str, Any] | None = None) -> tuple[str, str | None]:
    verdict = verify(task(contract), candidate)
    return verdict.status, verdict.reason


def violations(candidate: Candidate, **kwargs: Any) -> list[dict[str, Any]]:
    found = candidate_violations(CONTRACT, "artifact_task", candidate, **kwargs)
    return [v.as_dict() for v in found]


# --- the family ----------------------------------------------------------------------------


def test_artifact_task_is_active_with_artifact_candidates_and_hidden_references():
    spec = get_family("artifact_task")

    assert spec.active and spec.candidate_kind == "artifact"
    assert spec.lane_for("reference_artifact") == "hidden" and spec.lane_for("rubric") == "hidden"
    assert spec.validate({"instructions": "do"}, {"reference_artifact": {"a.json": "{}"}}) == []
    assert spec.validate({}, {}) == [("input.instructions", "is required")]


def test_an_inline_reference_must_hold_artifact_paths_and_texts():
    spec = get_family("artifact_task")
    problems = spec.validate(
        {"instructions": "do"},
        {"reference_artifact": {"../x": "t", "CON": "t", "a": "t", "a/b": "t", "n": 3}},
    )

    fields = sorted(field for field, _ in problems)
    assert fields == [
        "eval.reference_artifact.../x",
        "eval.reference_artifact.CON",
        "eval.reference_artifact.a/b",
        "eval.reference_artifact.n",
    ]


# --- the built-in verifier -----------------------------------------------------------------


def test_a_good_artifact_passes_and_keeps_the_contract():
    assert outcome(artifact()) == ("passed", None)
    assert violations(artifact()) == []


def test_an_optional_output_may_be_absent_but_is_checked_when_present():
    assert outcome(artifact(**{"notes.txt": "fine"})) == ("passed", None)
    assert outcome(artifact(**{"notes.txt": b"\xff\xfe"})) == ("failed", "output_malformed")


def test_a_missing_mandatory_output_fails_output_missing():
    candidate = artifact(**{"run_manifest.json": None})

    assert outcome(candidate) == ("failed", "output_missing")
    (found,) = violations(candidate)
    assert found["rule"] == "output_missing" and found["paths"] == ["run_manifest.json"]


def test_a_missing_folder_output_fails_output_missing():
    candidate = artifact(**{"final_checkpoint/weights.bin": None})

    assert outcome(candidate) == ("failed", "output_missing")


def test_json_that_does_not_parse_is_malformed():
    candidate = artifact(**{"run_manifest.json": '{"run": '})

    assert outcome(candidate) == ("failed", "output_malformed")
    (found,) = violations(candidate)
    assert found["rule"] == "output_malformed" and found["paths"] == ["run_manifest.json"]
    assert "is not JSON" in found["message"]


def test_a_jsonl_line_that_does_not_parse_is_named_by_its_number():
    lines = '{"id": "a", "answer": 1}\n\n{"id": "b", answer: 2}\n'
    (found,) = violations(artifact(**{"predictions.jsonl": lines}))

    assert found["rule"] == "output_malformed"
    assert "predictions.jsonl line 3: is not JSON" in found["message"]


def test_a_jsonl_line_failing_its_schema_names_the_line_and_the_field():
    lines = '{"id": "a", "answer": 1}\n{"id": "b", "answer": "two"}\n'
    candidate = artifact(**{"predictions.jsonl": lines})

    assert outcome(candidate) == ("failed", "output_malformed")
    (found,) = violations(candidate)
    assert found["message"] == (
        "output_malformed: predictions.jsonl line 2: $.answer: 'two' is not of type 'integer'"
    )


def test_a_json_document_failing_its_schema_names_the_field():
    (found,) = violations(artifact(**{"run_manifest.json": "[1]"}))

    assert found["message"] == "output_malformed: run_manifest.json $: [1] is not of type 'object'"


def test_nan_is_not_json():
    # The schema (an object) would take it: only the parse refuses NaN.
    candidate = artifact(**{"run_manifest.json": '{"run": NaN}'})

    assert outcome(candidate) == ("failed", "output_malformed")
    (found,) = violations(candidate)
    assert "NaN is not a JSON number" in found["message"]


def test_an_output_over_max_bytes_is_too_large():
    line = json.dumps({"id": "x" * 990, "answer": 1}) + "\n"
    candidate = artifact(**{"predictions.jsonl": line})

    assert outcome(candidate) == ("failed", "output_too_large")
    (found,) = violations(candidate)
    assert found["rule"] == "output_too_large"
    assert "over the contract's max_bytes of 1000" in found["message"]


def test_an_output_written_after_the_budget_is_late():
    found = violations(artifact(), produced_after_budget=["predictions.jsonl", "other.txt"])

    assert found == [
        {
            "rule": "output_late",
            "paths": ["predictions.jsonl"],
            "message": "output_late: predictions.jsonl was written after the budget ran out",
        }
    ]


def test_every_broken_rule_is_reported_once_in_contract_order():
    candidate = artifact(**{"run_manifest.json": None, "predictions.jsonl": "{\n" + "x" * 2000})

    rules = [v["rule"] for v in violations(candidate)]

    assert rules == ["output_too_large", "output_malformed", "output_missing"]


# No size limit here: the bomb must be caught by its nesting, not by its size.
BOMB_CONTRACT = {
    "required_outputs": [
        {"path": "run_manifest.json"},
        {"path": "predictions.jsonl", "schema": PREDICTION_SCHEMA},
    ]
}


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_a_nesting_bomb_is_malformed_not_a_crash(opener: str):
    bomb = opener * 100_000
    for name in ("run_manifest.json", "predictions.jsonl"):
        candidate = artifact(**{name: bomb})

        assert outcome(candidate, BOMB_CONTRACT) == ("failed", "output_malformed")
        (found,) = candidate_violations(BOMB_CONTRACT, "artifact_task", candidate)
        assert f"nests deeper than {MAX_JSON_DEPTH} levels" in found.message


def test_a_nesting_bomb_on_a_later_jsonl_line_names_that_line():
    lines = '{"id": "a", "answer": 1}\n' + "[" * 100_000 + "\n"
    candidate = artifact(**{"predictions.jsonl": lines})

    (found,) = candidate_violations(BOMB_CONTRACT, "artifact_task", candidate)

    assert "predictions.jsonl line 2: nests deeper" in found.message


def test_nesting_is_counted_outside_strings_only():
    assert not json_nesting_exceeds(json.dumps({"a": "[" * 1000}), 3)
    assert json_nesting_exceeds("[" * 5, 4)
    assert not json_nesting_exceeds("[" * 4 + "]" * 4, 4)


def test_an_artifact_with_unsafe_paths_is_an_invalid_candidate():
    for path in ("../predictions.jsonl", "/etc/passwd", "dev/null", "nul.txt"):
        verdict = verify(task(), artifact(**{path: "x"}))

        assert (verdict.status, verdict.reason) == ("failed", "invalid_candidate"), path
        assert verdict.details["paths"] == [path]


def test_an_empty_artifact_fails_even_when_the_contract_names_no_outputs():
    assert outcome(Candidate.of_artifact({}), {}) == ("failed", "output_missing")
    assert outcome(Candidate.of_artifact({"anything.bin": b"1"}), {}) == ("passed", None)


def test_a_workspace_gets_the_output_rules_of_objects_but_keeps_required_outputs_for_missing():
    files = {**GOOD, "predictions.jsonl": '{"id": 1, "answer": 1}\n'}
    files.pop("run_manifest.json")
    workspace = Candidate.of_workspace(files)

    found = candidate_violations(CONTRACT, "terminal_task", workspace)

    assert [v.rule for v in found] == ["required_outputs", "output_malformed"]
    assert "line 1: $.id: 1 is not of type 'string'" in found[1].message


def test_a_string_entry_only_asks_for_presence():
    rules = output_rules({"required_outputs": ["out.json"]})
    files = {"out.json": WorkspaceFile(b"not json")}

    assert rules == [OutputRule(path="out.json")]
    assert output_problems(rules, files) == []


def test_an_object_without_format_takes_it_from_the_suffix():
    rules = output_rules(
        {"required_outputs": [{"path": "a.json"}, {"path": "b.ndjson"}, {"path": "c"}]}
    )

    assert [rule.format for rule in rules] == ["json", "jsonl", "binary"]


# --- paths -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["../x", "a/../../x", "/abs", "a\x00b", "CON", "aux.log", "dir/COM1", "dev/sda", "proc/1",
     "a\\b", "", "a//b", "trailing."],
)  # fmt: skip
def test_unsafe_artifact_paths_are_named(path: str):
    assert artifact_path_problem(path)


def test_ordinary_paths_are_fine_and_a_name_cannot_be_a_file_and_a_folder():
    for path in ("predictions.jsonl", "out/shard-0.bin", "console.txt", "device/x"):
        assert artifact_path_problem(path) is None, path
    assert folder_file_clashes(["a", "a/b", "c/d", "c/e"]) == [("a", "a/b")]


# --- oracle, null and attacks ------------------------------------------------------------------


def test_the_inline_reference_is_the_oracle_and_no_files_the_null():
    reference = {path: c if isinstance(c, str) else "weights" for path, c in GOOD.items()}
    lanes = task(reference_artifact=reference, rubric="be right")

    oracle = oracle_candidate(lanes)
    null = null_candidate(lanes)

    assert oracle is not None and oracle.kind == "artifact"
    assert verify(lanes, oracle).status == "passed"
    assert null == Candidate.of_artifact({})
    assert verify(lanes, null).reason == "output_missing"


def test_a_referenced_folder_is_the_oracle_with_paths_below_it(tmp_path: Path):
    files = []
    for path, content in GOOD.items():
        source = tmp_path / path.replace("/", "_")
        source.write_bytes(content.encode() if isinstance(content, str) else content)
        files.append(TaskFile(path=f"refs/t1/{path}", source=source))
    lanes = TaskLanes(
        "art/t1", "artifact_task", {"instructions": "x"}, {},
        {"reference_artifact": {"path": "refs/t1/"}},
        files={"reference_artifact": tuple(files)}, contract=CONTRACT,
    )  # fmt: skip

    oracle = oracle_candidate(lanes)

    assert oracle is not None and set(oracle.files) == set(GOOD)
    assert verify(lanes, oracle).status == "passed"


def test_without_a_reference_there_is_no_oracle():
    assert oracle_candidate(task()) is None


def test_every_attack_fails():
    lanes = task()
    attacks = attack_candidates(lanes)

    assert [a.name for a in attacks] == [
        "artifact_forged_report",
        "artifact_nesting_bomb",
        "artifact_path_escape",
    ]
    for attack in attacks:
        assert verify(lanes, attack.candidate).status == "failed", attack.name
