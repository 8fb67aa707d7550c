"""The leak audit's findings: what a matched value means, in words that never show it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from verifiers.leak_audit.text import MAX_PASSAGE_CHARS, TERMS, WORDS
from verifiers.pack_findings import FAILING, INFO, LEAK, WARNING, Finding

MAJORITY = 0.5  # share of a value's passages that makes it leaked
MAX_FINDINGS_PER_CODE = 100
MAX_PASSAGES = 3
DERIVED_NOTE = (
    " It is a terminal task's expected output, which may be derived from public inputs by "
    "design (a warning, not a failure): check it is not a copy an agent could hand in."
)

Place = tuple[str, str]  # ("task", task id) | ("file", path) | ("description"|"title", "")


@dataclass
class SealedValue:
    """A sealed value (or eval-root file) being compared by passages or short windows."""

    task_id: str | None  # None: an eval-root file
    name: str  # resource name, or the eval file's path
    lane: str  # "evaluation_inputs", "hidden" or "eval file"
    reference: bool
    short: bool = False  # compared by 4-term windows, all of which must meet in one place
    tasks_state_it: bool = False  # the family shows it in tasks (a multiple-choice answer)
    derived: bool = False  # a terminal task's expected output (see audit.CODE_SUFFIXES)
    whole: str = ""  # a short value's text (sealed evidence)
    passages: int = 0  # distinct passages (or windows) in it
    hits: dict[Place, set[int]] = field(default_factory=dict)
    hit_names: dict[Place, set[str]] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)  # hash → passage text (a few)

    def counts_at(self, place: Place) -> bool:
        return not (self.tasks_state_it and place[0] == "task")


class Report:
    """Collects findings; capped per code when read."""

    def __init__(self) -> None:
        self.found: list[Finding] = []

    def emit(
        self,
        code: str,
        severity: str,
        task_id: str | None,
        message: str,
        evidence: dict[str, Any],
        sealed: dict[str, Any] | None = None,
    ) -> None:
        self.found.append(Finding(LEAK, code, severity, task_id, message, evidence, sealed or {}))

    def value(self, value: SealedValue) -> None:
        if value.short:
            self._whole(value)
        else:
            self._passages(value)

    def _whole(self, value: SealedValue) -> None:
        places = sorted(p for p, hit in value.hits.items() if len(hit) == value.passages)
        if not places:
            return
        labels = [place_label(p, value.hit_names.get(p, set())) for p in places]
        evidence = _evidence(value, labels) | {
            "rule": f"whole value ({TERMS}-term windows, all in one place)"
        }
        sealed = {"value": value.whole[:MAX_PASSAGE_CHARS]} | _eval_path(value)
        own = ("task", value.task_id or "")
        if any(p[0] != "task" or p == own for p in places):
            self.emit(
                "reference_in_public" if value.reference else "hidden_value_in_public",
                WARNING if value.derived else FAILING,
                value.task_id,
                f"The {_owner(value)} appears whole in public data: {'; '.join(labels[:5])}."
                + DERIVED_NOTE * value.derived,
                evidence,
                sealed,
            )
            return
        # Only other tasks say it: a short answer is often a name two questions share, so
        # this is for the author to look at, not a proven leak (a longer value is judged by
        # its passages, wherever they are).
        self.emit(
            "value_in_other_tasks",
            WARNING,
            value.task_id,
            f"The {_owner(value)} appears whole in other tasks' public data: "
            f"{'; '.join(labels[:5])}. An agent reading them meets it; check it is not "
            "marked as this task's answer.",
            evidence,
            sealed,
        )

    def _passages(self, value: SealedValue) -> None:
        matched = set().union(*value.hits.values())
        share = len(matched) / value.passages
        leaked = share >= MAJORITY
        places = sorted(value.hits, key=lambda p: (-len(value.hits[p]), p))
        labels = [place_label(p, value.hit_names.get(p, set())) for p in places]
        if leaked:
            code = "reference_in_public" if value.reference else "hidden_tokens_in_public"
            message = (
                f"{share:.0%} of the 8-word passages of the {_owner(value)} appear verbatim in "
                f"public data: {'; '.join(labels[:5])}."
            )
        else:
            code = "hidden_tokens_overlap"
            message = (
                f"{len(matched)} 8-word passage(s) of the {_owner(value)} ({share:.0%} of it) "
                f"also appear in public data: {'; '.join(labels[:5])}. Usually harmless (a test "
                "repeating a documented example, a rubric quoting the question); check it is "
                "intended."
            )
        passages = [text for digest, text in value.texts.items() if digest in matched]
        if leaked and value.derived:
            message += DERIVED_NOTE
        self.emit(
            code,
            (WARNING if value.derived else FAILING) if leaked else INFO,
            value.task_id,
            message,
            _evidence(value, labels)
            | {
                "share": round(share, 3),
                "passages_matched": len(matched),
                "passages_total": value.passages,
                "rule": f"{WORDS}-word passages",
            },
            {"passages": passages[:MAX_PASSAGES]} | _eval_path(value),
        )

    def capped(self) -> list[Finding]:
        """At most MAX_FINDINGS_PER_CODE findings of one code, plus a line saying how many
        more."""
        rank = {FAILING: 0, WARNING: 1, INFO: 2}
        kept: list[Finding] = []
        counts: Counter[str] = Counter()
        for finding in sorted(self.found, key=lambda f: rank.get(f.severity, 3)):
            counts[finding.code] += 1
            if counts[finding.code] <= MAX_FINDINGS_PER_CODE:
                kept.append(finding)
        for code, count in counts.items():
            if count > MAX_FINDINGS_PER_CODE:
                severity = next(f.severity for f in kept if f.code == code)
                kept.append(
                    Finding(
                        LEAK,
                        code,
                        severity,
                        None,
                        f"{count - MAX_FINDINGS_PER_CODE} more finding(s) of this kind not listed.",
                        {"not_listed": count - MAX_FINDINGS_PER_CODE},
                    )
                )
        return kept


def _owner(value: SealedValue) -> str:
    if value.task_id is None:
        return "content of a file under the eval root"
    return f"{lane_label(value.lane)} `{value.name}` of task {value.task_id}"


def _evidence(value: SealedValue, labels: list[str]) -> dict[str, Any]:
    return {
        "resource": value.name if value.task_id is not None else "eval-root file",
        "lane": value.lane,
        "places": labels[:20],
    }


def _eval_path(value: SealedValue) -> dict[str, str]:
    return {"eval_path": value.name} if value.task_id is None else {}


def lane_label(lane: str) -> str:
    return {"evaluation_inputs": "evaluation input", "hidden": "hidden value"}.get(lane, lane)


def place_label(place: Place, names: set[str]) -> str:
    kind, name = place
    if kind == "task":
        return f"task {name} ({', '.join(sorted(names))})" if names else f"task {name}"
    if kind == "file":
        return f"public file {name}"
    return f"the pack {kind}"
