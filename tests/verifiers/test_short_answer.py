from __future__ import annotations

from typing import Any

import pytest

from verifiers.families import short_answer
from verifiers.scoring import verify_text_family
from verifiers.task import Candidate, TaskLanes
from verifiers.text import MAX_CANDIDATE_CHARS
from verifiers.verdict import Reason, Verdict


def task(accepted: Any, tolerance: Any = None) -> TaskLanes:
    hidden = {"accepted_answers": accepted}
    if tolerance is not None:
        hidden["tolerance"] = tolerance
    return TaskLanes("sa", "short_answer", {"question": "What?"}, {}, hidden)


def verify(text: str, accepted: Any, tolerance: Any = None) -> Verdict:
    return short_answer.verify(task(accepted, tolerance), Candidate.of_text(text))


def strategy(text: str, accepted: Any, tolerance: Any = None) -> str | None:
    verdict = verify(text, accepted, tolerance)
    return verdict.details["match_strategy"] if verdict.passed else None


# --- normalised exact ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["gold", "Gold", " GOLD. ", '"gold"', "Answer: gold", "x\nFinal answer: Gold"]
)
def test_a_normalised_exact_answer_passes(text: str) -> None:
    assert strategy(text, ["gold"]) == "normalized_exact"


def test_the_first_accepted_answer_that_matches_is_reported() -> None:
    verdict = verify("Denver Broncos", ["Broncos", "Denver Broncos"])
    assert verdict.details["matched_answer_index"] == 1
    assert verdict.details["accepted_answer_count"] == 2


def test_an_accepted_answer_with_list_punctuation_matches_exactly() -> None:
    assert verify("Santa Clara, California", ["Santa Clara, California"]).passed
    assert verify("salt and pepper", ["salt and pepper"]).passed


def test_a_wrong_answer_fails() -> None:
    verdict = verify("silver", ["gold"])
    assert (verdict.status, verdict.reason) == ("failed", Reason.WRONG_ANSWER)
    assert verdict.details == {"accepted_answer_count": 1, "multiple_answers": False}


# --- numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["approx 1,234.5 m", "1,234", "Answer: 1235", "about 1234.9 metres"]
)
def test_the_first_number_within_tolerance_passes(text: str) -> None:
    assert strategy(text, [1234.5], tolerance=0.5) == "numeric_tolerance"


@pytest.mark.parametrize("text", ["1,236", "1233", "12345", "no number"])
def test_a_number_outside_tolerance_fails(text: str) -> None:
    assert not verify(text, [1234.5], tolerance=0.5).passed


def test_a_number_span_keeps_its_sign_and_decimals() -> None:
    assert not verify("-3", ["3"]).passed
    assert not verify("3.5", ["3"]).passed
    assert not verify("3,5", ["3"]).passed
    assert strategy("3 apples", ["3"]) == "answer_span"


def test_a_number_inside_a_word_is_not_a_number() -> None:
    assert not verify("CO2", [2], tolerance=0.5).passed


@pytest.mark.parametrize(
    "text", ["-3", "\u22123", "-3.0", "the answer is -3.0", "Answer: -3 degrees"]
)
def test_negative_numbers_keep_their_sign(text: str) -> None:
    assert verify(text, [-3]).passed
    assert not verify(text, [3]).passed


def test_a_json_number_answer_compares_numerically_without_tolerance() -> None:
    assert strategy("42.0", [42]) == "numeric_tolerance"
    assert not verify("42.5", [42]).passed


def test_a_string_answer_without_tolerance_is_not_numeric() -> None:
    assert not verify("42.0", ["42"]).passed


def test_a_string_answer_with_tolerance_uses_its_first_number() -> None:
    assert strategy("about 10", ["10 apples"], tolerance=1) == "numeric_tolerance"


def test_zero_tolerance_still_forgives_float_rounding() -> None:
    assert verify("0.30000000000000004", [0.3], tolerance=0).passed


# --- guess lists ---------------------------------------------------------------------------


def test_upstream_spray_of_words_fails() -> None:
    # Upstream passed this: "zeta" is a whole-word span of the guesses.
    verdict = verify("alpha zeta beta", ["zeta"])
    assert (verdict.status, verdict.reason) == ("failed", Reason.WRONG_ANSWER)


