"""The tools of a live workspace as an agent sees them (tools/list) and the checks on what it
sends: numbers where the schema says number or integer, within bounds, and nothing else."""

from __future__ import annotations

import math

import pytest

from episodes.tools import ArgumentProblem, check_arguments, family_tools

pytestmark = pytest.mark.database_independent


def tools_of(family: str) -> dict[str, object]:
    return {tool.name: tool for tool in family_tools(family)}


@pytest.mark.parametrize("family", ["terminal_task", "repo_patch", "artifact_task"])
def test_workspace_families_get_the_workspace_tools(family):
    tools = tools_of(family)
    assert list(tools) == ["bash", "read_file", "write_file", "list_files", "wait", "final_step"]
    for name in ("bash", "read_file", "write_file", "list_files"):
        description = tools[name].description
        # The agent must know what survives a step, and that it is offline.
        assert "files persist between steps, processes do not" in description
        assert "no network" in description


def test_other_families_keep_their_tools():
    assert list(tools_of("multiple_choice")) == ["submit_answer", "final_step"]
    assert list(tools_of("code_completion")) == ["run_python", "submit_code", "final_step"]


def test_bash_takes_a_number_of_seconds_within_bounds():
    bash = tools_of("terminal_task")["bash"]
    assert check_arguments(bash, {"command": "true", "timeout": 5}) == {
        "command": "true",
        "timeout": 5,
    }
    assert check_arguments(bash, {"command": "true", "timeout": 2.5})["timeout"] == 2.5
    for bad in (True, "5", None, [5], math.nan, math.inf, 0, -1, 10**9, 10**400, -(10**400)):
        with pytest.raises(ArgumentProblem):
            check_arguments(bash, {"command": "true", "timeout": bad})


def test_read_file_takes_whole_numbers_only():
    read = tools_of("repo_patch")["read_file"]
    assert check_arguments(read, {"path": "a.txt", "offset": 3.0, "limit": 2}) == {
        "path": "a.txt",
        "offset": 3,
        "limit": 2,
    }
    for bad in (2.5, False, "3", -1, 10**400, 2**53 + 1):
        with pytest.raises(ArgumentProblem):
            check_arguments(read, {"path": "a.txt", "offset": bad})


def test_strings_stay_strings_and_unknown_or_missing_names_are_refused():
    tools = tools_of("terminal_task")
    with pytest.raises(ArgumentProblem, match="must be a string"):
        check_arguments(tools["write_file"], {"path": "a", "content": 7})
    with pytest.raises(ArgumentProblem, match="NUL"):
        check_arguments(tools["write_file"], {"path": "a\x00b", "content": ""})
    with pytest.raises(ArgumentProblem, match="needs the argument 'command'"):
        check_arguments(tools["bash"], {"timeout": 3})
    with pytest.raises(ArgumentProblem, match="takes no argument 'cwd'"):
        check_arguments(tools["bash"], {"command": "ls", "cwd": "/"})
    assert check_arguments(tools["list_files"], None) == {}
    assert check_arguments(tools["wait"], {}) == {}
