"""Strict JSON for untrusted lines: a pack's task rows and a run bundle's candidate lines.

``json.loads`` accepts more than JSON: ``NaN`` and ``Infinity``, numbers past the float range
(read as ``inf``), and a key given twice (the last one wins, silently). Each would let two
different lines mean the same value, or a digest hide what a line said, so ``strict_loads``
refuses them with a message fit for the uploader.
"""

from __future__ import annotations

import json
import math
from typing import Any


class StrictJsonRefused(ValueError):
    """Valid for ``json.loads`` but refused here; the message says why."""


def strict_loads(text: str) -> Any:
    """``json.loads`` without NaN/Infinity, non-finite floats or duplicate keys
    (``StrictJsonRefused``); its other errors (``JSONDecodeError``, ``ValueError`` for
    too many digits, ``RecursionError``) pass through for the caller to word."""
    return json.loads(
        text,
        parse_constant=_refuse_constant,
        parse_float=_finite_float,
        object_pairs_hook=_unique_keys,
    )


def _refuse_constant(name: str) -> Any:
    raise StrictJsonRefused(f"{name} is not allowed; numbers must be finite")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf
        raise StrictJsonRefused(f"{text} is too large; numbers must be finite")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of two equal keys silently; the digest would hide the other.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJsonRefused(f"duplicate key '{key}'")
        result[key] = value
    return result
