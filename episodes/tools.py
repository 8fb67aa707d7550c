"""What an agent may do in an episode, per family: the tools it is shown and the checks on
the arguments it sends.

Text families answer with ``submit_answer``; ``code_completion`` may also ``run_python`` (its
own code, alone in a sandbox) before ``submit_code``; workspace families (``terminal_task``,
``repo_patch``, and ``artifact_task``, whose artifact is the files the agent made in its
workspace) act in a live workspace with ``bash``, ``read_file``, ``write_file``,
``list_files`` and ``wait``; every family can end with ``final_step``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from episodes import wire
from verifiers.families import get_family

STOP = "final_step"
SUBMIT_ANSWER = "submit_answer"
SUBMIT_CODE = "submit_code"
RUN_PYTHON = "run_python"
BASH = "bash"
READ_FILE = "read_file"
WRITE_FILE = "write_file"
LIST_FILES = "list_files"
WAIT = "wait"
# Tools that act on the episode's workspace, each in a fresh sandbox on a worker.
WORKSPACE_ACTIONS = frozenset({BASH, READ_FILE, WRITE_FILE, LIST_FILES})
TEXT_FAMILIES = frozenset({"multiple_choice", "short_answer", "free_response"})
# Candidate kinds built from a live workspace at final_step: its files (workspace), its diff
# against the base commit (patch), or the files the agent created or changed (artifact).
WORKSPACE_KINDS = frozenset({"workspace", "patch", "artifact"})
MAX_ARGUMENT_CHARS = 1024 * 1024
MAX_MAGNITUDE = 2**53  # every number a float holds exactly


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    # The candidate kind a call of this tool submits (None: the tool submits nothing).
    submits: str | None = None

    def schema(self) -> dict[str, Any]:
        return wire.action_schema(self.name, self.description, self.parameters)


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


FINAL_STEP = Tool(
    name=STOP,
    description=(
        "Stop the task execution. Your last submission is frozen and scored; the reward "
        "comes back in this step's answer (or from cube/evaluate once scored)."
    ),
    parameters={"type": "object", "properties": {}},
)
SUBMIT_ANSWER_TOOL = Tool(
    name=SUBMIT_ANSWER,
    description=(
        "Record your answer. You may submit again to replace it; the last one submitted "
        "before final_step is scored. For multiple-choice questions answer with the letter."
    ),
    parameters=_object(
        {"answer": {"type": "string", "description": "Your answer, as text."}}, ["answer"]
    ),
    submits="text",
)
SUBMIT_CODE_TOOL = Tool(
    name=SUBMIT_CODE,
    description=(
        "Record your solution: the complete Python module, with the function(s) the task "
        "asks for. You may submit again; the last one before final_step is scored by hidden "
        "tests."
    ),
    parameters=_object(
        {"code": {"type": "string", "description": "The complete Python source."}}, ["code"]
    ),
    submits="code",
)
RUN_PYTHON_TOOL = Tool(
    name=RUN_PYTHON,
    description=(
        "Run Python code and see what it prints. It runs alone in a fresh sandbox: no task "
        "files, no tests, no network, a few seconds of time, capped output; nothing persists "
        "between calls."
    ),
    parameters=_object(
        {
            "code": {"type": "string", "description": "Python source to run as a script."},
            "stdin": {"type": "string", "description": "Text given on standard input."},
        },
        ["code"],
    ),
)


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count} bytes"


def workspace_rules() -> str:
    """What every workspace tool shares, said once in each description (and in the first
    observation): the agent must know that processes die with the step."""
    return (
        "Paths are relative to the workspace root; '..', absolute paths and links that leave "
        "the workspace are refused. Each call runs in a fresh sandbox over your workspace: "
        "files persist between steps, processes do not (nothing you start survives the "
        "step), and there is no network. The workspace holds at most "
        f"{_size(settings.SECUREBENCH_EPISODE_WORKSPACE_BYTES)} and "
        f"{settings.SECUREBENCH_EPISODE_WORKSPACE_FILES:,} files more than it started with; a "
        "step that would go past either is discarded and the workspace stays as it was."
    )


def _bash_tool() -> Tool:
    default = settings.SECUREBENCH_EPISODE_COMMAND_SECONDS
    longest = settings.SECUREBENCH_EPISODE_COMMAND_MAX_SECONDS
    return Tool(
        name=BASH,
        description=(
            "Run a bash command in the workspace (its root is the working directory) and see "
            "its exit code, standard output and standard error (each capped, head and tail "
            f"kept). It runs up to `timeout` seconds (default {default:g}, at most "
            f"{longest:g}, never past the task's wall-time budget), with limited memory and "
            "processes. A command still running when this answer is due keeps running: the "
            "answer shows its output so far with info.running = true, and `wait` (or your "
            "next call) returns the rest. " + workspace_rules()
        ),
        parameters=_object(
            {
                "command": {"type": "string", "description": "The bash command to run."},
                "timeout": {
                    "type": "number",
                    "minimum": 1,
                    "maximum": longest,
                    "description": f"Seconds before it is stopped (default {default:g}).",
                },
            },
            ["command"],
        ),
    )


def _read_file_tool() -> Tool:
    return Tool(
        name=READ_FILE,
        description=(
            "Read a text file of the workspace. `offset` (how many lines to skip: 0 starts at "
            "the first line) and `limit` (how many lines) read a part of a long file; a large "
            "read is cut at a size limit and says so. " + workspace_rules()
        ),
        parameters=_object(
            {
                "path": {"type": "string", "description": "The file, relative to the workspace."},
                "offset": {"type": "integer", "minimum": 0, "description": "Lines to skip."},
                "limit": {"type": "integer", "minimum": 1, "description": "Lines to read."},
            },
            ["path"],
        ),
    )


def _write_file_tool() -> Tool:
    return Tool(
        name=WRITE_FILE,
        description=(
            "Create or replace a file of the workspace with the given text (folders are "
            "created as needed). " + workspace_rules()
        ),
        parameters=_object(
            {
                "path": {"type": "string", "description": "The file, relative to the workspace."},
                "content": {"type": "string", "description": "The file's whole new content."},
            },
            ["path", "content"],
        ),
    )


def _list_files_tool() -> Tool:
    return Tool(
        name=LIST_FILES,
        description=(
            "List the files and folders under a folder of the workspace (the whole workspace "
            "by default), with sizes. " + workspace_rules()
        ),
        parameters=_object(
            {"path": {"type": "string", "description": "A folder, relative to the workspace."}},
            [],
        ),
    )


WAIT_TOOL = Tool(
    name=WAIT,
    description=(
        "Wait for the command that is still running (an earlier answer said "
        "info.running = true) and see the rest of its output; it waits a few seconds at most "
        "and says if the command is still running."
    ),
    parameters={"type": "object", "properties": {}},
)
WORKSPACE_FINAL_STEP = Tool(
    name=STOP,
    description=(
        "Stop the task execution: the workspace as it stands is your answer (for a "
        "repository, its diff against the base commit). Changes outside the contract's "
        "allowed paths, or to read-only paths, fail the task. It is scored in a separate "
        "sandbox; the reward comes back in this step's answer (or from cube/evaluate)."
    ),
    parameters={"type": "object", "properties": {}},
)
ARTIFACT_FINAL_STEP = Tool(
    name=STOP,
    description=(
        "Stop the task execution: the files you created or changed in the workspace are your "
        "artifact (the task's files as they were given to you are not part of it, unless you "
        "changed them; links are not files and are left out). Each is checked against the "
        "contract's required outputs (presence, format, schema, size); a missing or "
        "malformed output, or a change outside the allowed paths, fails the task. The "
        "reward comes back in this step's answer (or from cube/evaluate)."
    ),
    parameters={"type": "object", "properties": {}},
)


def is_workspace_family(family: str) -> bool:
    return get_family(family).candidate_kind in WORKSPACE_KINDS


def family_tools(family: str) -> list[Tool]:
    if family in TEXT_FAMILIES:
        return [SUBMIT_ANSWER_TOOL, FINAL_STEP]
    if family == "code_completion":
        return [RUN_PYTHON_TOOL, SUBMIT_CODE_TOOL, FINAL_STEP]
    if is_workspace_family(family):
        return [
            _bash_tool(),
            _read_file_tool(),
            _write_file_tool(),
            _list_files_tool(),
            WAIT_TOOL,
            ARTIFACT_FINAL_STEP if family == "artifact_task" else WORKSPACE_FINAL_STEP,
        ]
    # Deferred families: reset works, final_step records the episode as pending.
    return [FINAL_STEP]


def served_live(family: str) -> bool:
    """Every family is served as an episode: workspace families in live workspaces, deferred
    ones as far as final_step (pending). Kept as the one place a family could be refused."""
    return bool(family)


class ArgumentProblem(ValueError):
    """The agent's call does not fit the tool's parameters; the message says how."""


def check_arguments(tool: Tool, arguments: Any) -> dict[str, Any]:
    """The arguments as the tool's schema allows them: strings, and numbers where the schema
    says ``number`` or ``integer`` (within its bounds); no unknown names."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ArgumentProblem(f"{tool.name} takes an object of named arguments")
    allowed = tool.parameters.get("properties", {})
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        raise ArgumentProblem(
            f"{tool.name} takes no argument {', '.join(repr(name) for name in unknown)}"
            + (f"; it takes {', '.join(sorted(allowed))}" if allowed else "")
        )
    for name in tool.parameters.get("required", []):
        if name not in arguments:
            raise ArgumentProblem(f"{tool.name} needs the argument {name!r}")
    return {
        name: _checked_value(tool, name, allowed[name], value) for name, value in arguments.items()
    }


