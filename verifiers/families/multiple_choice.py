"""multiple_choice: pick one of several choices (spec §3.1); the answer is hidden."""

from __future__ import annotations

from verifiers.families.base import (
    FamilySpec,
    Field,
    non_empty_string,
    string_array,
    string_number_or_array,
)
from verifiers.lanes import HIDDEN

SPEC = FamilySpec(
    name="multiple_choice",
    active=True,
    candidate_kind="text",
    eval_lanes={"answer": HIDDEN},
    input_fields={
        "question": Field(non_empty_string, required=True),
        "choices": Field(string_array, required=True),
    },
    eval_fields={"answer": Field(string_number_or_array, required=True)},
)
