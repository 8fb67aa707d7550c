"""terminal_task: change a workspace until a trusted checker passes (spec §3.6, §4.6)."""

from __future__ import annotations

from typing import Any

from verifiers.families.base import (
    FamilySpec,
    Field,
    FieldProblem,
    any_value,
    is_non_empty_string,
    json_object,
    non_empty_string,
    non_empty_string_or_string_array,
    one_of,
    positive_number,
    strict_object,
    string_or_object,
)
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN

# Commands a checker may ask extra sandbox rights for (spec §4.6.3).
DANGEROUS_COMMANDS = ("chroot",)
CHECKER_SOURCES = ("pytest", "script")

COMMAND_CHECKER = strict_object(
    {
        "command": Field(non_empty_string_or_string_array, required=True),
        "workdir": Field(non_empty_string),
        "timeout_seconds": Field(positive_number),
    }
)

# The recommended form: trusted checker files under the eval root, never in the workspace.
FILE_CHECKER = strict_object(
    {
        "source": Field(one_of(*CHECKER_SOURCES), required=True),
        "path": Field(non_empty_string, required=True),
        "timeout_seconds": Field(positive_number),
    }
)


def checker(value: Any, path: str) -> list[FieldProblem]:
    # Both historical forms exist in real packs; the presence of `command` picks the form.
    if not isinstance(value, dict):
        return [(path, "must be an object")]
    if "command" in value:
        return COMMAND_CHECKER(value, path)
    if "source" in value or "path" in value:
        return FILE_CHECKER(value, path)
    return [
        (
            path,
            "must be a command checker {command, workdir?, timeout_seconds?} or a"
            " trusted-file checker {source: pytest|script, path, timeout_seconds?}",
        )
    ]


def needed_commands(value: Any, path: str) -> list[FieldProblem]:
    if not isinstance(value, list):
        return [(path, "must be a list of known dangerous command names")]
    problems: list[FieldProblem] = []
    for index, item in enumerate(value):
        item_path = f"{path}[{index}]"
        if not is_non_empty_string(item):
            problems.append((item_path, "must be a non-empty dangerous command name"))
        elif item not in DANGEROUS_COMMANDS:
            problems.append((item_path, "must be one of: " + ", ".join(DANGEROUS_COMMANDS)))
    return problems


def checker_file_path(value: Any) -> str | None:
    """The eval-root path a trusted-file checker runs, so its files travel with it."""
    if (
        isinstance(value, dict)
        and "command" not in value
        and value.get("source") in CHECKER_SOURCES
    ):
        path = value.get("path")
        return path if is_non_empty_string(path) else None
    return None


SPEC = FamilySpec(
    name="terminal_task",
    active=True,
    candidate_kind="workspace",
    eval_lanes={
        "checker": EVALUATION_INPUTS,
        "needed_commands": EVALUATION_INPUTS,
        "run_tests": EVALUATION_INPUTS,
        "test_files": EVALUATION_INPUTS,
        "expected_state": HIDDEN,
    },
    input_fields={
        "instructions": Field(non_empty_string, required=True),
        "context": Field(string_or_object),
    },
    eval_fields={
        "checker": Field(checker, required=True),
        "run_tests": Field(json_object),
        "test_files": Field(json_object),
        # Documentation only: no verifier reads it, so any value is fine.
        "expected_state": Field(any_value),
        "needed_commands": Field(needed_commands, nullable=True),
    },
    eval_file_paths={"checker": checker_file_path},
)
