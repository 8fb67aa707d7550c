"""What a pack's health checks found, shared by the site's checks (pack_health) and the
offline ``audit_pack`` command, so both judge a pack by the same rules.

A finding's ``message`` and ``evidence`` are public-safe: they name checks, resources, rules
and public file paths, never a sealed value. Sealed text (a leaked value, verifier output)
goes in ``sealed_evidence``, which the site shows only in debug mode, audited.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verifiers.verdict import ERROR, FAILED, PASSED, PENDING, Reason, Verdict

FAILING = "failing"
WARNING = "warning"
INFO = "info"
# The check could not run because of the site's own infrastructure (no sandbox backend, an
# image the worker could not get, a worker that died): nothing is known about the pack.
NOT_CHECKED = "not_checked"
SEVERITIES = (FAILING, NOT_CHECKED, WARNING, INFO)

# Error reasons that are the site's fault whatever the pack holds. Not ``infrastructure``
# (trusted code gave no report): a pack can cause that one (an image without python3, a
# checker command that does not exist), so it stays a failing check error the author reads.
# ``task_misconfigured`` is the pack's by definition, and a candidate's own crash is a
# ``failed`` verdict, never an error.
INFRASTRUCTURE_REASONS = frozenset({Reason.SANDBOX_UNAVAILABLE, Reason.RETRIES_EXHAUSTED})

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
    severity: str  # one of SEVERITIES (info never changes the report's verdict)
    task_id: str | None  # None: about the pack as a whole
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    sealed_evidence: dict[str, Any] = field(default_factory=dict)


# --- what one check's verification gave ------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One verification as the health rules see it: its status and reason (public), how long
    it took, and the verifier's output (sealed: it may echo test source or inputs)."""

    status: str  # a verdict status: passed, failed, error or pending
    reason: str | None
    seconds: float
    output: str = ""
    # Why an infrastructure error happened, in words anyone may read (infrastructure_cause):
    # built from public facts (backend, image, host), never from the verifier's output.
    cause: str = ""

    @classmethod
    def of_verdict(cls, verdict: Verdict) -> Outcome:
        parts = [verdict.stdout, verdict.stderr]
        if verdict.details:
            parts.append("details: " + json.dumps(verdict.details, sort_keys=True, default=str))
        output = "\n".join(text for text in parts if text)
        return cls(verdict.status, verdict.reason, float(verdict.duration_seconds), output)


def _outcome_evidence(outcome: Outcome) -> dict[str, Any]:
    seconds = round(outcome.seconds, 3)
    return {"status": outcome.status, "reason": outcome.reason, "seconds": seconds}


def _sealed(outcome: Outcome) -> dict[str, Any]:
    return {"output": outcome.output} if outcome.output else {}


def _check_error(check: str, task_id: str, outcome: Outcome, what: str) -> Finding:
    if outcome.reason in INFRASTRUCTURE_REASONS:
        return _not_checked(check, task_id, outcome, what)
    # Trusted code gave no verdict: nothing was proved, and the pack may be the cause.
    return Finding(
        check=check,
        code="check_error",
        severity=FAILING,
        task_id=task_id,
        message=f"the {what} could not be checked: the verification ended in an error"
        f" ({outcome.reason or 'unknown reason'})",
        evidence=_outcome_evidence(outcome),
        sealed_evidence=_sealed(outcome),
    )


def _not_checked(check: str, task_id: str, outcome: Outcome, what: str) -> Finding:
    cause = outcome.cause or infrastructure_cause(outcome.reason or "")
    return Finding(
        check=check,
        code="not_checked_infrastructure",
        severity=NOT_CHECKED,
        task_id=task_id,
        message=f"not checked — infrastructure: the {what} could not be checked because of"
        f" the site, not the pack. {cause}",
        evidence={**_outcome_evidence(outcome), "cause": cause},
        sealed_evidence=_sealed(outcome),
    )


def infrastructure_cause(reason: str, *, backend: str = "", image: str = "", host: str = "") -> str:
    """What went wrong on our side and what an operator can do, from public facts only: the
    reason, the sandbox backend the worker had, the image it could not get (image names are
    public in the contract) and the worker's host name."""
    on = f" on host {host}" if host else ""
    if reason == Reason.RETRIES_EXHAUSTED:
        return (
            f"The worker{on} checking it stopped before it finished, on every attempt;"
            " an operator finds why in that worker's log."
        )
    if image:
        return (
            f"Image {image} is not on the Docker engine{on} and could not be pulled. An"
            f" operator can pull it there, or build the local sandbox image (make"
            " sandbox-image), which a worker uses for images it cannot pull"
            " (SECUREBENCH_DEFAULT_IMAGE names another); if the image's name is wrong, the"
            " pack needs a new version."
        )
    if backend:
        name = "Docker" if backend == "docker" else "bubblewrap"
        return f"The {name} sandbox{on} could not be opened; an operator finds why in its log."
    return (
        f"No sandbox backend is usable{on}: neither a Docker engine nor bubblewrap. An"
        " operator can start Docker (and build the sandbox image: make sandbox-image) or"
        " install bubblewrap there."
    )


# --- the rules ---------------------------------------------------------------------------------


