"""The four upstream example packs compile, with the lanes the design promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from packs.compiler import agent_task_json, compile_pack
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN, PUBLIC

# tests/compiler/ -> repo -> its parent, where the shared folder lives beside the repo.
REFERENCE_PACKS = Path(__file__).resolve().parents[2].parent / "shared" / "reference-packs"

pytestmark = pytest.mark.skipif(
    not REFERENCE_PACKS.is_dir(), reason=f"reference packs not found at {REFERENCE_PACKS}"
)


def lanes(task) -> dict[str, str]:
    return {resource.name: resource.lane for resource in task.resources}


@pytest.mark.parametrize(
    ("name", "rows"),
    [
        ("code-completion-smoke", 3),
        ("humaneval-mini", 10),
        ("mmlu-abstract-algebra-mini", 10),
        ("terminal-task-smoke", 1),
    ],
)
def test_a_reference_pack_compiles_without_warnings(name, rows):
    pack = compile_pack(REFERENCE_PACKS / name)

    assert pack.manifest.id == name and pack.manifest.version == 1
    assert len(pack.tasks) == rows
    assert pack.report["warnings"] == []
    assert all(task.has_verifier for task in pack.tasks)
    assert pack.digest == compile_pack(REFERENCE_PACKS / name).digest


def test_humaneval_tests_go_to_the_sandbox_and_the_solution_stays_hidden():
    pack = compile_pack(REFERENCE_PACKS / "humaneval-mini")

    for task in pack.tasks:
        assert lanes(task) == {
            "language": PUBLIC,
            "prompt": PUBLIC,
            "starter_code": PUBLIC,
            "tests": EVALUATION_INPUTS,
            "canonical_solution": HIDDEN,
        }
        assert set(task.agent_payload()) == {"language", "prompt", "starter_code"}
    assert pack.tasks[0].metadata["entry_point"] == "has_close_elements"
    assert pack.tasks[0].environment == {"image": "python:3.11-slim", "timeout_seconds": 120}


def test_mmlu_answers_are_hidden():
    pack = compile_pack(REFERENCE_PACKS / "mmlu-abstract-algebra-mini")

    assert [lanes(task)["answer"] for task in pack.tasks] == [HIDDEN] * 10
    assert pack.report["lane_counts"] == {"public": 20, "evaluation_inputs": 0, "hidden": 10}
    first = pack.tasks[0].agent_payload()
    assert set(first) == {"question", "choices"}
    assert first["choices"] == ["0", "4", "2", "6"]


def test_the_terminal_checker_carries_its_hidden_tests_into_the_sandbox_lane():
    pack = compile_pack(REFERENCE_PACKS / "terminal-task-smoke")
    task = pack.tasks[0]

    checker = next(r for r in task.resources if r.name == "checker")
    assert (checker.lane, checker.kind) == (EVALUATION_INPUTS, "json")
    assert checker.files == (("eval", "create-output-file/tests/test_outputs.py"),)
    assert checker.value == {
        "path": "create-output-file/tests",
        "source": "pytest",
        "timeout_seconds": 30,
    }
    assert lanes(task)["expected_state"] == HIDDEN
    assert set(pack.files) == {("eval", "create-output-file/tests/test_outputs.py")}
    assert pack.report["ignored_files"] == ["tester-command.yaml"]


def test_the_terminal_agent_payload_is_only_the_instructions():
    task = compile_pack(REFERENCE_PACKS / "terminal-task-smoke").tasks[0]

    payload = task.agent_payload()

    assert list(payload) == ["instructions"]
    assert payload["instructions"].startswith("Create a file named output.txt")
    assert "expected_state" not in agent_task_json(payload)
    assert "securebench terminal task\\n" in agent_task_json(payload)
