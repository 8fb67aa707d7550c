"""short_answer: a short text or numeric answer (spec §3.2, §4.2).

Verification (pure; the candidate is only read). Answer values are the whole candidate and
its focused answer: the text after the first "final answer" / "answer" [is] [:-] on the last
non-empty line, else that whole line. Accepted answers are tried in list order; the first hit
wins, strategies in this order:

1. ``normalized_exact`` — either value, normalised, equals a normalised accepted answer. Always
   allowed, so an accepted answer may itself contain commas or "and" ("salt and pepper").
2. ``numeric_tolerance`` — the first number of the focused answer ("approx 1,234.5 m" →
   1234.5; "-3"; thousands commas only between a digit and three digits) is within
   ``tolerance`` of the accepted answer's number. Applies when ``tolerance`` is set, and also —
   with tolerance 0 — when the accepted answer is a JSON number, so "42.0" matches 42.
3. ``answer_span`` — the accepted answer occurs in the normalised focused answer as whole words
   (a number also with its sign and decimals: "-3" and "3.5" do not contain 3).

Guess lists must not pass. A list is text split into two or more items by , ; | / & newlines,
"or", "and" or "and/or" (a comma between a digit and three digits is a thousands separator):

* no numeric match when the focused answer is a list holding two or more distinct numbers
  ("41 or 42", "3, 4", "between 3 and 5");
* a span match only when, with the accepted answer's occurrences masked, the rest of the
  focused answer is not a list ("in Santa Clara, California" matches "Santa Clara,
  California"; "zeta, alpha" and "zeta or alpha" do not match "zeta") and carries at most
  ``MAX_EXTRA_WORDS`` (1) word beyond the answer — stopwords are free, and the extra word
  may not contain a digit. So "It is gold", "gold colour" and "Mount Everest" pass, and
  "alpha zeta beta" fails for ["zeta"] (upstream let it pass). The price of allowing one
  qualifier word is that a two-word hedge ("alpha zeta") is indistinguishable from a
  qualified answer and passes.

Whole-candidate values are only compared exactly: numbers and spans come from the focused
answer alone, so "42\nAnswer: 43" cannot get two shots. Failures carry ``multiple_answers``
when the focused answer is shaped like a list — a property of the candidate alone, so it
reveals nothing about the accepted answers. Details never hold accepted answers or the
(hidden) tolerance: only counts, the matched index and the strategy.
"""

from __future__ import annotations

import re
from typing import Any

from verifiers.families.base import (
    FamilySpec,
    Field,
    is_non_empty_string,
    is_number,
    non_empty_string,
    non_negative_number,
    string_or_number_array,
    string_or_object,
)
from verifiers.lanes import HIDDEN
from verifiers.task import Candidate, TaskLanes
from verifiers.text import (
    SHORT_ANSWER_KEYWORDS,
    answer_text,
    content_tokens,
    evaluation_value,
    first_number,
    focused_answer,
    normalise,
    numbers_close,
    numbers_in,
    reject_unusable_text,
    split_list_items,
    task_misconfigured,
)
from verifiers.verdict import Reason, Verdict, failed, passed

SPEC = FamilySpec(
    name="short_answer",
    active=True,
    candidate_kind="text",
    eval_lanes={"accepted_answers": HIDDEN, "tolerance": HIDDEN},
    input_fields={
        "question": Field(non_empty_string, required=True),
        "answer_format": Field(non_empty_string),
        # `context` came later upstream (@b3baf659); squad-style packs need it.
        "context": Field(string_or_object),
    },
    eval_fields={
        "accepted_answers": Field(string_or_number_array, required=True),
        # The verifier treats null as "no tolerance", so the schema does too.
        "tolerance": Field(non_negative_number, nullable=True),
    },
)

# Words a span match may carry beyond the accepted answer (stopwords are not counted).
MAX_EXTRA_WORDS = 1
_MASK = "\x00"


