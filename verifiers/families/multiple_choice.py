"""multiple_choice: pick one of several choices (spec §3.1, §4.1); the answer is hidden.

Verification (pure; the candidate is only read):

* Expected choices. ``answer`` is one item or a list of them, any of which is right: an
  integer (or integral float) is a 0-based index; a string is a label ("B", "option b") when
  it names an existing choice, else a choice's text; a multi-character string that is neither
  is kept as a literal answer. Booleans, out-of-range indexes and out-of-range single letters
  count for nothing; no usable answer (or bad choices: empty, non-string, more than 26) is
  ``error``/``task_misconfigured``.
* Answer values. The whole candidate and its focused answer: the text after the first
  "final answer" / "answer" / "choice" / "option" [is] [:-] on the last non-empty line, else
  that whole line (spec §4.1).
* Naming a choice. A value names a choice when, as a whole, it is that choice's label (with an
  optional keyword prefix, brackets and emphasis: "B", "(b)", "option d.", "answer is a",
  "**B**"), its text ("second", "Answer: second"), or its label followed by its own text
  ("B) second"). A label with another choice's text ("B) first") names both.
* Spraying. A value that is a list — items split on , ; | / & newlines, "or", "and",
  "and/or", or a run of bare labels ("A B C D") — names every choice its items name (a
  leading hedge word is skipped: "B or maybe C"). A choice text that holds a separator stays
  one item ("3/8, 5/16" is two choices, not four numbers). For the focused answer every item
  counts ("A or B", "2, 4 or 6"); for the whole candidate and for each of its lines only a
  text made of nothing but such items counts ("A\\nB\\nC\\nD", a line "A, B, D" above
  "Answer: 3/8"), so reasoning that mentions choices is not mistaken for a list. A value
  that as a whole is one choice's text is never split ("0,1" may be a choice). If the values
  and lines together name two or more distinct choices, the candidate fails ``wrong_answer``
  with ``multiple_answers: true`` — even if one of them is right. The flag depends only on
  the candidate's shape, so it reveals nothing about the answer.
* Passing. Otherwise the candidate passes iff one of its values names exactly one choice and
  that choice is expected, or equals a literal answer. Hedged or explained answers on the
  answer line ("B, because …", "I think it's B") fail, as upstream.

Details hold the choice count, the strategy and where the answer was found, the index of
the choice the candidate named, and ``multiple_answers`` — never the expected answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from verifiers.families.base import (
    FamilySpec,
    Field,
    is_number,
    non_empty_string,
    string_array,
    string_number_or_array,
)
from verifiers.lanes import HIDDEN
from verifiers.task import Candidate, TaskLanes
from verifiers.text import (
    MULTIPLE_CHOICE_KEYWORDS,
    evaluation_value,
    focused_answer,
    normalise,
    reject_unusable_text,
    split_list_items,
    strip_answer_prefix,
    task_misconfigured,
    undecorate,
    undecorate_normalised,
)
from verifiers.verdict import Reason, Verdict, failed, passed

SPEC = FamilySpec(
    name="multiple_choice",
    active=True,
    candidate_kind="text",
    eval_lanes={"answer": HIDDEN},
    input_fields={
        "question": Field(non_empty_string, required=True),
        "choices": Field(string_array, required=True),
    },
    eval_fields={"answer": Field(string_number_or_array, required=True)},
)

MAX_CHOICES = 26  # labels A–Z

_HEDGE = re.compile(
    r"^(?:maybe|perhaps|possibly|probably|likely|either|both|also|alternatively)\b[\s,:]*",
    re.IGNORECASE,
)
_LABEL_AND_TEXT = re.compile(r"^[(\[]?([a-z])\s*[)\].:\-\u2013\u2014]\s*(\S.*)$")


@dataclass(frozen=True)
class Choices:
    keys: tuple[str, ...]  # normalised choice texts
    bare_keys: tuple[str, ...]  # the same without emphasis or brackets
    # How many list items each choice text splits into ("3/8" is two), longest first: a list
    # is also read in runs of these lengths, so a choice text is not cut at its separators.
    run_lengths: tuple[int, ...]

    @classmethod
    def of(cls, texts: list[str]) -> Choices:
        keys = tuple(normalise(text) for text in texts)
        lengths = {len(split_list_items(text)) for text in texts}
        return cls(
            keys=keys,
            bare_keys=tuple(undecorate_normalised(key) for key in keys),
            run_lengths=tuple(sorted((n for n in lengths if n > 1), reverse=True)),
        )

    def __len__(self) -> int:
        return len(self.keys)

    def same_as(self, index: int) -> int:
        """Choices with the same text are one choice: the first index stands for them all."""
        return self.keys.index(self.keys[index])

    def index_of_label(self, text: str) -> int | None:
        letter = undecorate(text)
        if len(letter) > 1:
            # A keyword prefix needs more than one character; a bare letter has none to strip.
            letter = undecorate(strip_answer_prefix(letter, MULTIPLE_CHOICE_KEYWORDS))
        if not is_single_letter(letter) or not "a" <= letter <= "z":
            return None
        index = ord(letter) - ord("a")
        return self.same_as(index) if index < len(self) else None

    def index_of_text(self, text: str) -> int | None:
        form = normalise(text)
        if form and form in self.keys:
            return self.same_as(self.keys.index(form))
        bare = undecorate_normalised(form)
        if bare and bare in self.bare_keys:
            return self.same_as(self.bare_keys.index(bare))
        return None


@dataclass(frozen=True)
class Expected:
    choices: frozenset[int]
    literals: frozenset[str]


class Naming(NamedTuple):
    choices: frozenset[int]
    strategy: str


NAMES_NOTHING = Naming(frozenset(), "none")


def verify(task: TaskLanes, candidate: Candidate) -> Verdict:
    rejection = reject_unusable_text(candidate)
    if rejection is not None:
        return rejection
    choices = read_choices(task.public.get("choices"))
    if choices is None:
        return task_misconfigured("choices")
    expected = expected_answers(evaluation_value(task, "answer"), choices)
    if expected is None:
        return task_misconfigured("answer")
    return judge(answer_values(candidate.text), choices, expected)


def judge(values: dict[str, str], choices: Choices, expected: Expected) -> Verdict:
    details: dict[str, Any] = {"choice_count": len(choices)}
    # Each value is read as a whole once: the spray check and the match below both need it,
    # and the whole text is often the focused answer too ("B").
    namings: dict[str, Naming] = {}
    for value in values.values():
        if value not in namings:
            namings[value] = choice_named_by(value, choices)
    named = frozenset().union(
        *(
            choices_listed_by(
                value,
                choices,
                every_item_counts=source == "focused_answer",
                as_a_whole=namings[value],
            )
            for source, value in values.items()
        ),
        choices_named_on_lines(values["whole_text"], choices),
    )
    if len(named) > 1:
        details |= {"multiple_answers": True, "named_choice_count": len(named)}
        return failed(Reason.WRONG_ANSWER, details=details)
    answered: int | None = None
    for source, value in values.items():
        naming = namings[value]
        if naming.choices:
            (answered,) = naming.choices
            if answered in expected.choices:
                details |= {"match_strategy": naming.strategy, "matched_from": source}
                return passed(details=details | {"answered_choice_index": answered})
        if expected.literals and literal_of(value) in expected.literals:
            return passed(details=details | {"match_strategy": "literal", "matched_from": source})
    details |= {"multiple_answers": False, "answered_choice_index": answered}
    return failed(Reason.WRONG_ANSWER, details=details)


# --- the task ------------------------------------------------------------------------------


def read_choices(value: Any) -> Choices | None:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_CHOICES:
        return None
    if not all(isinstance(text, str) for text in value):
        return None
    choices = Choices.of(value)
    return choices if all(choices.keys) else None


def expected_answers(answer: Any, choices: Choices) -> Expected | None:
    indexes: set[int] = set()
    literals: set[str] = set()
    for item in answer if isinstance(answer, list) else [answer]:
        if is_number(item):
            if float(item).is_integer() and 0 <= int(item) < len(choices):
                indexes.add(choices.same_as(int(item)))
        elif isinstance(item, str) and normalise(item):
            index = choices.index_of_label(item)
            if index is None:
                index = choices.index_of_text(item)
            if index is not None:
                indexes.add(index)
            elif not is_single_letter(undecorate(item)):
                literals.add(literal_of(item))
    if not indexes and not literals:
        return None
    return Expected(frozenset(indexes), frozenset(literals))


def is_single_letter(text: str) -> bool:
    return len(text) == 1 and text.isalpha()


# --- the candidate -------------------------------------------------------------------------


def answer_values(text: str) -> dict[str, str]:
    # The focused answer is kept even when it is the whole text: the stricter list rule for
    # the whole text must not let a one-line "A or maybe B" escape the focused-answer rule.
    return {
        "whole_text": text.strip(),
        "focused_answer": focused_answer(text, MULTIPLE_CHOICE_KEYWORDS),
    }


def literal_of(text: str) -> str:
    return normalise(strip_answer_prefix(text, MULTIPLE_CHOICE_KEYWORDS))


def choice_named_by(item: str, choices: Choices) -> Naming:
    """The choice(s) one answer item names as a whole, and how."""
    index = choices.index_of_label(item)
    if index is not None:
        return Naming(frozenset({index}), "label")
    index = choices.index_of_text(strip_answer_prefix(item, MULTIPLE_CHOICE_KEYWORDS))
    if index is None:
        index = choices.index_of_text(item)
    if index is not None:
        return Naming(frozenset({index}), "choice_text")
    return label_with_text(item, choices)


def label_with_text(item: str, choices: Choices) -> Naming:
    """ "B) second": a label and a choice text; two different choices when they disagree."""
    bare = normalise(strip_answer_prefix(undecorate(item), MULTIPLE_CHOICE_KEYWORDS))
    match = _LABEL_AND_TEXT.match(bare)
    if match is None:
        return NAMES_NOTHING
    label = choices.index_of_label(match.group(1))
    text = choices.index_of_text(match.group(2))
    if label is None or text is None:
        return NAMES_NOTHING
    return Naming(frozenset({label, text}), "label_and_text")


def labels_in_a_row(item: str, choices: Choices) -> frozenset[int]:
    """ "A B C D": two or more bare labels separated by spaces."""
    words = normalise(strip_answer_prefix(item, MULTIPLE_CHOICE_KEYWORDS)).split()
    indexes = [choices.index_of_label(word) for word in words]
    if len(indexes) < 2 or None in indexes:
        return frozenset()
    return frozenset(index for index in indexes if index is not None)


def choices_in_item(item: str, choices: Choices, naming: Naming | None = None) -> frozenset[int]:
    """What an item names as a whole (``naming``, when the caller already read it that way),
    else as a run of bare labels."""
    if naming is None:
        naming = choice_named_by(item, choices)
    return naming.choices or labels_in_a_row(item, choices)


def without_hedge(item: str) -> str:
    """ "maybe C" in "B or maybe C" names C."""
    return _HEDGE.sub("", item.strip(), count=1)


def choices_listed_by(
    value: str, choices: Choices, *, every_item_counts: bool, as_a_whole: Naming | None = None
) -> frozenset[int]:
    """Every choice a value names, reading it as a list when it is not one choice as a whole."""
    whole = choices_in_item(value, choices, as_a_whole)
    if whole:
        return whole
    items = item_spans(value)
    if len(items) < 2:
        return frozenset()
    named: set[int] = set()
    start = 0
    while start < len(items):
        end, found = longest_naming_span(value, items, start, choices)
        if not found and not every_item_counts:
            return frozenset()  # prose, not a list
        named |= found
        if every_item_counts and len(named) > 1:
            break  # already a spray; no need to read a long list to its end
        start = end
    return frozenset(named)


def item_spans(value: str) -> list[tuple[int, int]]:
    """Where each list item of ``value`` sits in it: the items are its stripped substrings, in
    order, so each is found after the one before."""
    spans: list[tuple[int, int]] = []
    position = 0
    for item in split_list_items(value):
        start = value.index(item, position)
        position = start + len(item)
        spans.append((start, position))
    return spans


def longest_naming_span(
    value: str, items: list[tuple[int, int]], start: int, choices: Choices
) -> tuple[int, frozenset[int]]:
    """The longest run of items from ``start`` that names a choice ("3/8" is the items "3" and
    "8"), and what it names; a single item that names nothing is passed over."""
    for length in choices.run_lengths:
        end = start + length
        if end > len(items):
            continue
        # A run of several items can only be one choice's text (with its label or prefix);
        # runs of bare labels are read item by item below.
        text = without_hedge(value[items[start][0] : items[end - 1][1]])
        found = choice_named_by(text, choices).choices
        if found:
            return end, found
    item = value[items[start][0] : items[start][1]]
    return start + 1, choices_in_item(without_hedge(item), choices)


def choices_named_on_lines(text: str, choices: Choices) -> frozenset[int]:
    """Every choice named by a line that is nothing but choices: a line "A, B, D" or "(A) (C)"
    above "Answer: 3/8" is a guess like the answer line, so it counts even when the whole
    text, read as one list, is not one. A line of prose that mentions choices ("A is wrong,
    C too") names nothing, as for the whole text."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return frozenset()  # one line is the whole text, already read
    return frozenset().union(
        *(choices_listed_by(line, choices, every_item_counts=False) for line in lines)
    )
