"""The three visibility lanes of a compiled resource (DESIGN.md §2)."""

from __future__ import annotations

from typing import Literal

Lane = Literal["public", "evaluation_inputs", "hidden"]

PUBLIC: Lane = "public"
EVALUATION_INPUTS: Lane = "evaluation_inputs"
HIDDEN: Lane = "hidden"

LANES: tuple[Lane, ...] = (PUBLIC, EVALUATION_INPUTS, HIDDEN)
NON_PUBLIC: frozenset[Lane] = frozenset({EVALUATION_INPUTS, HIDDEN})