def verify(task: TaskLanes, candidate: Candidate) -> Verdict:
    rejection = reject_unusable_text(candidate)
    if rejection is not None:
        return rejection
    accepted = evaluation_value(task, "accepted_answers")
    tolerance = evaluation_value(task, "tolerance")
    if not is_accepted_answer_list(accepted):
        return task_misconfigured("accepted_answers")
    if tolerance is not None and not (is_number(tolerance) and tolerance >= 0):
        return task_misconfigured("tolerance")
    return judge(candidate.text, accepted, tolerance)


def judge(text: str, accepted: list[Any], tolerance: float | None) -> Verdict:
    details: dict[str, Any] = {"accepted_answer_count": len(accepted)}
    whole = text.strip()
    focused = focused_answer(text, SHORT_ANSWER_KEYWORDS)
    for source, value in (("whole_text", whole), ("focused_answer", focused)):
        index = index_of_exact_match(value, accepted)
        if index is not None:
            return matched(details, index, "normalized_exact", source)
    index = index_of_numeric_match(focused, accepted, tolerance)
    if index is not None:
        return matched(details, index, "numeric_tolerance", "focused_answer")
    index = index_of_span_match(focused, accepted)
    if index is not None:
        return matched(details, index, "answer_span", "focused_answer")
    details["multiple_answers"] = is_list(focused)
    return failed(Reason.WRONG_ANSWER, details=details)


def matched(details: dict[str, Any], index: int, strategy: str, source: str) -> Verdict:
    return passed(
        details=details
        | {"matched_answer_index": index, "match_strategy": strategy, "matched_from": source}
    )


def is_accepted_answer_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(is_non_empty_string(item) or is_number(item) for item in value)
    )


# --- strategies ----------------------------------------------------------------------------


def index_of_exact_match(value: str, accepted: list[Any]) -> int | None:
    candidate = normalise(value)
    for index, answer in enumerate(accepted):
        if candidate == normalise(answer_text(answer)):
            return index
    return None


def index_of_numeric_match(value: str, accepted: list[Any], tolerance: float | None) -> int | None:
    candidate = first_number(value)
    if candidate is None or is_number_guess_list(value):
        return None
    for index, answer in enumerate(accepted):
        allowed = allowed_difference(answer, tolerance)
        expected = float(answer) if is_number(answer) else first_number(answer)
        if allowed is None or expected is None:
            continue
        if numbers_close(candidate, expected, allowed):
            return index
    return None


def allowed_difference(answer: Any, tolerance: float | None) -> float | None:
    """The task's tolerance; without one, a JSON-number answer still compares as a number."""
    if tolerance is not None:
        return float(tolerance)
    return 0.0 if is_number(answer) else None


def index_of_span_match(value: str, accepted: list[Any]) -> int | None:
    candidate = normalise(value)
    for index, answer in enumerate(accepted):
        if is_answer_with_little_else(candidate, normalise(answer_text(answer))):
            return index
    return None


def is_answer_with_little_else(candidate: str, answer: str) -> bool:
    """``answer`` occurs as whole words and what is left is neither a list nor a sentence."""
    if not answer:
        return False
    rest, occurrences = re.subn(span_pattern(answer), _MASK, candidate)
    if occurrences == 0 or is_list(rest):
        return False
    extra = content_tokens(rest)
    return len(extra) <= MAX_EXTRA_WORDS and not any(char.isdigit() for char in "".join(extra))


def span_pattern(answer: str) -> str:
    """Whole words; a number also keeps its sign and decimals ("-3" and "3.5" do not hold 3)."""
    before = r"(?<![\w.+\-\u2212])" if answer[0].isdigit() else r"(?<!\w)"
    after = r"(?!\w|[.,]\d)" if answer[-1].isdigit() else r"(?!\w)"
    return before + re.escape(answer) + after


# --- guess lists ---------------------------------------------------------------------------


def is_list(value: str) -> bool:
    return len(split_list_items(value)) >= 2


def is_number_guess_list(value: str) -> bool:
    """ "41 or 42", "3, 4": a list whose items carry two or more different numbers."""
    return is_list(value) and len(set(numbers_in(value))) >= 2
