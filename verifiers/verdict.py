"""What a verifier returns: a verdict with a reason from a fixed vocabulary.

``error`` is only for our own faults (a missing sandbox backend, a crash in trusted code);
everything the candidate causes (wrong answers, timeouts, limits, tampering) is ``failed``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["passed", "failed", "error", "pending"]
PASSED: Status = "passed"
FAILED: Status = "failed"
ERROR: Status = "error"
PENDING: Status = "pending"


class Reason:
    """The fixed vocabulary of failure reasons (stored and shown; never free text)."""

    WRONG_ANSWER = "wrong_answer"
    TESTS_FAILED = "tests_failed"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    PROCESS_LIMIT = "process_limit"
    DISK_LIMIT = "disk_limit"
    POLICY_DENIED = "policy_denied"
    TAMPER_DETECTED = "tamper_detected"
    INVALID_CANDIDATE = "invalid_candidate"
    MISSING_CANDIDATE = "missing_candidate"
    BASE_COMMIT_MISMATCH = "base_commit_mismatch"
    PATCH_DOES_NOT_APPLY = "patch_does_not_apply"
    DANGEROUS_COMMAND_DENIED = "verifier_dangerous_command_denied"
    NO_VERIFIER = "no_verifier"
    INFRASTRUCTURE = "infrastructure"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    TASK_MISCONFIGURED = "task_misconfigured"
    # An artifact against its contract's required outputs (verifiers.artifact_outputs).
    OUTPUT_MISSING = "output_missing"
    OUTPUT_MALFORMED = "output_malformed"
    OUTPUT_TOO_LARGE = "output_too_large"
    # Set by the pipeline, never by a verifier: the result's lease expired on every attempt.
    RETRIES_EXHAUSTED = "retries_exhausted"
    # Set by the site, never by a verifier: a live workspace changed a path the contract's
    # allowed_to_modify / read_only surfaces forbid, so the verifier was not run.
    CONTRACT_VIOLATION = "contract_violation"
    # An author's evaluation program crashed, timed out or answered out of its declaration:
    # the evaluation's fault (shown to its authors), never the candidate's.
    EVALUATION_ERROR = "evaluation_error"

    ALL: frozenset[str] = frozenset()


Reason.ALL = frozenset(
    value for name, value in vars(Reason).items() if name.isupper() and isinstance(value, str)
)

REDACTED = "<redacted>"
# Values shorter than this are too common to scrub without mangling ordinary output
# ("B", "4"); they are never logged verbatim by verifiers either.
MIN_SCRUB_LENGTH = 3
# Evaluation inputs are mostly test code and checker settings: scrubbing short words of them
# ("pytest", "tests") would make every log unreadable, while any test line worth hiding is
# longer than this.
MIN_INPUT_SCRUB_LENGTH = 12


@dataclass(frozen=True)
class Verdict:
    status: Status
    score: float = 0.0
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    duration_seconds: float = 0.0
    sandbox_backend: str | None = None
    sandbox_image: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score must be within 0..1, got {self.score}")
        if self.reason is not None and self.reason not in Reason.ALL:
            raise ValueError(f"unknown failure reason {self.reason!r}")
        if self.status == PASSED and self.reason is not None:
            raise ValueError("a passed verdict has no failure reason")

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def passed(**kwargs: Any) -> Verdict:
    return Verdict(status=PASSED, score=1.0, **kwargs)


def failed(reason: str, **kwargs: Any) -> Verdict:
    return Verdict(status=FAILED, score=0.0, reason=reason, **kwargs)


def error(reason: str, **kwargs: Any) -> Verdict:
    return Verdict(status=ERROR, score=0.0, reason=reason, **kwargs)


def pending(**kwargs: Any) -> Verdict:
    return Verdict(status=PENDING, score=0.0, reason=Reason.NO_VERIFIER, **kwargs)


def secret_strings(values: Iterable[Any], min_length: int = MIN_SCRUB_LENGTH) -> list[str]:
    """Every string (and number as text) inside the given values, longest first."""
    found: set[str] = set()
    stack = list(values)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item.strip()) >= min_length:
                found.add(item)
                found.add(item.strip())
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            text = repr(item)
            if len(text) >= min_length:
                found.add(text)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every exact occurrence of a secret value with ``<redacted>``."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def cap_text(text: str, limit: int) -> str:
    """Head and tail of an over-long text, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n… [{cut} characters cut] …\n{text[-half:]}"


def storable_text(text: str) -> str:
    """``text`` as every database, page and log can hold it. A NUL (PostgreSQL's text and
    jsonb refuse it) and unpaired surrogates (no UTF-8 encoder takes them; a sandbox's file
    names decoded with ``os.fsdecode`` hold them) become visible backslash escapes."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def storable(value: Any) -> Any:
    """A JSON-like ``value`` with every string in it, keys included, made ``storable_text``:
    for whatever a candidate's sandbox reported that a row is about to hold."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(storable(item) for item in value)
    return value
