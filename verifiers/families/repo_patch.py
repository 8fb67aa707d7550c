"""repo_patch: a git patch against a repository baked into the image (spec §3.5, §4.5)."""

from __future__ import annotations

from typing import Any

from verifiers.families.base import (
    FamilySpec,
    Field,
    FieldProblem,
    equals,
    is_non_empty_string,
    non_empty_string,
    non_negative_number,
    strict_object,
    string,
    string_array,
    string_list,
)
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN

_INLINE_PATCH = strict_object(
    {
        "source": Field(equals("inline"), required=True),
        "patch": Field(non_empty_string, required=True),
    }
)


def patch(value: Any, path: str) -> list[FieldProblem]:
    """A non-empty patch string, or {source: inline, patch: <non-empty>}."""
    if is_non_empty_string(value):
        return []
    if isinstance(value, dict):
        return _INLINE_PATCH(value, path)
    return [(path, "must be a non-empty string or an object {source: inline, patch: ...}")]


TESTS = strict_object(
    {
        "source": Field(equals("command"), required=True),
        "command": Field(string_array, required=True),
        "workdir": Field(non_empty_string),
        "timeout_seconds": Field(non_negative_number),
        "setup_patch": Field(patch),
        "test_patch": Field(patch),
    }
)

CANDIDATE_POLICY = strict_object(
    {
        "allow_paths": Field(string_list),
        "allow_sensitive_paths": Field(string_list),
        "patch_preserved_paths": Field(string_list),
    }
)

SPEC = FamilySpec(
    name="repo_patch",
    active=True,
    candidate_kind="patch",
    eval_lanes={
        "tests": EVALUATION_INPUTS,
        "candidate_policy": EVALUATION_INPUTS,
        "gold_patch": HIDDEN,
    },
    input_fields={
        "repo": Field(non_empty_string, required=True),
        "base_commit": Field(non_empty_string, required=True),
        "instructions": Field(non_empty_string, required=True),
        "hints": Field(non_empty_string),
    },
    eval_fields={
        "tests": Field(TESTS, required=True),
        "candidate_policy": Field(CANDIDATE_POLICY),
        "gold_patch": Field(string),
    },
)
