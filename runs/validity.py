"""Whether a run keeps its contract version's contract.

Each candidate is checked when it is stored (``candidate_violations_of``: the rules
``verifiers.contract_check`` knows, kept on ``Candidate.contract_violations``); a candidate that
broke one is failed with ``contract_violation`` without any verifier running. A run is valid
only when none of its candidates broke a rule and it is within budget: ``run_validity`` says so
with one reason per broken rule, and only valid runs are ranked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Exists, OuterRef

from runs.budgets import MAX_NOTES
from runs.models import Candidate, CandidateOrigin, Run, TaskResult
from verifiers.contract_check import (
    ALLOWED_TO_MODIFY,
    READ_ONLY,
    REQUIRED_OUTPUTS,
    candidate_violations,
)
from verifiers.families import FAMILIES, get_family
from verifiers.task import Candidate as VerifierCandidate
from verifiers.verdict import Reason

# Contract keys that bind path-carrying candidates (patches, workspaces and artifacts).
PATH_RULES = (ALLOWED_TO_MODIFY, READ_ONLY, REQUIRED_OUTPUTS)


def binds_paths(contract: Mapping[str, Any] | None) -> bool:
    """Whether the contract names surfaces or required outputs at all: most do not, and then
    checking a thousand candidates costs nothing but the kind test below."""
    return any((contract or {}).get(key) for key in PATH_RULES)


def candidate_violations_of(
    contract: Mapping[str, Any] | None, family: str, candidate: VerifierCandidate
) -> list[dict[str, Any]]:
    """The rules one candidate breaks, as stored on ``Candidate.contract_violations``."""
    if candidate.kind not in ("patch", "workspace", "artifact") or not binds_paths(contract):
        # Text and code name no paths; only the family's kind could be broken, and bundles and
        # API batches refuse a wrong kind outright (runs.services._check_against_tasks).
        expected = get_family(family).candidate_kind
        if expected is None or candidate.kind == expected:
            return []
    return [item.as_dict() for item in candidate_violations(contract, family, candidate)]


def live_violations(details: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The violations a live episode's refusal carries, in the stored shape.

    The episodes layer computes them (it alone knows which paths a workspace changed); older
    refusals carry one sentence per path (``"src/a.py: read-only (matches 'src/')"``)."""
    stored: list[dict[str, Any]] = []
    for item in details.get("contract_violations") or []:
        if isinstance(item, Mapping):
            stored.append(
                {
                    "rule": str(item.get("rule", "")),
                    "paths": [str(path) for path in item.get("paths") or []],
                    "message": str(item.get("message", "")),
                }
            )
        elif isinstance(item, str):
            path, _, why = item.partition(": ")
            rule = READ_ONLY if why.startswith("read-only") else ALLOWED_TO_MODIFY
            stored.append({"rule": rule, "paths": [path] if why else [], "message": item})
    return stored


def violation_reason(
    task_id: str, sample: int, violation: Mapping[str, Any], *, origin: str
) -> str:
    """``task T sample S: rule: paths``. An oracle run's paths are left out: its candidates are
    reference solutions, and the files a reference fix touches are part of the answer."""
    head = f"task {task_id} sample {sample}: {violation.get('rule', '')}"
    paths = [str(path) for path in violation.get("paths") or []]
    if origin == CandidateOrigin.ORACLE or not paths:
        return head
    return f"{head}: {', '.join(paths)}"


def run_validity(run: Run) -> tuple[bool, list[str]]:
    """(valid, reasons): invalid when a candidate broke a contract rule or the run is over
    budget. Violation reasons come first, capped like budget notes; then the budget notes."""
    reasons = _capped(_violation_reasons(run))
    reasons += [f"over budget: {note}" for note in run.budget_notes or []]
    if run.over_budget and not run.budget_notes:
        reasons.append("over budget")
    return not reasons, reasons


def verified_families() -> list[str]:
    """The families that have a verifier: only their candidates can show a run valid."""
    return sorted(name for name, spec in FAMILIES.items() if spec.active)


def judged_candidates() -> Exists:
    """Whether the outer query's run has a candidate for a task that has
    a verifier. A run without one is not judged valid: it has nothing that was checked and
    scored, whatever its stored flag says (a candidate of a family with no verifier, or none
    at all, keeps no contract worth ranking)."""
    return Exists(
        Candidate.objects.filter(run=OuterRef("pk"), task__family__in=verified_families())
    )


def has_judged_candidate(run: Run) -> bool:
    return Candidate.objects.filter(run=run, task__family__in=verified_families()).exists()


def validity_word(run: Run, *, judged: bool) -> str:
    """What a page or the API says of a run's validity: "unchecked" before submission,
    "invalid" (a rule broken or over budget), "not judged" (no candidate of a task that has a
    verifier), else "valid"."""
    if not run.is_submitted:
        return "unchecked"
    if not run.valid or run.over_budget:
        return "invalid"
    return "valid" if judged else "not judged"


def run_apply_validity(run: Run) -> None:
    """Set ``valid`` and ``invalid_reasons`` (the caller saves them, after the budgets)."""
    run.valid, run.invalid_reasons = run_validity(run)


def _violation_reasons(run: Run) -> Iterable[str]:
    rows = (
        Candidate.objects.filter(run=run)
        .exclude(contract_violations=[])
        .order_by("task__position", "sample")
        .values_list("task__task_id", "sample", "contract_violations")
    )
    for task_id, sample, violations in rows.iterator():
        for violation in violations or []:
            yield violation_reason(task_id, sample, violation, origin=run.origin)


def _capped(reasons: Iterable[str]) -> list[str]:
    kept: list[str] = []
    extra = 0
    for reason in reasons:
        if len(kept) < MAX_NOTES:
            kept.append(reason)
        else:
            extra += 1
    if extra:
        kept.append(f"… and {extra} more")
    return kept


def result_violations(result: TaskResult, *, origin: str) -> list[dict[str, Any]]:
    """The contract rules a ``contract_violation`` result's candidate broke, with the paths.

    The paths are the candidate's own and the rules the public contract's: nothing sealed, so
    anyone who may see the run may read them — except in an oracle run, whose candidate is a
    reference solution: there the rule alone is named."""
    if result.failure_reason != Reason.CONTRACT_VIOLATION:
        return []
    stored = result.candidate.contract_violations if result.candidate is not None else []
    violations = stored or live_violations(result.details or {})
    if origin == CandidateOrigin.ORACLE:
        return [{"rule": v.get("rule", ""), "paths": [], "message": ""} for v in violations]
    return violations
