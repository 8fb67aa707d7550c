"""The first observation of an episode: the objective as text, built from the task's public
payload (``Task.agent_payload``: the public lane and nothing else), and that payload itself as
structured content."""

from __future__ import annotations

import json
import string
from typing import Any

from episodes import wire
from episodes.tools import family_tools

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
    return "This task has no verifier on this site yet: call final_step when you are done."


def first_observation(family: str, payload: dict[str, Any]) -> dict[str, Any]:
    return wire.observation(
        [
            wire.text_content(objective_text(family, payload), name="objective"),
            wire.structured_content(payload, name="task"),
        ]
    )
