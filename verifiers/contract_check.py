"""Whether one candidate keeps its contract version's contract, checked before any verifier.

A run either satisfies its contract or it is invalid for the benchmark, even before any metric
is computed. The rules, each reported at most once with the paths it names:

- ``candidate_kind``: the family's kind (``FamilySpec.candidate_kind``; None takes any). It
  holds with or without a contract, and a wrong kind skips the other rules (their paths would
  be read from a candidate of the wrong shape).
- ``read_only`` / ``allowed_to_modify`` (``verifiers.contract_surfaces``): on the paths a patch
  names (both sides of a rename; not a copy's untouched source) or a workspace changed.
- ``required_outputs``: each entry must be produced — by a patch, a path it adds or modifies
  (a deleted path is not produced); by a workspace, a file it holds. An entry is satisfied by
  that path or any path under it (``out/`` or ``final_checkpoint`` as folders); an entry with
  ``*``, ``?`` or ``[`` is a gitwildmatch glob (``*.jsonl`` matches at any depth). An entry
  written as an object (``verifiers.artifact_outputs``) with ``optional: true`` need not be.
- ``output_missing`` / ``output_malformed`` / ``output_too_large`` / ``output_late``: an
  artifact candidate's files against each required output's own rule (format, schema,
  max_bytes, written after the budget). An artifact reports a missing output as
  ``output_missing``; a workspace keeps ``required_outputs`` for that and gets the other three
  from entries written as objects. A patch's files are not known, so only presence is checked.

Text and code candidates name no paths: a contract's surfaces or required outputs cannot be
checked on them and are not (a contract with required_outputs on a text family binds nothing).
Pure: no Django, no I/O; the runs and episodes layers store what it returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verifiers.artifact_outputs import (
    OUTPUT_MISSING,
    OutputProblem,
    matching_paths,
    output_problems,
    output_rules,
)
from verifiers.contract_surfaces import MAX_NAMED, more_note, surface_hits
from verifiers.families import get_family
from verifiers.patch_policy import PatchFormatError, parse_git_header, parse_patch
from verifiers.task import Candidate

CANDIDATE_KIND = "candidate_kind"
READ_ONLY = "read_only"
ALLOWED_TO_MODIFY = "allowed_to_modify"
REQUIRED_OUTPUTS = "required_outputs"


@dataclass(frozen=True)
class ContractViolation:
    rule: str  # one of the rule names above
    paths: list[str]  # at most MAX_NAMED; the message counts the rest
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "paths": list(self.paths), "message": self.message}


def candidate_violations(
    contract: Mapping[str, Any] | None,
    family: str,
    candidate: Candidate,
    *,
    changed_paths: Iterable[str] | None = None,
    produced_after_budget: Iterable[str] | None = None,
) -> list[ContractViolation]:
    """Every rule of the contract (and the family's candidate kind) the candidate breaks, in
    the order kind, read_only, allowed_to_modify, required_outputs, then the output rules;
    [] when it keeps them.

    ``changed_paths``: what a live episode knows changed. For a workspace it replaces the
    candidate's file list (which holds unchanged seed files too, and not deleted ones); for a
    patch it is checked beside the patch's own paths (the stricter of the two).
    ``produced_after_budget``: files the caller knows were written after the budget ran out
    (an episode does); each one a required output names is ``output_late``."""
    expected = get_family(family).candidate_kind
    if expected is not None and candidate.kind != expected:
        message = (
            f"{CANDIDATE_KIND}: a {family} task takes a {expected} candidate, not {candidate.kind}"
        )
        return [ContractViolation(CANDIDATE_KIND, [], message)]
    contract = contract or {}
    if candidate.kind == "patch":
        shape = _patch_paths(candidate.text)
        touched = [*(shape[0] if shape else []), *(changed_paths or [])]
        produced = shape[1] if shape else None
        where = "the patch does not produce"
    elif candidate.kind in ("workspace", "artifact"):
        touched = list(candidate.files if changed_paths is None else changed_paths)
        produced = list(candidate.files)
        where = "not in the workspace"
    else:
        return []
    violations = _surface_violations(touched, contract)
    if candidate.kind == "artifact":
        # Every output rule, missing ones included, under the output rule names.
        problems = output_problems(
            output_rules(contract), candidate.files, produced_after_budget=produced_after_budget
        )
        return violations + output_violations(problems)
    missing = [] if produced is None else _missing(_mandatory_outputs(contract), produced)
    if missing:
        violations.append(_violation(REQUIRED_OUTPUTS, missing, f"{where} {_listed(missing)}"))
    if candidate.kind == "workspace":
        problems = output_problems(
            output_rules(contract), candidate.files, produced_after_budget=produced_after_budget
        )
        violations += output_violations([p for p in problems if p.rule != OUTPUT_MISSING])
    return violations


def output_violations(problems: Sequence[OutputProblem]) -> list[ContractViolation]:
    """The output check's problems as violations: one per rule, naming each path with what is
    wrong with it (a JSONL line and field, a size), in the order the rules first appear."""
    by_rule: dict[str, list[OutputProblem]] = {}
    for problem in problems:
        by_rule.setdefault(problem.rule, []).append(problem)
    violations: list[ContractViolation] = []
    for rule, found in by_rule.items():
        paths = list(dict.fromkeys(problem.path for problem in found))
        detail = "; ".join(f"{problem.path} {problem.detail}" for problem in found[:MAX_NAMED])
        violations.append(_violation(rule, paths, detail))
    return violations


def _patch_paths(text: str) -> tuple[list[str], list[str]] | None:
    """(paths the patch touches, paths it produces); None when it cannot be parsed — the
    verifier's patch policy refuses such a patch itself, so no contract rule is invented."""
    try:
        sections = parse_patch(text)
    except PatchFormatError:
        return None
    touched: list[str] = []
    produced: list[str] = []
    for section in sections:
        old, new = parse_git_header(section.text.split("\n", 1)[0][len("diff --git ") :])
        header = _header_lines(section.text)
        copied = any(line.startswith("copy from ") for line in header)
        # A copy reads its source and leaves it as it was: only the copy is a change.
        touched.extend(path for path in section.paths if not (copied and path == old))
        if not any(line.startswith("deleted file mode ") for line in header):
            produced.append(new)
    return touched, produced


def _header_lines(section_text: str) -> list[str]:
    """A section's extended header lines (before its ---/+++ or binary payload)."""
    lines: list[str] = []
    for line in section_text.split("\n")[1:]:
        if line.startswith(("--- ", "Binary files ", "GIT binary patch")):
            break
        lines.append(line)
    return lines


def _surface_violations(
    touched: Sequence[str], contract: Mapping[str, Any]
) -> list[ContractViolation]:
    hits = surface_hits(
        touched, _strings(contract, ALLOWED_TO_MODIFY), _strings(contract, READ_ONLY)
    )
    frozen = [hit for hit in hits if hit.rule == READ_ONLY]
    outside = [hit.path for hit in hits if hit.rule == ALLOWED_TO_MODIFY]
    violations: list[ContractViolation] = []
    if frozen:
        named = "; ".join(f"{hit.path} matches {hit.pattern!r}" for hit in frozen[:MAX_NAMED])
        violations.append(_violation(READ_ONLY, [hit.path for hit in frozen], named))
    if outside:
        allowed = ", ".join(repr(glob) for glob in _strings(contract, ALLOWED_TO_MODIFY))
        text = f"{_listed(outside)} outside {allowed}"
        violations.append(_violation(ALLOWED_TO_MODIFY, outside, text))
    return violations


def _missing(required: list[str], produced: Iterable[str]) -> list[str]:
    """The required entries no produced path satisfies, in the contract's order."""
    paths = list(produced)
    return [entry for entry in required if not matching_paths(entry, paths)]


def _mandatory_outputs(contract: Mapping[str, Any]) -> list[str]:
    """The paths of the required outputs that must be there (strings and non-optional
    objects)."""
    return [rule.path for rule in output_rules(contract) if not rule.optional]


def _violation(rule: str, paths: list[str], detail: str) -> ContractViolation:
    if len(paths) > MAX_NAMED:
        detail = f"{detail} {more_note(len(paths) - MAX_NAMED)}"
    return ContractViolation(rule, paths[:MAX_NAMED], f"{rule}: {detail}")


def _listed(paths: Sequence[str]) -> str:
    return ", ".join(paths[:MAX_NAMED])


def _strings(contract: Mapping[str, Any], key: str) -> list[str]:
    """A contract list's usable entries (the compiler already refused anything else)."""
    value = contract.get(key) or []
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, str) and item.strip()]
