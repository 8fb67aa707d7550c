"""free_response: an open answer scored against a structured rubric (spec §3.3, §4.3).

Verification (pure; the candidate is only read). The rubric is an object: ``type``
``contains_any`` (the default and the only type), ``accepted_answers`` (non-empty strings),
optional ``rejected_answers`` (same) and ``min_token_f1`` in [0, 1], default 1.0. Anything
else — a string rubric, an unknown type, an empty or non-string answer, a boolean or
out-of-range threshold — is ``error``/``task_misconfigured`` (upload validation should have
refused it; we check again rather than guess).

* Containment: an answer, normalised (lowercase, "u.s." → "united states", whitespace
  collapsed, edge punctuation stripped), occurs in the normalised candidate as whole words.
* Token F1 over the whole candidate, stopwords dropped (spec §4.3); a score of 0 never counts.
* Matched: the first accepted answer contained; else the best-F1 accepted answer when its F1
  reaches ``min_token_f1``.
* Rejected: the first rejected answer contained — so a rejected phrase fails the candidate even
  next to an accepted one ("safe … forbidden exploit marker"); else the best-F1 rejected answer
  when its F1 reaches ``min_token_f1`` and is at least the best accepted F1.
* Pass iff matched and not rejected.

A candidate that contains an accepted answer among many other claims still passes unless the
rubric rejects one of them; the 20,000-character cap bounds how much it can say. Details hold
counts, indexes and strategies only — never the answers, the threshold or F1 scores, which
would let a submitter climb towards a hidden answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifiers.families.base import (
    FamilySpec,
    Field,
    FieldProblem,
    is_non_empty_string,
    is_number,
    non_empty_string,
    non_empty_string_or_object,
)
from verifiers.lanes import HIDDEN
from verifiers.task import Candidate, TaskLanes
from verifiers.text import (
    best_token_f1,
    contains_phrase,
    evaluation_value,
    normalise_free_text,
    reject_unusable_text,
    task_misconfigured,
)
from verifiers.verdict import Reason, Verdict, failed, passed


def rubric(value: Any, path: str) -> list[FieldProblem]:
    # Upstream accepts a string rubric here and then fails every verification of it;
    # refusing it at upload is kinder than a pack whose tasks can never pass.
    if isinstance(value, dict):
        return []
    if isinstance(value, str):
        return [
            (
                path,
                "must be an object such as {type: contains_any, accepted_answers: [...]};"
                " a string rubric cannot be verified",
            )
        ]
    return [(path, "must be an object")]


SPEC = FamilySpec(
    name="free_response",
    active=True,
    candidate_kind="text",
    eval_lanes={"reference_answer": HIDDEN, "rubric": HIDDEN},
    input_fields={
        "prompt": Field(non_empty_string, required=True),
        "context": Field(non_empty_string_or_object),
    },
    eval_fields={
        "reference_answer": Field(non_empty_string),
        "rubric": Field(rubric, required=True),
    },
)

RUBRIC_TYPE = "contains_any"
DEFAULT_MIN_TOKEN_F1 = 1.0


@dataclass(frozen=True)
class Rubric:
    accepted: tuple[str, ...]
    rejected: tuple[str, ...]
    min_token_f1: float


@dataclass(frozen=True)
class Hit:
    index: int
    strategy: str  # "containment" or "token_f1"


def verify(task: TaskLanes, candidate: Candidate) -> Verdict:
    rejection = reject_unusable_text(candidate)
    if rejection is not None:
        return rejection
    rubric = read_rubric(evaluation_value(task, "rubric"))
    if rubric is None:
        return task_misconfigured("rubric")
    return judge(candidate.text, rubric)


def judge(text: str, rubric: Rubric) -> Verdict:
    accepted_f1, accepted_best = best_token_f1(text, rubric.accepted)
    match = first_contained(text, rubric.accepted)
    if match is None and accepted_best is not None and accepted_f1 >= rubric.min_token_f1:
        match = Hit(accepted_best, "token_f1")
    rejection = first_contained(text, rubric.rejected) or rejection_by_f1(text, rubric, accepted_f1)
    details: dict[str, Any] = {
        "rubric_type": RUBRIC_TYPE,
        "accepted_answer_count": len(rubric.accepted),
        "rejected_answer_count": len(rubric.rejected),
        "matched_answer_index": match.index if match else None,
        "match_strategy": match.strategy if match else None,
        "rejected_answer_index": rejection.index if rejection else None,
        "rejection_strategy": rejection.strategy if rejection else None,
    }
    if match is not None and rejection is None:
        return passed(details=details)
    return failed(Reason.WRONG_ANSWER, details=details)


def rejection_by_f1(text: str, rubric: Rubric, accepted_f1: float) -> Hit | None:
    """A rejected answer wins on F1 only when it reaches the threshold and ties or beats."""
    rejected_f1, rejected_best = best_token_f1(text, rubric.rejected)
    if rejected_best is None or rejected_f1 < max(rubric.min_token_f1, accepted_f1):
        return None
    return Hit(rejected_best, "token_f1")


def first_contained(text: str, answers: tuple[str, ...]) -> Hit | None:
    candidate = normalise_free_text(text)
    for index, answer in enumerate(answers):
        if contains_phrase(candidate, normalise_free_text(answer)):
            return Hit(index, "containment")
    return None


# --- the rubric ----------------------------------------------------------------------------


def read_rubric(value: Any) -> Rubric | None:
    """The rubric as checked data, or None when it is malformed."""
    if not isinstance(value, dict):
        return None
    # Other keys (notes, a reference answer copy) are ignored, as upstream does.
    if value.get("type", RUBRIC_TYPE) != RUBRIC_TYPE:
        return None
    accepted = answer_list(value.get("accepted_answers"))
    rejected = answer_list(value.get("rejected_answers") or [])
    threshold = value.get("min_token_f1")
    if threshold is None:
        threshold = DEFAULT_MIN_TOKEN_F1
    if not accepted or rejected is None:
        return None
    if not is_number(threshold) or not 0 <= threshold <= 1:
        return None
    return Rubric(accepted, rejected, float(threshold))


def answer_list(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not all(is_non_empty_string(item) for item in value):
        return None
    answers = tuple(item.strip() for item in value)
    # An answer made only of punctuation normalises to nothing and would match everywhere.
    if not all(normalise_free_text(answer) for answer in answers):
        return None
    return answers
