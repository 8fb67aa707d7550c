"""terminal_task verification in real sandboxes (bwrap and Docker), spec §4.6."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import reference_packs_or_skip
from tests.verifiers import test_repo_patch as repo_tests
from verifiers.families import terminal_task
from verifiers.sandbox import Sandbox
from verifiers.task import Candidate, TaskFile, TaskLanes, WorkspaceFile
from verifiers.verdict import Reason

EXAMPLES = repo_tests.EXAMPLES
sandbox = repo_tests.sandbox  # the same backend-parametrized fixture
CHECK_OUTPUT = (
    "from pathlib import Path\n\n\n"
    "def test_output_file():\n"
    "    assert Path('output.txt').read_text() == 'hello\\n'\n\n\n"
    "class TestMore:\n"
    "    def test_not_empty(self):\n"
    "        assert Path('output.txt').stat().st_size > 0\n"
)


def files_under(root: Path, prefix: str) -> tuple[TaskFile, ...]:
    return tuple(
        TaskFile(p.relative_to(root).as_posix(), p)
        for p in sorted((root / prefix).rglob("*"))
        if p.is_file()
    )


def terminal_lanes(
    checker: dict[str, Any],
    *,
    files: dict[str, tuple[TaskFile, ...]] | None = None,
    expected_state: Any = None,
    needed_commands: list[str] | None = None,
    public: dict[str, Any] | None = None,
    workdir: str = "/workspace",
) -> TaskLanes:
    evaluation_inputs: dict[str, Any] = {"checker": checker}
    if needed_commands is not None:
        evaluation_inputs["needed_commands"] = needed_commands
    hidden = {"expected_state": expected_state} if expected_state is not None else {}
    return TaskLanes(
        task_id="t/terminal",
        family="terminal_task",
        public={"instructions": "do it", **(public or {})},
        evaluation_inputs=evaluation_inputs,
        hidden=hidden,
        environment={"image": "python:3.12-slim", "workdir": workdir, "timeout_seconds": 60},
        files=files or {},
    )


def pytest_task(tmp_path: Path, source: str = CHECK_OUTPUT, **kwargs: Any) -> TaskLanes:
    hidden = tmp_path / "hidden"
    (hidden / "out/tests").mkdir(parents=True)
    (hidden / "out/tests/test_output.py").write_text(source)
    checker = {"source": "pytest", "path": "out/tests"}
    return terminal_lanes(checker, files={"checker": files_under(hidden, "out")}, **kwargs)


def test_a_pytest_checker_passes_the_oracle_and_fails_null(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    task = pytest_task(tmp_path, expected_state={"path": "output.txt", "content": "hello\n"})
    good = terminal_task.verify(
        task, Candidate.of_workspace({"output.txt": "hello\n"}), sandbox=sandbox
    )
    assert good.status == "passed", (good.reason, good.details, good.stderr)
    assert good.details["tests_passed"] == 2
    empty = terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox)
    assert empty.reason == Reason.TESTS_FAILED


def test_expected_state_is_compared_exactly(sandbox: Sandbox, tmp_path: Path) -> None:
    # The checker is lenient; the hidden expected_state is not.
    lenient = "def test_anything():\n    assert True\n"
    task = pytest_task(tmp_path, lenient, expected_state={"path": "output.txt", "content": "hi\n"})
    wrong = terminal_task.verify(
        task, Candidate.of_workspace({"output.txt": "hi"}), sandbox=sandbox
    )
    assert wrong.reason == Reason.WRONG_ANSWER
    missing = terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox)
    assert missing.reason == Reason.WRONG_ANSWER


def test_a_script_checker_gets_test_dir(sandbox: Sandbox, tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    (hidden / "s/tests").mkdir(parents=True)
    (hidden / "s/tests/expected.txt").write_text("hello\n")
    (hidden / "s/run.sh").write_text('cmp "$TEST_DIR/expected.txt" output.txt\n')
    task = terminal_lanes(
        {"source": "script", "path": "s/run.sh"}, files={"checker": files_under(hidden, "s")}
    )
    good = terminal_task.verify(
        task, Candidate.of_workspace({"output.txt": "hello\n"}), sandbox=sandbox
    )
    assert good.status == "passed", (good.details, good.stderr)
    bad = terminal_task.verify(
        task, Candidate.of_workspace({"output.txt": "bye\n"}), sandbox=sandbox
    )
    assert bad.reason == Reason.TESTS_FAILED


@pytest.mark.parametrize(
    "command", ["test -f build/VERSION", ["sh", "-c", "test -f build/VERSION"]]
)
def test_command_checkers_in_both_shapes(sandbox: Sandbox, command: str | list[str]) -> None:
    task = terminal_lanes({"command": command, "workdir": "/workspace"})
    good = terminal_task.verify(
        task, Candidate.of_workspace({"build/VERSION": "1\n"}), sandbox=sandbox
    )
    assert good.status == "passed", (good.details, good.stderr)
    assert (
        terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox).status == "failed"
    )


def test_a_file_where_the_checkers_folder_goes_fails_the_candidate(sandbox: Sandbox) -> None:
    task = terminal_lanes({"command": "test -f VERSION", "workdir": "/workspace/build"})

    blocked = terminal_task.verify(
        task, Candidate.of_workspace({"build": "not a folder\n"}), sandbox=sandbox
    )
    good = terminal_task.verify(
        task, Candidate.of_workspace({"build/VERSION": "1\n"}), sandbox=sandbox
    )

    assert (blocked.status, blocked.reason) == ("failed", Reason.TESTS_FAILED), blocked.details
    assert "the checker's folder /workspace/build cannot be made" in blocked.details["message"]
    assert good.status == "passed", (good.details, good.stderr)


def asset_lanes(tmp_path: Path, checker: str, asset: dict[str, Any]) -> TaskLanes:
    """One asset folder (``notes/readme.txt``) laid out as ``asset`` says."""
    source = tmp_path / "assets"
    (source / asset["path"]).mkdir(parents=True)
    (source / asset["path"] / "readme.txt").write_text("trusted notes\n")
    return terminal_lanes(
        {"command": checker},
        public={"assets": [asset]},
        files={"assets": files_under(source, asset["path"])},
    )


def test_a_file_where_a_read_only_assets_folder_goes_gives_way_to_the_trusted_copy(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # The live workspace lets an agent rename the folder above a read-only mount and put a
    # file in its place; the trusted copy is restored over it, as over any change to it.
    task = asset_lanes(
        tmp_path,
        "grep -q trusted ref/notes/readme.txt && test -f answer.txt",
        {"path": "notes", "mount": "ref/notes", "read_only": True},
    )
    candidate = {"ref": "a file\n", "moved/notes/readme.txt": "agent's\n", "answer.txt": "1\n"}

    verdict = terminal_task.verify(task, Candidate.of_workspace(candidate), sandbox=sandbox)

    assert verdict.status == "passed", (verdict.status, verdict.reason, verdict.details)


def test_a_file_where_a_writable_assets_folder_was_is_the_candidates_layout(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    task = asset_lanes(
        tmp_path, "test -f scratch/readme.txt", {"path": "scratch", "read_only": False}
    )

    replaced = terminal_task.verify(
        task, Candidate.of_workspace({"scratch": "a file\n"}), sandbox=sandbox
    )
    kept = terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox)

    assert (replaced.status, replaced.reason) == ("failed", Reason.TESTS_FAILED), replaced.details
    assert kept.status == "passed", (kept.details, kept.stderr)


def test_executable_bits_survive(sandbox: Sandbox) -> None:
    task = terminal_lanes({"command": ["./run.sh"]})
    script = WorkspaceFile(b"#!/bin/sh\nexit 0\n", mode=0o755)
    verdict = terminal_task.verify(
        task, Candidate.of_workspace({"run.sh": script}), sandbox=sandbox
    )
    assert verdict.status == "passed", (verdict.details, verdict.stderr)


def example_task(row: dict[str, Any]) -> TaskLanes:
    pack = EXAMPLES / "terminal-files"
    files: dict[str, tuple[TaskFile, ...]] = {}
    if "path" in row["eval"]["checker"]:
        files["checker"] = files_under(pack / "hidden", row["eval"]["checker"]["path"])
    public = dict(row["input"])
    if row.get("assets"):
        public["assets"] = row["assets"]
        files["assets"] = tuple(
            f for a in row["assets"] for f in files_under(pack / "assets", a["path"])
        )
    return TaskLanes(
        task_id=row["id"],
        family="terminal_task",
        public=public,
        evaluation_inputs={"checker": row["eval"]["checker"]},
        hidden={"expected_state": row["eval"]["expected_state"]},
        environment={"image": "python:3.12-slim", "workdir": "/workspace", "timeout_seconds": 60},
        files=files,
    )


def oracle_workspace(task_id: str) -> dict[str, bytes | str]:
    logs = EXAMPLES / "terminal-files/assets/organise-logs/logs"
    return {
        "terminal-files/organise-logs": {
            **{f"logs/{p.name}": p.read_bytes() for p in logs.iterdir()},
            "summary.csv": "date,errors,warnings\n2025-02-28,3,1\n2025-03-01,2,1\n2025-03-02,0,2\n",
        },
        "terminal-files/json-config": {
            "config/settings.json": json.dumps(
                {
                    "service": "inventory",
                    "port": 8080,
                    "debug": False,
                    "allowed_hosts": ["localhost", "127.0.0.1"],
                }
            )
            + "\n",
        },  # fmt: skip
        "terminal-files/version-file": {"build/VERSION": "1.4.2\n"},
    }[task_id]


@pytest.mark.parametrize("index", range(3))
def test_example_pack_oracle_passes_and_null_fails(sandbox: Sandbox, index: int) -> None:
    lines = (EXAMPLES / "terminal-files/tasks.jsonl").read_text().splitlines()
    row = json.loads(lines[index])
    task = example_task(row)
    oracle = Candidate.of_workspace(oracle_workspace(row["id"]))
    verdict = terminal_task.verify(task, oracle, sandbox=sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
    null = terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox)
    assert null.status == "failed"


def test_json_expected_state_needs_exact_types(sandbox: Sandbox) -> None:
    row = json.loads((EXAMPLES / "terminal-files/tasks.jsonl").read_text().splitlines()[1])
    task = example_task(row)
    # "port": "8080" fails the checker too; 8080.0 is the subtle one the checker's own
    # type check also catches — expected_state must agree on its own.
    loose = '{"service": "inventory", "port": 8080.0, "debug": false, "allowed_hosts": ["localhost", "127.0.0.1"]}\n'  # noqa: E501
    verdict = terminal_task.verify(
        task, Candidate.of_workspace({"config/settings.json": loose}), sandbox=sandbox
    )
    assert verdict.status == "failed"
    assert terminal_task.json_equal({"a": [1, True]}, {"a": [1, True]})
    assert not terminal_task.json_equal({"a": 1}, {"a": True})
    assert not terminal_task.json_equal({"a": 1}, {"a": 1.0})


def test_reference_pack_terminal_task_smoke(sandbox: Sandbox) -> None:
    """The reference packs' terminal task, an extra layer over examples/terminal-files."""
    reference = reference_packs_or_skip() / "terminal-task-smoke"
    row = json.loads((reference / "tasks.jsonl").read_text().splitlines()[0])
    task = terminal_lanes(
        row["eval"]["checker"],
        files={"checker": files_under(reference / "hidden", row["eval"]["checker"]["path"])},
        expected_state=row["eval"]["expected_state"],
    )
    oracle = Candidate.of_workspace({"output.txt": "securebench terminal task\n"})
    verdict = terminal_task.verify(task, oracle, sandbox=sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
    assert (
        terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox).status == "failed"
    )