def oracle_findings(task_id: str, outcome: Outcome | None) -> list[Finding]:
    """The reference must pass; a task without one (or without a verifier) is unverifiable."""
    if outcome is None or outcome.status == PENDING:
        why = "no reference solution" if outcome is None else "no verifier for its family"
        return [
            Finding(
                check=ORACLE,
                code="unverifiable",
                severity=INFO,
                task_id=task_id,
                message=f"unverifiable: the task has {why}, so nobody can show it is solvable",
            )
        ]
    if outcome.status == ERROR:
        return [_check_error(ORACLE, task_id, outcome, "reference solution")]
    if outcome.status == PASSED:
        return []
    return [
        Finding(
            check=ORACLE,
            code="oracle_failed",
            severity=FAILING,
            task_id=task_id,
            message=f"the task's own reference solution does not pass"
            f" ({outcome.reason or outcome.status})",
            evidence=_outcome_evidence(outcome),
            sealed_evidence=_sealed(outcome),
        )
    ]


def null_findings(task_id: str, outcome: Outcome | None) -> list[Finding]:
    """An empty candidate must not pass (None: the family has no empty candidate)."""
    if outcome is None or outcome.status in (PENDING, FAILED):
        return []
    if outcome.status == ERROR:
        return [_check_error(NULL, task_id, outcome, "empty candidate")]
    return [
        Finding(
            check=NULL,
            code="null_passed",
            severity=FAILING,
            task_id=task_id,
            message="an empty candidate passes: the task gives its score away for nothing",
            evidence=_outcome_evidence(outcome),
            sealed_evidence=_sealed(outcome),
        )
    ]


def repeat_findings(task_id: str, first: Outcome | None, second: Outcome | None) -> list[Finding]:
    """The reference scored twice must get the same verdict; a flip marks the task flaky.

    An error in the first run is the oracle check's finding; an error in the second is this
    check's. Neither is a flip: an infrastructure fault says nothing about the task.
    """
    if first is None or second is None or first.status == ERROR:
        return []
    if second.status == ERROR:
        return [_check_error(REPEAT, task_id, second, "repeated reference solution")]
    if first.status == second.status:
        return []
    return [
        Finding(
            check=REPEAT,
            code="flaky",
            severity=FAILING,
            task_id=task_id,
            message=f"flaky: the reference solution {first.status} once and {second.status}"
            " when scored again",
            evidence={
                "first": _outcome_evidence(first),
                "second": _outcome_evidence(second),
            },
            sealed_evidence={
                key: value
                for key, value in (("first_output", first.output), ("second_output", second.output))
                if value
            },
        )
    ]


def adversarial_findings(
    task_id: str, attack_name: str, outcome: Outcome | None, description: str = ""
) -> list[Finding]:
    """A built-in attack candidate must fail; a pass is a weakness of the task's verifier."""
    if outcome is None or outcome.status in (PENDING, FAILED):
        return []
    if outcome.status == ERROR:
        return [_check_error(ADVERSARIAL, task_id, outcome, f"attack '{attack_name}'")]
    about = f" ({description})" if description else ""
    return [
        Finding(
            check=ADVERSARIAL,
            code="attack_passed",
            severity=FAILING,
            task_id=task_id,
            message=f"the attack '{attack_name}'{about} passes: the verifier accepts a candidate"
            " built to game it instead of solving the task",
            evidence={"attack": attack_name, **_outcome_evidence(outcome)},
            sealed_evidence=_sealed(outcome),
        )
    ]


# --- the report ----------------------------------------------------------------------------------

HEALTHY = "healthy"
WARNINGS = "warnings"
VERDICTS = (HEALTHY, WARNINGS, NOT_CHECKED, FAILING)
SLOWEST_NAMED = 5


def report_verdict(findings: Iterable[Finding]) -> str:
    """failing if any finding fails (the pack's fault, proved); else not_checked if a check
    could not run because of the site (the pack is neither cleared nor blamed); else warnings
    if any warns, else healthy (info never counts)."""
    severities = {finding.severity for finding in findings}
    if FAILING in severities:
        return FAILING
    if NOT_CHECKED in severities:
        return NOT_CHECKED
    if WARNING in severities:
        return WARNINGS
    return HEALTHY


def check_counts(
    findings: Iterable[Finding], checked: Mapping[str, int]
) -> dict[str, dict[str, int]]:
    """Per check: how many items it checked and how many findings of each severity it made."""
    counts = {
        check: {"checked": int(checked.get(check, 0)), **dict.fromkeys(SEVERITIES, 0)}
        for check in (*CHECKS, *(name for name in checked if name not in CHECKS))
    }
    for finding in findings:
        row = counts.setdefault(finding.check, {"checked": 0, **dict.fromkeys(SEVERITIES, 0)})
        if finding.severity in row:
            row[finding.severity] += 1
    for row in counts.values():
        # An item the site could not check was not checked: "checked" counts what ran.
        row["checked"] = max(0, row["checked"] - row[NOT_CHECKED])
    return counts


def timing_summary(durations: Mapping[str, float]) -> dict[str, Any]:
    """Median and total seconds per task, and the slowest tasks by name."""
    values = sorted(float(seconds) for seconds in durations.values())
    slowest = sorted(durations.items(), key=lambda item: (-float(item[1]), item[0]))
    return {
        "median_seconds": round(statistics.median(values), 3) if values else 0.0,
        "total_seconds": round(sum(values), 3),
        "slowest": [
            {"task_id": task_id, "seconds": round(float(seconds), 3)}
            for task_id, seconds in slowest[:SLOWEST_NAMED]
        ],
    }
