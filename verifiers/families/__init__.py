"""The family registry: every family the site knows, by name (DESIGN.md §2, spec §3).

``get_family`` never fails: an unknown family name gets a generic spec that accepts any keys,
has no verifier and hides every eval key, so a pack using a new family still uploads safely.
"""

from __future__ import annotations

from verifiers.families import (
    artifact_task,
    browser_task,
    code_completion,
    desktop_task,
    free_response,
    multimodal_qa,
    multiple_choice,
    preference_pair,
    repo_patch,
    short_answer,
    terminal_task,
    tool_call,
)
from verifiers.families.base import FamilySpec, Field, FieldProblem

__all__ = ["FAMILIES", "FamilySpec", "Field", "FieldProblem", "get_family", "is_known_family"]

_MODULES = (
    multiple_choice,
    short_answer,
    free_response,
    code_completion,
    repo_patch,
    terminal_task,
    tool_call,
    browser_task,
    desktop_task,
    artifact_task,
    multimodal_qa,
    preference_pair,
)

FAMILIES: dict[str, FamilySpec] = {module.SPEC.name: module.SPEC for module in _MODULES}


def is_known_family(name: str) -> bool:
    return name in FAMILIES


def get_family(name: str) -> FamilySpec:
    spec = FAMILIES.get(name)
    if spec is not None:
        return spec
    # Empty lane map: every eval key of an unknown family is hidden.
    return FamilySpec(name=name, active=False)
