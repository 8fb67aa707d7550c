"""The suite's own test packs and the four upstream reference packs compile, with the lanes
the design promises. The reference packs are an extra layer: absent, their tests skip through
the helper (a failure when SECUREBENCH_REQUIRE names reference-packs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from packs.compiler import agent_task_json, compile_pack
from tests.conftest import TEST_PACKS, reference_packs_or_skip
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN, PUBLIC

CODE_TEST_PACKS = ("code-check-style", "code-bare-call")


@pytest.mark.parametrize("name", CODE_TEST_PACKS)
def test_our_code_test_packs_compile_with_tests_sealed_for_the_sandbox(name: str) -> None:
    pack = compile_pack(TEST_PACKS / name)

    assert pack.manifest.id == name
    assert pack.report["warnings"] == []
    assert len(pack.tasks) >= 3
    for task in pack.tasks:
        assert task.has_verifier
        assert lanes(task) == {
            "language": PUBLIC,
            "prompt": PUBLIC,
            "starter_code": PUBLIC,
            "tests": EVALUATION_INPUTS,
            "canonical_solution": HIDDEN,
        }
        assert set(task.agent_payload()) == {"language", "prompt", "starter_code"}


def test_the_test_packs_folder_holds_only_packs_this_module_checks() -> None:
    # A new test pack must come with its own compile test here.
    folders = {p.name for p in TEST_PACKS.iterdir() if p.is_dir()}
    assert folders == set(CODE_TEST_PACKS)


@pytest.fixture
def reference() -> Path:
    return reference_packs_or_skip()


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
def test_a_reference_pack_compiles_without_warnings(name, rows, reference):
    pack = compile_pack(reference / name)

    assert pack.manifest.id == name and pack.manifest.version == 1
    assert len(pack.tasks) == rows
    assert pack.report["warnings"] == []
    assert all(task.has_verifier for task in pack.tasks)
    assert pack.digest == compile_pack(reference / name).digest


def test_humaneval_tests_go_to_the_sandbox_and_the_solution_stays_hidden(reference):
    pack = compile_pack(reference / "humaneval-mini")

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


def test_mmlu_answers_are_hidden(reference):
    pack = compile_pack(reference / "mmlu-abstract-algebra-mini")

    assert [lanes(task)["answer"] for task in pack.tasks] == [HIDDEN] * 10
    assert pack.report["lane_counts"] == {"public": 20, "evaluation_inputs": 0, "hidden": 10}
    first = pack.tasks[0].agent_payload()
    assert set(first) == {"question", "choices"}
    assert first["choices"] == ["0", "4", "2", "6"]


def test_the_terminal_checker_carries_its_hidden_tests_into_the_sandbox_lane(reference):
    pack = compile_pack(reference / "terminal-task-smoke")
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


def test_the_terminal_agent_payload_is_only_the_instructions(reference):
    task = compile_pack(reference / "terminal-task-smoke").tasks[0]

    payload = task.agent_payload()

    assert list(payload) == ["instructions"]
    assert payload["instructions"].startswith("Create a file named output.txt")
    assert "expected_state" not in agent_task_json(payload)
    assert "securebench terminal task\\n" in agent_task_json(payload)
