"""Verification entry point: ``verify(task, candidate)`` for every family.

Text families and artifacts are pure functions run in the worker; code, patch and workspace
families run their candidates in a sandbox. Deferred families are ``pending``. Whatever a
verifier returns, its stored text is scrubbed of exact hidden and evaluation-input values
here, once more.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from verifiers.families import (
    artifact_task,
    code_completion,
    free_response,
    get_family,
    multiple_choice,
    repo_patch,
    short_answer,
    terminal_task,
)
from verifiers.redaction import output_secrets
from verifiers.sandbox import Sandbox, SandboxUnavailable
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import (
    Reason,
    Verdict,
    cap_text,
    error,
    failed,
    pending,
    scrub,
)

logger = logging.getLogger(__name__)
# What a task result keeps of each stream; sandboxes already cap what they read.
STORED_OUTPUT_CHARS = 64 * 1024

TextVerifier = Callable[[TaskLanes, Candidate], Verdict]

TEXT_FAMILY_VERIFIERS: dict[str, TextVerifier] = {
    multiple_choice.SPEC.name: multiple_choice.verify,
    short_answer.SPEC.name: short_answer.verify,
    free_response.SPEC.name: free_response.verify,
}


def is_text_family(family: str) -> bool:
    return family in TEXT_FAMILY_VERIFIERS


def verify_text_family(task: TaskLanes, candidate: Candidate) -> Verdict:
    verifier = TEXT_FAMILY_VERIFIERS.get(task.family)
    if verifier is None:
        # Sending another family here is our bug, not the candidate's.
        return error(Reason.NO_VERIFIER, details={"family": task.family})
    return verifier(task, candidate)


@dataclass(frozen=True)
class VerifierSettings:
    """Site policy for a verification; the sandbox is chosen lazily when one is needed."""

    sandbox: Sandbox | None = None
    # Dangerous verifier commands (e.g. "chroot") the site allows; none by default.
    allowed_commands: frozenset[str] = frozenset()


def verify(
    task: TaskLanes, candidate: Candidate | None, settings: VerifierSettings | None = None
) -> Verdict:
    """The one entry point: any family, any candidate; never raises for bad input."""
    settings = settings or VerifierSettings()
    spec = get_family(task.family)
    if not spec.active:
        return pending(details={"family": task.family})
    if candidate is None:
        return failed(Reason.MISSING_CANDIDATE)
    if candidate.kind != spec.candidate_kind:
        message = f"a {task.family} task takes a {spec.candidate_kind} candidate"
        return failed(
            Reason.INVALID_CANDIDATE,
            details={"expected_kind": spec.candidate_kind},
            stderr=f"{message}, not {candidate.kind}",
        )
    started = time.monotonic()
    try:
        verdict = _dispatch(task, candidate, settings)
    except SandboxUnavailable as exc:
        verdict = error(Reason.SANDBOX_UNAVAILABLE, stderr=str(exc))
    except Exception:
        # Our fault, never the candidate's: logged without values, retried by the pipeline.
        logger.exception("verifier crashed on task %s (%s)", task.task_id, task.family)
        verdict = error(Reason.INFRASTRUCTURE)
    return _finalised(verdict, task, time.monotonic() - started)


def _dispatch(task: TaskLanes, candidate: Candidate, settings: VerifierSettings) -> Verdict:
    if is_text_family(task.family):
        return verify_text_family(task, candidate)
    if task.family == code_completion.SPEC.name:
        return code_completion.verify(task, candidate, sandbox=settings.sandbox)
    if task.family == repo_patch.SPEC.name:
        return repo_patch.verify(task, candidate, sandbox=settings.sandbox)
    if task.family == artifact_task.SPEC.name:
        # Pure, but on the sandbox queue: one artifact (up to the candidate cap) per message.
        return artifact_task.verify(task, candidate)
    if task.family == terminal_task.SPEC.name:
        return terminal_task.verify(
            task, candidate, sandbox=settings.sandbox, allowed_commands=settings.allowed_commands
        )
    return error(Reason.NO_VERIFIER, details={"family": task.family})


def _finalised(verdict: Verdict, task: TaskLanes, elapsed: float) -> Verdict:
    """Last line of defence: no stored text may contain an exact hidden or input value."""
    # Sealed and not also public: an allow_paths entry naming a file the agent was shown
    # stays readable (verifiers.redaction).
    secrets = output_secrets(task)
    return replace(
        verdict,
        stdout=cap_text(scrub(verdict.stdout, secrets), STORED_OUTPUT_CHARS),
        stderr=cap_text(scrub(verdict.stderr, secrets), STORED_OUTPUT_CHARS),
        # Nothing to scrub is common (a multiple-choice answer "B" is too short to be one):
        # then the details are kept as they are instead of being copied value by value.
        details=_scrub_details(verdict.details, secrets) if secrets else verdict.details,
        duration_seconds=verdict.duration_seconds or elapsed,
    )


def _scrub_details(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {key: _scrub_details(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_details(item, secrets) for item in value]
    return value
