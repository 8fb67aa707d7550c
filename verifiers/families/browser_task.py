"""browser_task (deferred): a task carried out in a web browser.

No schema and no verifier yet (spec §3.7): any input/eval keys are accepted and tasks stay
pending; only the eval lane map (DESIGN.md §2) applies.
"""

from __future__ import annotations

from verifiers.families.base import deferred_family
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN

SPEC = deferred_family(
    "browser_task",
    {
        "credentials": EVALUATION_INPUTS,
        "success_check": HIDDEN,
    },
)