def test_expected_tests_are_read_from_the_trusted_files(tmp_path: Path) -> None:
    task = pytest_task(tmp_path)
    expected = terminal_task.expected_tests(list(task.files["checker"]), "out/tests")
    assert expected == {
        ("evaluator.out.tests.test_output", "test_output_file"),
        ("evaluator.out.tests.test_output.TestMore", "test_not_empty"),
    }


def test_a_misconfigured_checker_is_an_error_not_a_failure() -> None:
    task = terminal_lanes({"source": "pytest", "path": "../escape"})
    verdict = terminal_task.verify(task, Candidate.of_workspace({}))
    assert verdict.status == "error"
    assert verdict.reason == Reason.TASK_MISCONFIGURED


# --- a Python image's commands on both backends (host stand-ins on bwrap) --------------------

PYTHON_CHECK = "import pathlib, sys; sys.exit(pathlib.Path('output.txt').read_text() != 'hello\\n')"


def test_a_checker_running_python_works_on_both_backends(sandbox: Sandbox) -> None:
    task = terminal_lanes({"command": ["python", "-c", PYTHON_CHECK]})
    good = terminal_task.verify(
        task, Candidate.of_workspace({"output.txt": "hello\n"}), sandbox=sandbox
    )
    assert good.status == "passed", (good.reason, good.details, good.stderr)
    bad = terminal_task.verify(
        task, Candidate.of_workspace({"output.txt": "bye\n"}), sandbox=sandbox
    )
    assert (bad.status, bad.reason) == ("failed", Reason.TESTS_FAILED), bad.stderr
    for verdict in (good, bad):
        standins = [n for n in verdict.details["notes"] if "stood in" in n]
        if sandbox.name == "bwrap":  # the result says the image did not run, and what did
            assert len(standins) == 1, verdict.details["notes"]
            assert standins[0].startswith("image python:3.12-slim not used (bwrap): python → ")
            assert verdict.details["sandbox_standins"] == standins
        else:  # Docker runs the image itself
            assert standins == [] and "sandbox_standins" not in verdict.details


def test_a_script_checker_finds_pytest_and_python_on_both_backends(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    hidden = tmp_path / "hidden"
    (hidden / "s").mkdir(parents=True)
    (hidden / "s/run.sh").write_text(
        "set -e\npytest --version\npython3 -m pytest --version\npython -c 'print(1)'\n"
    )
    task = terminal_lanes(
        {"source": "script", "path": "s/run.sh"}, files={"checker": files_under(hidden, "s")}
    )
    verdict = terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
