"""What an agent may do in an episode, per family: the tools it is shown and the checks on
the arguments it sends.

Text families answer with ``submit_answer``; ``code_completion`` may also ``run_python`` (its
own code, alone in a sandbox) before ``submit_code``; every family can end with
``final_step``. Families whose attempt needs a workspace are not served live yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from episodes import wire
from verifiers.families import get_family

STOP = "final_step"
SUBMIT_ANSWER = "submit_answer"
SUBMIT_CODE = "submit_code"
RUN_PYTHON = "run_python"
TEXT_FAMILIES = frozenset({"multiple_choice", "short_answer", "free_response"})
WORKSPACE_KINDS = frozenset({"workspace", "patch"})
MAX_ARGUMENT_CHARS = 1024 * 1024


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


def family_tools(family: str) -> list[Tool]:
    if family in TEXT_FAMILIES:
        return [SUBMIT_ANSWER_TOOL, FINAL_STEP]
    if family == "code_completion":
        return [RUN_PYTHON_TOOL, SUBMIT_CODE_TOOL, FINAL_STEP]
    # Deferred families: reset works, final_step records the episode as pending.
    return [FINAL_STEP]


def served_live(family: str) -> bool:
    """Workspace families (terminal_task, repo_patch) need live workspaces: not yet served."""
    return get_family(family).candidate_kind not in WORKSPACE_KINDS


class ArgumentProblem(ValueError):
    """The agent's call does not fit the tool's parameters; the message says how."""


def check_arguments(tool: Tool, arguments: Any) -> dict[str, str]:
    """The arguments as the tool's schema allows them: strings only, no unknown names."""
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
    checked: dict[str, str] = {}
    for name, value in arguments.items():
        if not isinstance(value, str):
            raise ArgumentProblem(f"{tool.name}: {name!r} must be a string")
        if len(value) > MAX_ARGUMENT_CHARS:
            raise ArgumentProblem(
                f"{tool.name}: {name!r} is over {MAX_ARGUMENT_CHARS:,} characters"
            )
        if "\x00" in value:
            raise ArgumentProblem(f"{tool.name}: {name!r} contains a NUL character")
        checked[name] = value
    return checked
