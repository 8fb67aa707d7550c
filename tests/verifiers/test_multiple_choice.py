from __future__ import annotations

from typing import Any

import pytest

from packs.compiler import compile_pack, compiled_task_lanes
from tests.conftest import EXAMPLES, reference_packs_or_skip
from verifiers.families import multiple_choice
from verifiers.oracle import oracle_candidate
from verifiers.scoring import verify_text_family
from verifiers.task import Candidate, TaskLanes
from verifiers.text import MAX_CANDIDATE_CHARS
from verifiers.verdict import Reason, Verdict

CHOICES = ["first", "second", "third", "fourth"]
# Real multiple-choice packs: our example (answers as a letter, an index and a choice's text),
# then the reference packs' MMLU sample when present.
MC_PACKS = ["examples/arithmetic-mc", "reference/mmlu-abstract-algebra-mini"]


def task(answer: Any, choices: Any = None) -> TaskLanes:
    return TaskLanes(
        task_id="mc",
        family="multiple_choice",
        public={"question": "Which one?", "choices": CHOICES if choices is None else choices},
        evaluation_inputs={},
        hidden={"answer": answer},
    )


def verify(text: str, answer: Any = "B", choices: Any = None) -> Verdict:
    return multiple_choice.verify(task(answer, choices), Candidate.of_text(text))


# --- spec §4.1 worked examples and label forms ---------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "B",
        "b",
        "(B)",
        "[b]",
        "B.",
        "**B**",
        "option b.",
        "answer is b",
        "Final answer: B",
        "Answer: B",
        "**Answer:** B",
        "Answer - B",
        "…reasoning…\nAnswer: second",
        "Q(sqrt 2) has degree 2.\nThe correct option is (b)",
        "second",
        "Second.",
        "B) second",
        "(b) second",
    ],
)
def test_the_right_choice_passes(text: str) -> None:
    verdict = verify(text)
    assert verdict.passed, verdict
    assert verdict.score == 1.0
    assert verdict.details["answered_choice_index"] == 1


@pytest.mark.parametrize(
    "text",
    ["A", "option d.", "answer is a", "Final answer: C", "reasoning\nAnswer: first", "fourth"],
)
def test_another_choice_fails(text: str) -> None:
    verdict = verify(text)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.WRONG_ANSWER
    assert verdict.details["multiple_answers"] is False


def test_a_hedged_last_line_without_a_keyword_fails() -> None:
    verdict = verify("I think it's B")
    assert verdict.reason == Reason.WRONG_ANSWER
    assert verdict.details == {
        "choice_count": 4,
        "multiple_answers": False,
        "answered_choice_index": None,
    }


def test_an_explained_answer_line_fails_as_upstream() -> None:
    verdict = verify("Answer: B, because it is the second one")
    assert verdict.reason == Reason.WRONG_ANSWER
    assert verdict.details["answered_choice_index"] is None


def test_the_pass_says_how_and_where_it_matched() -> None:
    assert verify("work\nAnswer: second").details == {
        "choice_count": 4,
        "match_strategy": "choice_text",
        "matched_from": "focused_answer",
        "answered_choice_index": 1,
    }
    assert verify("B").details["match_strategy"] == "label"
    assert verify("B) second").details["match_strategy"] == "label_and_text"


def test_a_label_beyond_the_choices_is_not_a_label() -> None:
    assert verify("E").reason == Reason.WRONG_ANSWER


# --- answer forms --------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [1, 1.0, "B", "b", "(B)", "option b", "second", "Second."])
def test_the_answer_may_be_an_index_a_label_or_a_choice_text(answer: Any) -> None:
    assert verify("B", answer=answer).passed
    assert verify("second", answer=answer).passed
    assert not verify("A", answer=answer).passed


def test_index_zero_is_the_first_choice() -> None:
    assert verify("A", answer=0).passed
    assert verify("first", answer=0).passed


def test_any_answer_of_a_list_is_right() -> None:
    assert verify("A", answer=["A", 2]).passed
    assert verify("third", answer=["A", 2]).passed
    assert not verify("B", answer=["A", 2]).passed


def test_a_candidate_naming_two_listed_answers_still_sprays() -> None:
    verdict = verify("A, C", answer=["A", 2])
    assert verdict.details["multiple_answers"] is True


def test_a_label_like_single_letter_choice_text_resolves_to_its_text() -> None:
    assert verify("y", answer="y", choices=["x", "y", "z"]).passed