@pytest.mark.parametrize(
    "text",
    [
        "zeta, alpha",
        "alpha, beta, zeta",
        "zeta or alpha",
        "alpha / zeta",
        "zeta; alpha",
        "zeta and alpha",
        "Answer: alpha or zeta",
        "alpha\nAnswer: zeta or beta",
    ],
)
def test_listed_guesses_fail_even_with_the_answer_among_them(text: str) -> None:
    verdict = verify(text, ["zeta"])
    assert verdict.reason == Reason.WRONG_ANSWER
    assert verdict.details["multiple_answers"] is True


@pytest.mark.parametrize(
    "text", ["41 or 42", "41, 42", "42; 43", "40, 41, 42, 43, 44", "between 41 and 43", "1, 234"]
)
def test_listed_numbers_fail_even_within_tolerance(text: str) -> None:
    verdict = verify(text, [42], tolerance=1)
    assert verdict.reason == Reason.WRONG_ANSWER
    assert verdict.details["multiple_answers"] is True


def test_the_same_number_twice_is_not_a_guess_list() -> None:
    assert verify("42, i.e. 42", [42]).passed


def test_numbers_beside_a_span_are_extra_guesses() -> None:
    assert not verify("41 42", ["42"]).passed
    assert not verify("zeta 7", ["zeta"]).passed


def test_a_guess_before_the_answer_line_gets_no_second_shot() -> None:
    assert not verify("42\nAnswer: 43", ["42"]).passed
    assert not verify("42\nAnswer: 43", [42], tolerance=0.5).passed


def test_the_spray_flag_does_not_depend_on_the_answer() -> None:
    assert verify("zeta or alpha", ["zeta"]).details == verify("zeta or alpha", ["x"]).details


# --- spans ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("It is gold.", "gold"),
        ("The colour was gold", "gold"),
        ("gold colour", "gold"),
        ("Mount Everest", "Everest"),
        ("in Santa Clara, California", "Santa Clara, California"),
        ("They are the Denver Broncos", "Denver Broncos"),
    ],
)
def test_an_answer_span_with_at_most_one_extra_word_passes(text: str, accepted: str) -> None:
    assert strategy(text, [accepted]) == "answer_span"


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("alpha zeta beta", "zeta"),
        ("I believe it is probably gold", "gold"),
        ("golden", "gold"),
        ("Santa Clara, California, USA", "Santa Clara, California"),
    ],
)
def test_a_span_with_more_around_it_fails(text: str, accepted: str) -> None:
    assert not verify(text, [accepted]).passed


# --- unusable candidates and misconfigured tasks -------------------------------------------


@pytest.mark.parametrize("text", ["", "  \n "])
def test_an_empty_candidate_is_invalid(text: str) -> None:
    assert verify(text, ["gold"]).reason == Reason.INVALID_CANDIDATE


def test_a_candidate_of_another_kind_is_invalid() -> None:
    verdict = short_answer.verify(task(["gold"]), Candidate.of_patch("gold"))
    assert (verdict.status, verdict.reason) == ("failed", Reason.INVALID_CANDIDATE)


def test_an_overly_long_candidate_is_invalid_even_if_it_holds_the_answer() -> None:
    verdict = verify("gold " * (MAX_CANDIDATE_CHARS // 5 + 1), ["gold"])
    assert verdict.reason == Reason.INVALID_CANDIDATE


@pytest.mark.parametrize(
    "accepted", [None, [], "gold", [""], ["  "], [True], [None], [float("nan")]]
)
def test_bad_accepted_answers_are_a_task_error(accepted: Any) -> None:
    verdict = verify("gold", accepted)
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)


@pytest.mark.parametrize("tolerance", [-1, True, "0.5", float("inf")])
def test_a_bad_tolerance_is_a_task_error(tolerance: Any) -> None:
    verdict = verify("gold", ["gold"], tolerance=tolerance)
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)


# --- the verdict never carries hidden values -----------------------------------------------

MARKER = "HIDDENMARKER-5c21"


@pytest.mark.parametrize(
    "text", [MARKER, f"Answer: {MARKER}", f"it is {MARKER}", f"{MARKER} or x", "wrong", ""]
)
def test_the_verdict_never_echoes_accepted_answers_or_tolerance(text: str) -> None:
    verdict = verify(text, [MARKER, 7319.25], tolerance=0.000731)
    assert MARKER not in repr(verdict)
    assert "7319" not in repr(verdict)
    assert "0.000731" not in repr(verdict)
    assert verdict.stdout == verdict.stderr == ""
    assert verdict.sandbox_backend is None


def test_the_text_dispatcher_sends_short_answer_here() -> None:
    assert verify_text_family(task(["gold"]), Candidate.of_text("gold")).passed
