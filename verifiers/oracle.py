"""Reference ("oracle") and empty ("null") candidates built from a task's own lanes.

Every task with a reference must pass with its oracle and fail with the null candidate
(security.md §8 rule 7); the pipeline's `--oracle` / `--null` runs use these too. Oracle
candidates are made of hidden values, so they are privileged data wherever they are stored.
"""

from __future__ import annotations

import json
import string
from typing import Any

from verifiers.families import artifact_task, code_completion, get_family
from verifiers.task import Candidate, TaskLanes


def oracle_candidate(task: TaskLanes) -> Candidate | None:
    """The task's reference answer as a candidate, or None when the task has none."""
    builders = {
        "multiple_choice": _multiple_choice,
        "short_answer": _short_answer,
        "free_response": _free_response,
        "code_completion": _code_completion,
        "repo_patch": _repo_patch,
        "terminal_task": _terminal_task,
        "artifact_task": _artifact_task,
    }
    builder = builders.get(task.family)
    return builder(task) if builder else None


def null_candidate(task: TaskLanes) -> Candidate | None:
    """An empty candidate of the right kind (None for families without a verifier)."""
    kind = get_family(task.family).candidate_kind
    if kind is None:
        return None
    if kind == "workspace":
        return Candidate.of_workspace({})
    if kind == "artifact":
        return Candidate.of_artifact({})
    return Candidate(kind=kind, text="")


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def _multiple_choice(task: TaskLanes) -> Candidate | None:
    answer = _first(task.hidden.get("answer"))
    if isinstance(answer, bool) or answer is None:
        return None
    if isinstance(answer, int | float):
        answer = string.ascii_uppercase[int(answer)]
    return Candidate.of_text(f"Answer: {answer}")


def _short_answer(task: TaskLanes) -> Candidate | None:
    answer = _first(task.hidden.get("accepted_answers"))
    return None if answer is None else Candidate.of_text(str(answer))


def _free_response(task: TaskLanes) -> Candidate | None:
    rubric = task.hidden.get("rubric")
    accepted = rubric.get("accepted_answers") if isinstance(rubric, dict) else None
    answer = _first(accepted) or task.hidden.get("reference_answer")
    return Candidate.of_text(answer) if isinstance(answer, str) and answer else None


def _code_completion(task: TaskLanes) -> Candidate | None:
    code = code_completion.reference_candidate(task)
    return Candidate.of_code(code) if code else None


def _repo_patch(task: TaskLanes) -> Candidate | None:
    patch = task.hidden.get("gold_patch")
    return Candidate.of_patch(patch) if isinstance(patch, str) and patch.strip() else None


def _terminal_task(task: TaskLanes) -> Candidate | None:
    # Only an expected_state that names one file and its content (text, or a JSON value
    # written out) describes a solution.
    state = task.hidden.get("expected_state")
    if isinstance(state, dict) and isinstance(state.get("path"), str):
        content = state.get("content")
        if isinstance(content, str):
            return Candidate.of_workspace({state["path"]: content})
        if "json" in state:
            return Candidate.of_workspace({state["path"]: json.dumps(state["json"]) + "\n"})
    return None


def _artifact_task(task: TaskLanes) -> Candidate | None:
    files = artifact_task.reference_files(task)
    return Candidate.of_artifact(dict(files)) if files else None