def test_a_literal_answer_that_is_no_choice_must_be_given_exactly() -> None:
    assert verify("Answer: none of these", answer="None of these").passed
    assert not verify("B", answer="None of these").passed


def test_a_choice_text_with_a_comma_is_one_answer() -> None:
    choices = ["0", "1", "0,1", "0,4"]
    assert verify("0,1", answer="C", choices=choices).passed
    assert verify("Answer: 0,4", answer="D", choices=choices).passed
    assert verify("0, 1", answer="C", choices=choices).details["multiple_answers"] is True


def test_duplicate_choice_texts_count_as_one_choice() -> None:
    choices = ["same", "other", "same"]
    assert verify("same", answer=2, choices=choices).passed
    assert verify("A", answer=2, choices=choices).passed


# --- spraying ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The answer is A, B, C, and D.",
        "A, B, C and D",
        "A or B",
        "A or B or C or D",
        "Answer: A or B",
        "Answers: A, B",
        "A/B",
        "A & B",
        "A; B",
        "A B C D",
        "(A) (B)",
        "A\nB\nC\nD",
        "first\nsecond\nthird\nfourth",
        "first, second, third, fourth",
        "second or third",
        "B and second and third",
        "Answer: B or maybe C",
        "B\nAnswer: C",
        "B) first",
        "reasoning\nFinal answer: B, D",
    ],
)
def test_naming_several_choices_fails_even_when_one_is_right(text: str) -> None:
    verdict = verify(text)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.WRONG_ANSWER
    assert verdict.details["multiple_answers"] is True
    assert verdict.details["named_choice_count"] >= 2


# Shapes that hid a spray: a line of choices above the answer line, and choice texts that
# hold a list separator ("3/8"), which the list reading used to cut into pieces naming nothing.
FRACTIONS = ["5/16", "3/5", "3/8", "7/20"]


@pytest.mark.parametrize(
    "text",
    [
        "A, B, D\nAnswer: 3/8",
        "A\nB\nC\nD\n3/8",
        "A\nAnswer: 3/8",
        "5/16\nAnswer: 3/8",
        "3/8\nAnswer: 5/16",
        "3/8, 5/16",
        "Answer: 3/5 or 3/8",
        "(A) (B)\nAnswer: 3/8",
        "(A), (D)\nFinal answer: C",
        "Let me think.\nA, D\nAnswer: C",
        "Working it out:\n3/8 or 7/20\nAnswer: 3/8",
        "C) 5/16\nAnswer: C",
    ],
)
def test_a_line_of_choices_or_a_separator_in_a_choice_text_still_sprays(text: str) -> None:
    verdict = verify(text, answer="C", choices=FRACTIONS)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.WRONG_ANSWER
    assert verdict.details["multiple_answers"] is True


@pytest.mark.parametrize(
    "text",
    [
        "3/8",
        "Answer: 3/8",
        "C) 3/8",
        "0.375 = 3/8, so not 5/16 or 3/5.\nAnswer: 3/8",
        "(A) and (D) are too small; 3/5 is too big.\nAnswer: C",
        "Which fraction is equal to 0.375?\nAnswer: C",
        "C\nAnswer: 3/8",
    ],
)
def test_honest_answers_around_choice_texts_with_separators_pass(text: str) -> None:
    verdict = verify(text, answer="C", choices=FRACTIONS)
    assert verdict.passed, verdict


def test_repeating_the_same_choice_is_not_spraying() -> None:
    assert verify("B\nAnswer: B").passed
    assert verify("Answer: B) second").passed


def test_reasoning_that_mentions_other_choices_is_not_spraying() -> None:
    text = "A is wrong, C too, and D is absurd.\nSo the degree is 4.\nAnswer: B"
    assert verify(text).passed


def test_the_spray_flag_does_not_depend_on_the_answer() -> None:
    for answer in ("A", "B", "C", "D"):
        assert verify("A or B", answer=answer).details == {
            "choice_count": 4,
            "multiple_answers": True,
            "named_choice_count": 2,
        }


# --- unusable candidates and misconfigured tasks -------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_an_empty_candidate_is_invalid(text: str) -> None:
    verdict = verify(text)
    assert (verdict.status, verdict.reason) == ("failed", Reason.INVALID_CANDIDATE)


