"""What a pack's health checks found, shared by the site's checks (pack_health) and the
offline ``audit_pack`` command, so both judge a pack by the same rules.

A finding's ``message`` and ``evidence`` are public-safe: they name checks, resources, rules
and public file paths, never a sealed value. Sealed text (a leaked value, verifier output)
goes in ``sealed_evidence``, which the site shows only in debug mode, audited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FAILING = "failing"
WARNING = "warning"
INFO = "info"

ORACLE = "oracle"
NULL = "null"
REPEAT = "repeat"
LEAK = "leak"
ADVERSARIAL = "adversarial"
CHECKS = (ORACLE, NULL, REPEAT, LEAK, ADVERSARIAL)


@dataclass(frozen=True)
class Finding:
    check: str  # one of CHECKS
    code: str  # stable machine name, e.g. "oracle_failed"
    severity: str  # FAILING, WARNING or INFO (info never changes the report's verdict)
    task_id: str | None  # None: about the pack as a whole
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    sealed_evidence: dict[str, Any] = field(default_factory=dict)
