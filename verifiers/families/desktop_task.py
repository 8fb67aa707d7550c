"""desktop_task (deferred): a task carried out on a desktop.

No schema and no verifier yet (spec §3.7): any input/eval keys are accepted and tasks stay
pending; only the eval lane map (DESIGN.md §2) applies.
"""

from __future__ import annotations

from verifiers.families.base import deferred_family
from verifiers.lanes import HIDDEN

SPEC = deferred_family(
    "desktop_task",
    {
        "success_check": HIDDEN,
    },
)
