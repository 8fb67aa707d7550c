"""free_response: an open answer scored against a structured rubric (spec §3.3, §4.3)."""

from __future__ import annotations

from typing import Any

from verifiers.families.base import (
    FamilySpec,
    Field,
    FieldProblem,
    non_empty_string,
    non_empty_string_or_object,
)
from verifiers.lanes import HIDDEN


def rubric(value: Any, path: str) -> list[FieldProblem]:
    # Upstream accepts a string rubric here and then fails every verification of it;
    # refusing it at upload is kinder than a pack whose tasks can never pass.
    if isinstance(value, dict):
        return []
    if isinstance(value, str):
        return [
            (
                path,
                "must be an object such as {type: contains_any, accepted_answers: [...]};"
                " a string rubric cannot be verified",
            )
        ]
    return [(path, "must be an object")]


SPEC = FamilySpec(
    name="free_response",
    active=True,
    candidate_kind="text",
    eval_lanes={"reference_answer": HIDDEN, "rubric": HIDDEN},
    input_fields={
        "prompt": Field(non_empty_string, required=True),
        "context": Field(non_empty_string_or_object),
    },
    eval_fields={
        "reference_answer": Field(non_empty_string),
        "rubric": Field(rubric, required=True),
    },
)
