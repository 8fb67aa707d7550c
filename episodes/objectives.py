"""The first observation of an episode: the objective as text, built from the task's public
payload (``Task.agent_payload``: the public lane and nothing else), and that payload itself as
structured content."""

from __future__ import annotations

import json
import string
from typing import Any

from episodes import wire
from episodes.tools import family_tools, is_workspace_family, workspace_rules
from packs.models import Task
from verifiers.artifact_outputs import required_output_paths

# Payload keys shown as the objective's opening text, in this order; anything else public
# follows under its own name.
LEADING_KEYS = ("instructions", "question", "prompt")
CODE_KEYS = ("starter_code",)


def objective_text(family: str, payload: dict[str, Any]) -> str:
    parts: list[str] = []
    for key in LEADING_KEYS:
        if isinstance(payload.get(key), str):
            parts.append(payload[key].strip())
    choices = payload.get("choices")
    if family == "multiple_choice" and isinstance(choices, list):
        parts.append(_lettered(choices))
    for key in CODE_KEYS:
        if isinstance(payload.get(key), str) and payload[key].strip():
            language = payload.get("language") if isinstance(payload.get("language"), str) else ""
            parts.append(f"Starting point:\n```{language}\n{payload[key].rstrip()}\n```")
    shown = {*LEADING_KEYS, *CODE_KEYS, "choices", "language"}
    for key, value in payload.items():
        if key in shown:
            continue
        rendered = value if isinstance(value, str) else json.dumps(value, indent=2)
        parts.append(f"{key}:\n{rendered}")
    parts.append(_how_to_answer(family))
    return "\n\n".join(part for part in parts if part)


def _lettered(choices: list[Any]) -> str:
    letters = string.ascii_uppercase
    return "\n".join(
        f"{letters[index] if index < len(letters) else index + 1}. {choice}"
        for index, choice in enumerate(choices)
    )


def _how_to_answer(family: str) -> str:
    names = [tool.name for tool in family_tools(family)]
    if family == "multiple_choice":
        return "Answer with submit_answer (the letter of your choice), then call final_step."
    if family == "code_completion":
        return (
            "Try code with run_python if you like, submit your solution with submit_code, "
            "then call final_step."
        )
    if "submit_answer" in names:
        return "Answer with submit_answer, then call final_step."
    if family == "artifact_task":
        return (
            "Work in the workspace with bash, read_file, write_file and list_files (wait "
            "collects the rest of a long command's output), then call final_step: your "
            "artifact is the files you created or changed in the workspace (the task's files "
            "as given are not part of it, unless you changed them), each checked against the "
            "contract's required outputs."
        )
    if is_workspace_family(family):
        scored = (
            "its diff against the base commit" if family == "repo_patch" else "the files it holds"
        )
        return (
            "Work in the workspace with bash, read_file, write_file and list_files (wait "
            "collects the rest of a long command's output), then call final_step: the "
            f"workspace as you leave it is your answer ({scored}), scored by the task's "
            "checks in a separate sandbox."
        )
    return "This task has no verifier on this site yet: call final_step when you are done."


def first_observation(family: str, payload: dict[str, Any]) -> dict[str, Any]:
    return wire.observation(
        [
            wire.text_content(objective_text(family, payload), name="objective"),
            wire.structured_content(payload, name="task"),
        ]
    )


# --- live workspaces ---------------------------------------------------------------------------


def surfaces(contract: dict[str, Any]) -> dict[str, list[str]]:
    """The contract's allowed and read-only paths (globs) and the outputs it requires, as
    shown to the agent."""
    shown = {
        key: [item for item in contract.get(key) or [] if isinstance(item, str)]
        for key in ("allowed_to_modify", "read_only")
    }
    # A required output may be an object with a rule of its own: its path is what to make.
    return shown | {"required_outputs": required_output_paths(contract)}


def surfaces_text(contract: dict[str, Any]) -> str:
    shown = surfaces(contract)
    allowed = ", ".join(shown["allowed_to_modify"]) or "any path (the contract names none)"
    frozen = ", ".join(shown["read_only"]) or "none"
    required = ", ".join(shown["required_outputs"]) or "none"
    return (
        "Contract surfaces (gitignore-style globs, relative to the workspace root; for a "
        "repository, to the repository's root):\n"
        f"- you may change: {allowed}\n"
        f"- read-only: {frozen}\n"
        f"- must exist when you finish: {required}\n"
        "A change outside them, or a required output missing, fails the task "
        "(contract_violation) at final_step."
    )


def workspace_first_observation(
    task: Task,
    contract: dict[str, Any],
    *,
    listing: str,
    workdir: str,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A workspace episode's first observation: the objective, the workspace's files, the
    contract's surfaces and the rules of the workspace; then the public payload as data."""
    intro = f"Your workspace is {workdir} (tools take paths relative to it). Its files:"
    contents = [
        wire.text_content(objective_text(task.family, task.agent_payload), name="objective"),
        wire.text_content(f"{intro}\n{listing}", name="workspace"),
        wire.text_content(f"{surfaces_text(contract)}\n\n{workspace_rules()}", name="rules"),
        wire.structured_content(task.agent_payload, name="task"),
        wire.structured_content(surfaces(contract), name="surfaces"),
    ]
    return wire.observation(contents, err=error)


def workspace_waiting_observation(
    task: Task, contract: dict[str, Any], *, err: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The first observation while the workspace is still being laid out (or could not
    be): the objective now, the file listing from ``wait`` (or the next reset)."""
    if err is None:
        note = "The workspace is still being laid out: call wait to see its files."
    else:
        note = (
            f"The workspace could not be laid out ({err.get('exception_str', '')}): call "
            "cube/reset again."
        )
    contents = [
        wire.text_content(objective_text(task.family, task.agent_payload), name="objective"),
        wire.text_content(note, name="workspace"),
        wire.text_content(f"{surfaces_text(contract)}\n\n{workspace_rules()}", name="rules"),
        wire.structured_content(task.agent_payload, name="task"),
        wire.structured_content(surfaces(contract), name="surfaces"),
    ]
    return wire.observation(contents, err=err)