def _checked_value(tool: Tool, name: str, schema: dict[str, Any], value: Any) -> Any:
    kind = schema.get("type", "string")
    if kind in ("number", "integer"):
        return _checked_number(tool, name, schema, value, whole=kind == "integer")
    if not isinstance(value, str):
        raise ArgumentProblem(f"{tool.name}: {name!r} must be a string")
    if len(value) > MAX_ARGUMENT_CHARS:
        raise ArgumentProblem(f"{tool.name}: {name!r} is over {MAX_ARGUMENT_CHARS:,} characters")
    if "\x00" in value:
        raise ArgumentProblem(f"{tool.name}: {name!r} contains a NUL character")
    return value


def _checked_number(
    tool: Tool, name: str, schema: dict[str, Any], value: Any, *, whole: bool
) -> int | float:
    noun = "a whole number" if whole else "a number"
    # bool is an int in Python, never in JSON Schema; NaN and infinities are no limits, nor
    # is a whole number of 400 digits (it would not even convert to a float).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentProblem(f"{tool.name}: {name!r} must be {noun}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ArgumentProblem(f"{tool.name}: {name!r} must be {noun}")
    if abs(value) > MAX_MAGNITUDE:
        raise ArgumentProblem(f"{tool.name}: {name!r} must be at most {MAX_MAGNITUDE:,} in size")
    if whole:
        if isinstance(value, float) and not value.is_integer():
            raise ArgumentProblem(f"{tool.name}: {name!r} must be {noun}")
        value = int(value)
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and value < low:
        raise ArgumentProblem(f"{tool.name}: {name!r} must be at least {low:g}")
    if high is not None and value > high:
        raise ArgumentProblem(f"{tool.name}: {name!r} must be at most {high:g}")
    return value
