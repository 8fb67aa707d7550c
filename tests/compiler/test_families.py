"""The twelve families: registry, schema of the seven active ones, and every lane map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from packs.compiler import PackError, compile_pack
from verifiers.families import FAMILIES, get_family
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN, PUBLIC

CHECKS = "checks"  # a directory under hidden/ that file-form checkers can point at

VALID = {
    "multiple_choice": ({"question": "2+2?", "choices": ["3", "4"]}, {"answer": "B"}),
    "short_answer": (
        {"question": "Capital of France?", "answer_format": "one word", "context": "Geography"},
        {"accepted_answers": ["Paris", 1], "tolerance": 0.5},
    ),
    "free_response": (
        {"prompt": "Why?", "context": {"category": "x"}},
        {
            "reference_answer": "Because.",
            "rubric": {"type": "contains_any", "accepted_answers": ["b"]},
        },
    ),
    "code_completion": (
        {"prompt": "def f():", "language": "python", "starter_code": ""},
        {
            "tests": {"source": "inline", "code": "assert f() == 1"},
            "reference_solution": "def f(): return 1",
            "canonical_solution": "    return 1",
        },
    ),
    "repo_patch": (
        {"repo": "org/repo", "base_commit": "a" * 40, "instructions": "Fix it", "hints": "look"},
        {
            "tests": {
                "source": "command",
                "command": ["pytest", "-q"],
                "workdir": "/testbed",
                "timeout_seconds": 900,
                "setup_patch": "diff --git a/x b/x",
                "test_patch": {"source": "inline", "patch": "diff --git a/t b/t"},
            },
            "candidate_policy": {
                "allow_paths": ["src/"],
                "allow_sensitive_paths": [],
                "patch_preserved_paths": ["tests/"],
            },
            "gold_patch": "diff --git a/x b/x",
        },
    ),
    "terminal_task": (
        {"instructions": "Make output.txt", "context": "shell"},
        {
            "checker": {"command": ["bash", "run.sh"], "workdir": "/app", "timeout_seconds": 60},
            "needed_commands": ["chroot"],
            "run_tests": {"command": "bash run.sh"},
            "test_files": {"note": "inline"},
            "expected_state": {"path": "output.txt", "content": "x"},
        },
    ),
    "artifact_task": (
        {"instructions": "Write predictions.jsonl", "context": {"split": "test"}},
        {
            "reference_artifact": {"predictions.jsonl": '{"id": 1}\n'},
            "rubric": {"criteria": ["complete"]},
        },
    ),
}

DEFERRED_EVAL_KEYS = {
    "tool_call": ["initial_state", "expected_calls", "expected_final_state"],
    "browser_task": ["credentials", "success_check"],
    "desktop_task": ["success_check"],
    "multimodal_qa": ["answer", "rubric"],
    "preference_pair": ["preference", "rubric"],
}

# DESIGN.md §2, one row per family.
EXPECTED_LANES = {
    "multiple_choice": {"answer": HIDDEN},
    "short_answer": {"accepted_answers": HIDDEN, "tolerance": HIDDEN},
    "free_response": {"reference_answer": HIDDEN, "rubric": HIDDEN},
    "code_completion": {
        "tests": EVALUATION_INPUTS,
        "reference_solution": HIDDEN,
        "canonical_solution": HIDDEN,
    },
    "repo_patch": {
        "tests": EVALUATION_INPUTS,
        "candidate_policy": EVALUATION_INPUTS,
        "gold_patch": HIDDEN,
    },
    "terminal_task": {
        "checker": EVALUATION_INPUTS,
        "needed_commands": EVALUATION_INPUTS,
        "run_tests": EVALUATION_INPUTS,
        "test_files": EVALUATION_INPUTS,
        "expected_state": HIDDEN,
    },
    "tool_call": {
        "initial_state": EVALUATION_INPUTS,
        "expected_calls": HIDDEN,
        "expected_final_state": HIDDEN,
    },
    "browser_task": {"credentials": EVALUATION_INPUTS, "success_check": HIDDEN},
    "desktop_task": {"success_check": HIDDEN},
    "artifact_task": {"reference_artifact": HIDDEN, "rubric": HIDDEN},
    "multimodal_qa": {"answer": HIDDEN, "rubric": HIDDEN},
    "preference_pair": {"preference": HIDDEN, "rubric": HIDDEN},
}


def write_pack(root: Path, rows: list[dict]) -> Path:
    (root / "manifest.yaml").write_text("id: demo\nversion: 1\n")
    (root / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (root / "hidden" / CHECKS).mkdir(parents=True)
    (root / "hidden" / CHECKS / "test_it.py").write_text("def test_it():\n    pass\n")
    return root


def row(family: str, input: dict, eval: dict) -> dict:
    return {"id": "t1", "family": family, "input": input, "eval": eval}


def test_the_registry_knows_all_twelve_families():
    assert set(FAMILIES) == set(EXPECTED_LANES)
    assert all(FAMILIES[name].name == name for name in FAMILIES)


def test_the_seven_active_families_declare_their_candidate_kind():
    kinds = {name: spec.candidate_kind for name, spec in FAMILIES.items() if spec.active}

    assert kinds == {
        "multiple_choice": "text",
        "short_answer": "text",
        "free_response": "text",
        "code_completion": "code",
        "repo_patch": "patch",
        "terminal_task": "workspace",
        "artifact_task": "artifact",
    }


def test_an_unknown_family_name_gets_a_generic_spec_that_hides_everything():
    spec = get_family("quantum_task")

    assert spec.name == "quantum_task"
    assert spec.active is False and spec.candidate_kind is None
    assert spec.lane_for("checker") == HIDDEN and spec.lane_for("tests") == HIDDEN
    assert spec.validate({"anything": 1}, {"goes": 2}) == []


@pytest.mark.parametrize("family", sorted(EXPECTED_LANES))
def test_lane_for_follows_the_design_table(family):
    spec = get_family(family)

    assert {key: spec.lane_for(key) for key in EXPECTED_LANES[family]} == EXPECTED_LANES[family]
    assert spec.lane_for("not_in_the_table") == HIDDEN


@pytest.mark.parametrize("family", sorted(EXPECTED_LANES))
def test_a_compiled_task_puts_every_resource_in_its_lane(tmp_path, family):
    if family in VALID:
        input, eval = VALID[family]
        expected = dict(EXPECTED_LANES[family])
    else:  # deferred: any keys; an unlisted eval key is hidden
        input = {"goal": "do it", "screenshot": {"path": "x.png"}}
        eval = {key: {"value": key} for key in DEFERRED_EVAL_KEYS[family]} | {"surprise": 1}
        expected = dict(EXPECTED_LANES[family]) | {"surprise": HIDDEN}
    expected |= {key: PUBLIC for key in input}

    task = compile_pack(write_pack(tmp_path, [row(family, input, eval)])).tasks[0]

    assert {r.name: r.lane for r in task.resources} == expected
    assert task.has_verifier is (family in VALID)
    assert task.agent_payload() == input


def test_null_tolerance_and_needed_commands_count_as_absent(tmp_path):
    rows = [
        row("short_answer", {"question": "q"}, {"accepted_answers": ["a"], "tolerance": None}),
        {
            **row(
                "terminal_task",
                {"instructions": "i"},
                {"checker": {"command": "true"}, "needed_commands": None},
            ),
            "id": "t2",
        },
    ]

    assert len(compile_pack(write_pack(tmp_path, rows)).tasks) == 2


def test_a_trusted_file_checker_is_accepted(tmp_path):
    checker = {"source": "script", "path": f"{CHECKS}/test_it.py", "timeout_seconds": 5}
    rows = [row("terminal_task", {"instructions": "i"}, {"checker": checker})]

    task = compile_pack(write_pack(tmp_path, rows)).tasks[0]

    assert task.resources[1].files == (("eval", f"{CHECKS}/test_it.py"),)


FAMILY_ERRORS = [
    # multiple_choice
    ("multiple_choice", {"choices": ["a"]}, {"answer": "A"}, "input.question", "is required"),
    (
        "multiple_choice",
        {"question": " ", "choices": ["a"]},
        {"answer": "A"},
        "input.question",
        "must be a non-empty string",
    ),
    (
        "multiple_choice",
        {"question": "q", "choices": []},
        {"answer": "A"},
        "input.choices",
        "must be a non-empty string array",
    ),
    (
        "multiple_choice",
        {"question": "q", "choices": ["a", ""]},
        {"answer": "A"},
        "input.choices",
        "must contain only non-empty strings",
    ),
    ("multiple_choice", {"question": "q", "choices": ["a"]}, {}, "eval.answer", "is required"),
    (
        "multiple_choice",
        {"question": "q", "choices": ["a"]},
        {"answer": True},
        "eval.answer",
        "must be a non-empty string, number, or string-or-number array",
    ),
    (
        "multiple_choice",
        {"question": "q", "choices": ["a"]},
        {"answer": []},
        "eval.answer",
        "must be a non-empty string, number, or string-or-number array",
    ),
    (
        "multiple_choice",
        {"question": "q", "choices": ["a"], "zeta": 1, "hint": 2},
        {"answer": 0},
        "input",
        "has unknown field(s): hint, zeta",
    ),
    (
        "multiple_choice",
        {"question": "q", "choices": ["a"]},
        {"answer": 0, "why": "x"},
        "eval",
        "has unknown field(s): why",
    ),
    # short_answer
    ("short_answer", {"question": "q"}, {}, "eval.accepted_answers", "is required"),
    (
        "short_answer",
        {"question": "q"},
        {"accepted_answers": []},
        "eval.accepted_answers",
        "must be a non-empty string-or-number array",
    ),
    (
        "short_answer",
        {"question": "q"},
        {"accepted_answers": [True]},
        "eval.accepted_answers",
        "must contain only non-empty strings or numbers",
    ),
    (
        "short_answer",
        {"question": "q"},
        {"accepted_answers": ["a"], "tolerance": -1},
        "eval.tolerance",
        "must be a non-negative number",
    ),
    (
        "short_answer",
        {"question": "q"},
        {"accepted_answers": ["a"], "tolerance": True},
        "eval.tolerance",
        "must be a non-negative number",
    ),
    (
        "short_answer",
        {"question": "q", "answer_format": ""},
        {"accepted_answers": ["a"]},
        "input.answer_format",
        "must be a non-empty string",
    ),
    (
        "short_answer",
        {"question": "q", "context": 5},
        {"accepted_answers": ["a"]},
        "input.context",
        "must be a string or an object",
    ),
    (
        "short_answer",
        {"question": "q"},
        {"accepted_answers": ["a"], "answer": "a"},
        "eval",
        "has unknown field(s): answer",
    ),
    # free_response
    ("free_response", {}, {"rubric": {}}, "input.prompt", "is required"),
    ("free_response", {"prompt": "p"}, {}, "eval.rubric", "is required"),
    (
        "free_response",
        {"prompt": "p"},
        {"rubric": "mentions California"},
        "eval.rubric",
        "must be an object such as {type: contains_any, accepted_answers: [...]}; a string rubric"
        " cannot be verified",
    ),
    ("free_response", {"prompt": "p"}, {"rubric": 5}, "eval.rubric", "must be an object"),
    (
        "free_response",
        {"prompt": "p"},
        {"rubric": {}, "reference_answer": ""},
        "eval.reference_answer",
        "must be a non-empty string",
    ),
    (
        "free_response",
        {"prompt": "p", "context": ""},
        {"rubric": {}},
        "input.context",
        "must be a non-empty string or object",
    ),
    # code_completion
    (
        "code_completion",
        {},
        {"tests": {"source": "inline", "code": "x"}},
        "input.prompt",
        "is required",
    ),
    ("code_completion", {"prompt": "p"}, {}, "eval.tests", "is required"),
    (
        "code_completion",
        {"prompt": "p"},
        {"tests": "assert f()"},
        "eval.tests",
        "must be an object",
    ),
    (
        "code_completion",
        {"prompt": "p"},
        {"tests": {"source": "file", "code": "x"}},
        "eval.tests.source",
        "must be 'inline'",
    ),
    (
        "code_completion",
        {"prompt": "p"},
        {"tests": {"source": "inline"}},
        "eval.tests.code",
        "is required",
    ),
    (
        "code_completion",
        {"prompt": "p"},
        {"tests": {"source": "inline", "code": " "}},
        "eval.tests.code",
        "must be a non-empty string",
    ),
    (
        "code_completion",
        {"prompt": "p"},
        {"tests": {"source": "inline", "code": "x", "path": "t"}},
        "eval.tests",
        "has unknown field(s): path",
    ),
    (
        "code_completion",
        {"prompt": "p"},
        {"tests": {"source": "inline", "code": "x"}, "timeout_seconds": 5},
        "eval",
        "has unknown field(s): timeout_seconds",
    ),
    (
        "code_completion",
        {"prompt": "p", "starter_code": 5},
        {"tests": {"source": "inline", "code": "x"}},
        "input.starter_code",
        "must be a string",
    ),
    (
        "code_completion",
        {"prompt": "p", "language": ""},
        {"tests": {"source": "inline", "code": "x"}},
        "input.language",
        "must be a non-empty string",
    ),
    (
        "code_completion",
        {"prompt": "p"},
        {"tests": {"source": "inline", "code": "x"}, "canonical_solution": 5},
        "eval.canonical_solution",
        "must be a string",
    ),
]

RP_INPUT = {"repo": "r", "base_commit": "abc", "instructions": "i"}
RP_TESTS = {"source": "command", "command": ["pytest"]}
FAMILY_ERRORS += [
    (
        "repo_patch",
        {"base_commit": "abc", "instructions": "i"},
        {"tests": RP_TESTS},
        "input.repo",
        "is required",
    ),
    (
        "repo_patch",
        RP_INPUT | {"base_commit": ""},
        {"tests": RP_TESTS},
        "input.base_commit",
        "must be a non-empty string",
    ),
    (
        "repo_patch",
        RP_INPUT | {"hints": ""},
        {"tests": RP_TESTS},
        "input.hints",
        "must be a non-empty string",
    ),
    ("repo_patch", RP_INPUT, {}, "eval.tests", "is required"),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"source": "inline"}},
        "eval.tests.source",
        "must be 'command'",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"command": "pytest"}},
        "eval.tests.command",
        "must be a non-empty string array",
    ),
    ("repo_patch", RP_INPUT, {"tests": {"source": "command"}}, "eval.tests.command", "is required"),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"workdir": ""}},
        "eval.tests.workdir",
        "must be a non-empty string",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"timeout_seconds": -1}},
        "eval.tests.timeout_seconds",
        "must be a non-negative number",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"setup_patch": ""}},
        "eval.tests.setup_patch",
        "must be a non-empty string or an object {source: inline, patch: ...}",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"test_patch": {"source": "inline"}}},
        "eval.tests.test_patch.patch",
        "is required",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"test_patch": {"source": "url", "patch": "x"}}},
        "eval.tests.test_patch.source",
        "must be 'inline'",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"test_patch": {"source": "inline", "patch": "x", "sha": "1"}}},
        "eval.tests.test_patch",
        "has unknown field(s): sha",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS | {"path": "t"}},
        "eval.tests",
        "has unknown field(s): path",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS, "candidate_policy": "strict"},
        "eval.candidate_policy",
        "must be an object",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS, "candidate_policy": {"allow_paths": "src"}},
        "eval.candidate_policy.allow_paths",
        "must be a string array",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS, "candidate_policy": {"allow_paths": [""]}},
        "eval.candidate_policy.allow_paths",
        "must contain only non-empty strings",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS, "candidate_policy": {"deny_paths": []}},
        "eval.candidate_policy",
        "has unknown field(s): deny_paths",
    ),
    (
        "repo_patch",
        RP_INPUT,
        {"tests": RP_TESTS, "gold_patch": 5},
        "eval.gold_patch",
        "must be a string",
    ),
]

TT_INPUT = {"instructions": "i"}
FILE_CHECKER = {"source": "pytest", "path": CHECKS}
FAMILY_ERRORS += [
    ("terminal_task", {}, {"checker": FILE_CHECKER}, "input.instructions", "is required"),
    (
        "terminal_task",
        TT_INPUT | {"context": 5},
        {"checker": FILE_CHECKER},
        "input.context",
        "must be a string or an object",
    ),
    ("terminal_task", TT_INPUT, {}, "eval.checker", "is required"),
    ("terminal_task", TT_INPUT, {"checker": "pytest"}, "eval.checker", "must be an object"),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"timeout_seconds": 5}},
        "eval.checker",
        "must be a command checker {command, workdir?, timeout_seconds?} or a trusted-file checker"
        " {source: pytest|script, path, timeout_seconds?}",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"command": ""}},
        "eval.checker.command",
        "must be a non-empty string or a non-empty string array",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"command": []}},
        "eval.checker.command",
        "must be a non-empty string or a non-empty string array",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"command": "x", "workdir": ""}},
        "eval.checker.workdir",
        "must be a non-empty string",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"command": "x", "timeout_seconds": 0}},
        "eval.checker.timeout_seconds",
        "must be a positive number",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"command": "x", "path": "y"}},
        "eval.checker",
        "has unknown field(s): path",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"source": "shell", "path": CHECKS}},
        "eval.checker.source",
        "must be 'pytest' or 'script'",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": {"source": "pytest"}},
        "eval.checker.path",
        "is required",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER | {"timeout_seconds": -5}},
        "eval.checker.timeout_seconds",
        "must be a positive number",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER | {"workdir": "/app"}},
        "eval.checker",
        "has unknown field(s): workdir",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER, "run_tests": "run.sh"},
        "eval.run_tests",
        "must be an object",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER, "test_files": ["a"]},
        "eval.test_files",
        "must be an object",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER, "needed_commands": "chroot"},
        "eval.needed_commands",
        "must be a list of known dangerous command names",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER, "needed_commands": [""]},
        "eval.needed_commands[0]",
        "must be a non-empty dangerous command name",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER, "needed_commands": ["chroot", "mount"]},
        "eval.needed_commands[1]",
        "must be one of: chroot",
    ),
    (
        "terminal_task",
        TT_INPUT,
        {"checker": FILE_CHECKER, "oracle": "x"},
        "eval",
        "has unknown field(s): oracle",
    ),
    ("artifact_task", {}, {}, "input.instructions", "is required"),
    (
        "artifact_task",
        {"instructions": "i"},
        {"reference_artifact": "out.txt"},
        "eval.reference_artifact",
        "must be a file reference {path} or a non-empty {path: text} map",
    ),
    (
        "artifact_task",
        {"instructions": "i"},
        {"reference_artifact": {"../out.txt": "x"}},
        "eval.reference_artifact.../out.txt",
        "path '../out.txt' escapes the workspace",
    ),
    (
        "artifact_task",
        {"instructions": "i"},
        {"reference_artifact": {"out.txt": 3}},
        "eval.reference_artifact.out.txt",
        "must be the file's text (a string)",
    ),
]


def test_an_artifact_reference_may_be_a_folder_under_the_eval_root(tmp_path):
    eval = {"reference_artifact": {"path": "refs/t1"}, "rubric": "complete"}
    pack = write_pack(tmp_path, [row("artifact_task", {"instructions": "i"}, eval)])
    (pack / "hidden" / "refs" / "t1").mkdir(parents=True)
    (pack / "hidden" / "refs" / "t1" / "predictions.jsonl").write_text('{"id": 1}\n')

    task = compile_pack(pack).tasks[0]

    (reference,) = [r for r in task.resources if r.name == "reference_artifact"]
    assert (reference.lane, reference.kind) == (HIDDEN, "directory")
    assert reference.files == (("eval", "refs/t1/predictions.jsonl"),)


@pytest.mark.parametrize(("family", "input", "eval", "field", "message"), FAMILY_ERRORS)
def test_an_active_family_rejects_a_bad_field(tmp_path, family, input, eval, field, message):
    pack = write_pack(tmp_path, [row(family, input, eval)])

    with pytest.raises(PackError) as caught:
        compile_pack(pack)

    problems = caught.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    assert (problems[0].file, problems[0].line, problems[0].field) == ("tasks.jsonl", 1, field)
    assert problems[0].message == f"{message} (task 't1', {family})"


def test_a_family_problem_reads_as_one_sentence(tmp_path):
    bad = row("multiple_choice", {"question": "q", "choices": ["a"]}, {"answer": ""})
    pack = write_pack(tmp_path, [])
    (pack / "tasks.jsonl").write_text("\n\n" + json.dumps(bad) + "\n")

    with pytest.raises(PackError) as caught:
        compile_pack(pack)

    assert str(caught.value) == (
        "tasks.jsonl, line 3, field eval.answer: must be a non-empty string, number, or"
        " string-or-number array (task 't1', multiple_choice)"
    )


@pytest.mark.parametrize("family", sorted(DEFERRED_EVAL_KEYS))
def test_a_deferred_family_accepts_any_keys_and_warns_that_tasks_stay_pending(tmp_path, family):
    rows = [row(family, {"free": {"form": [1]}}, {"whatever": "x"})]

    pack = compile_pack(write_pack(tmp_path, rows))

    assert pack.tasks[0].has_verifier is False
    assert pack.report["warnings"] == [
        f"family '{family}' has no verifier yet; its 1 task(s) will stay pending"
    ]


def test_an_unknown_family_compiles_with_a_warning_and_hidden_eval(tmp_path):
    rows = [row("quantum_task", {"goal": "g"}, {"checker": {"command": "x"}, "tests": "t"})]

    pack = compile_pack(write_pack(tmp_path, rows))

    task = pack.tasks[0]
    assert task.has_verifier is False
    assert {r.name: r.lane for r in task.resources} == {
        "goal": PUBLIC,
        "checker": HIDDEN,
        "tests": HIDDEN,
    }
    assert pack.report["warnings"] == [
        "family 'quantum_task' is not a known family; its tasks have no verifier and every eval"
        " key is hidden"
    ]
    assert pack.report["family_counts"] == {"quantum_task": 1}
