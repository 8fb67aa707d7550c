"""tool_call (deferred): tool calls against a simulated environment.

No schema and no verifier yet (spec §3.7): any input/eval keys are accepted and tasks stay
pending; only the eval lane map (DESIGN.md §2) applies.
"""

from __future__ import annotations

from verifiers.families.base import deferred_family
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN

SPEC = deferred_family(
    "tool_call",
    {
        "initial_state": EVALUATION_INPUTS,
        "expected_calls": HIDDEN,
        "expected_final_state": HIDDEN,
    },
)