def test_a_candidate_of_another_kind_is_invalid() -> None:
    verdict = multiple_choice.verify(task("B"), Candidate.of_code("B"))
    assert verdict.reason == Reason.INVALID_CANDIDATE
    assert verdict.details["candidate_kind"] == "code"


def test_an_overly_long_candidate_is_invalid() -> None:
    verdict = verify("B" + " " * MAX_CANDIDATE_CHARS)
    assert verdict.reason == Reason.INVALID_CANDIDATE


@pytest.mark.parametrize(
    "choices", [[], "first", ["a", ""], ["a", 3], [f"c{i}" for i in range(27)]]
)
def test_bad_choices_are_a_task_error(choices: Any) -> None:
    verdict = verify("A", choices=choices)
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)


@pytest.mark.parametrize("answer", [None, True, 7, -1, 1.5, "E", [], [True, 9]])
def test_an_answer_naming_no_choice_is_a_task_error(answer: Any) -> None:
    verdict = verify("A", answer=answer)
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)


def test_an_answer_in_evaluation_inputs_is_found_too() -> None:
    lanes = TaskLanes("mc", "multiple_choice", {"choices": CHOICES}, {"answer": "B"}, {})
    assert multiple_choice.verify(lanes, Candidate.of_text("B")).passed


# --- the verdict never carries the hidden answer -------------------------------------------

MARKER = "HIDDENMARKER-7f3a"


@pytest.mark.parametrize(
    "text", [MARKER, "B", "A", f"{MARKER} or other", f"Answer: {MARKER}", "", "I don't know"]
)
def test_the_verdict_never_echoes_the_answer(text: str) -> None:
    verdict = verify(text, answer=MARKER, choices=["other", MARKER])
    assert MARKER not in repr(verdict)
    assert verdict.stdout == verdict.stderr == ""
    assert verdict.sandbox_backend is None


def test_a_literal_answer_is_not_echoed_either() -> None:
    verdict = verify(f"Answer: {MARKER}", answer=MARKER)
    assert verdict.passed
    assert MARKER not in repr(verdict)


# --- dispatch and the reference pack -------------------------------------------------------


def test_the_text_dispatcher_sends_multiple_choice_here() -> None:
    assert verify_text_family(task("B"), Candidate.of_text("B")).passed


def test_the_text_dispatcher_refuses_other_families() -> None:
    lanes = TaskLanes("cc", "code_completion", {}, {}, {})
    verdict = verify_text_family(lanes, Candidate.of_code("pass"))
    assert (verdict.status, verdict.reason) == ("error", Reason.NO_VERIFIER)


def pack_tasks(name: str) -> list[TaskLanes]:
    """The tasks of a real pack, split into lanes by the compiler."""
    where, pack = name.split("/")
    folder = EXAMPLES / pack if where == "examples" else reference_packs_or_skip() / pack
    compiled = compile_pack(folder)
    return [compiled_task_lanes(task, compiled.files) for task in compiled.tasks]


@pytest.mark.parametrize("name", MC_PACKS)
def test_real_pack_oracle_answers_all_pass(name: str) -> None:
    tasks = pack_tasks(name)
    assert len(tasks) >= 3
    for lanes in tasks:
        verdict = verify_text_family(lanes, oracle_candidate(lanes))
        assert verdict.passed, (lanes.task_id, verdict)


# "{letter}" stands for the right choice's letter and "{oracle}" for the task's own reference
# answer (a letter, an index or the choice's text): a spray that ends on either must fail.
SPRAYS = [
    "A, B, C and D",
    "",
    "A\nB\nC\nD\nAnswer: D",
    "A\nB\nC\nD\nAnswer: {letter}",
    "A\nB\nC\nD\n{oracle}",
    "A, B, D\n{oracle}",
    "(A) (B) (C) (D)\n{oracle}",
    "Let me think.\nA, D\n{oracle}",
]


@pytest.mark.parametrize("text", SPRAYS)
@pytest.mark.parametrize("name", MC_PACKS)
def test_real_pack_sprays_and_empty_answers_all_fail(name: str, text: str) -> None:
    for lanes in pack_tasks(name):
        oracle = oracle_candidate(lanes)
        assert oracle is not None and oracle.text is not None
        right = verify_text_family(lanes, oracle).details["answered_choice_index"]
        spray = text.replace("{oracle}", oracle.text).replace("{letter}", "ABCD"[right])
        verdict = verify_text_family(lanes, Candidate.of_text(spray))
        assert verdict.status == "failed", (lanes.task_id, spray, verdict)
