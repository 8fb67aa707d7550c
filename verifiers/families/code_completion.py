"""code_completion: write code that hidden tests call (spec §3.4, §4.4).

The tests go to the verifier sandbox (evaluation_inputs); solutions stay hidden.
"""

from __future__ import annotations

from verifiers.families.base import (
    FamilySpec,
    Field,
    equals,
    non_empty_string,
    strict_object,
    string,
)
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN

# The only test form any verifier generation runs; checking it here catches packs that
# would otherwise fail every verification.
INLINE_TESTS = strict_object(
    {
        "source": Field(equals("inline"), required=True),
        "code": Field(non_empty_string, required=True),
    }
)

SPEC = FamilySpec(
    name="code_completion",
    active=True,
    candidate_kind="code",
    eval_lanes={
        "tests": EVALUATION_INPUTS,
        "reference_solution": HIDDEN,
        "canonical_solution": HIDDEN,
    },
    input_fields={
        "prompt": Field(non_empty_string, required=True),
        "language": Field(non_empty_string),
        "starter_code": Field(string),
    },
    eval_fields={
        "tests": Field(INLINE_TESTS, required=True),
        "reference_solution": Field(string),
        "canonical_solution": Field(string),
    },
)
