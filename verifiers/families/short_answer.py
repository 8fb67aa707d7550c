"""short_answer: a short text or numeric answer (spec §3.2)."""

from __future__ import annotations

from verifiers.families.base import (
    FamilySpec,
    Field,
    non_empty_string,
    non_negative_number,
    string_or_number_array,
    string_or_object,
)
from verifiers.lanes import HIDDEN

SPEC = FamilySpec(
    name="short_answer",
    active=True,
    candidate_kind="text",
    eval_lanes={"accepted_answers": HIDDEN, "tolerance": HIDDEN},
    input_fields={
        "question": Field(non_empty_string, required=True),
        "answer_format": Field(non_empty_string),
        # `context` came later upstream (@b3baf659); squad-style packs need it.
        "context": Field(string_or_object),
    },
    eval_fields={
        "accepted_answers": Field(string_or_number_array, required=True),
        # The verifier treats null as "no tolerance", so the schema does too.
        "tolerance": Field(non_negative_number, nullable=True),
    },
)
