from __future__ import annotations

import pytest

from verifiers.task import Candidate
from verifiers.text import (
    MAX_CANDIDATE_CHARS,
    MULTIPLE_CHOICE_KEYWORDS,
    SHORT_ANSWER_KEYWORDS,
    best_token_f1,
    contains_phrase,
    content_tokens,
    first_number,
    focused_answer,
    normalise,
    normalise_free_text,
    numbers_in,
    reject_unusable_text,
    split_list_items,
    strip_answer_prefix,
    token_f1,
    undecorate,
)
from verifiers.verdict import Reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Hello   World. ", "hello world"),
        ('"gold";', "gold"),
        ("`x`:", "x"),
        ("Gold!", "gold"),
        ("line one\n\tline two", "line one line two"),
    ],
)
def test_normalise_trims_lowercases_collapses_and_strips_edges(text: str, expected: str) -> None:
    assert normalise(text) == expected


def test_free_text_normalisation_spells_out_us() -> None:
    assert normalise_free_text("Made in the U.S.") == "made in the united states"


def test_undecorate_drops_emphasis_and_brackets() -> None:
    assert undecorate("**(B)**") == "b"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", "B"),
        ("Final answer: B", "B"),
        ("reasoning\nmore reasoning\nAnswer: second\n\n", "second"),
        ("The answer is A, B, C, and D.", "A, B, C, and D."),
        ("I think it's B", "I think it's B"),
        ("Answer - C", "C"),
        ("the correct option is (d)", "(d)"),
        ("Answers: A, B", "A, B"),
        ("the answer is -3.0", "-3.0"),
    ],
)
def test_focused_answer_reads_the_last_line_after_a_keyword(text: str, expected: str) -> None:
    assert focused_answer(text, MULTIPLE_CHOICE_KEYWORDS) == expected


def test_short_answer_keywords_ignore_option_and_choice() -> None:
    assert focused_answer("my choice: gold", SHORT_ANSWER_KEYWORDS) == "my choice: gold"


def test_keyword_inside_a_longer_word_is_not_a_keyword() -> None:
    assert focused_answer("I answered gold", SHORT_ANSWER_KEYWORDS) == "I answered gold"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Answer: B", "B"), ("option d.", "d."), ("answer is a", "a"), ("answers -3", "-3")],
)
def test_strip_answer_prefix(text: str, expected: str) -> None:
    assert strip_answer_prefix(text, MULTIPLE_CHOICE_KEYWORDS) == expected


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("A, B, C and D", ["A", "B", "C", "D"]),
        ("A or B", ["A", "B"]),
        ("x and/or y", ["x", "y"]),
        ("a; b | c / d & e\nf", ["a", "b", "c", "d", "e", "f"]),
        ("0,1", ["0", "1"]),
        ("approx 1,234.5 m", ["approx 1,234.5 m"]),
        ("1, 234", ["1", "234"]),
        ("order for ands", ["order for ands"]),
        ("The answer is A, B, C, and D.", ["The answer is A", "B", "C", "D."]),
    ],
)
def test_split_list_items(text: str, items: list[str]) -> None:
    assert split_list_items(text) == items


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("approx 1,234.5 m", [1234.5]),
        ("-3 and +4", [-3.0, 4.0]),
        ("\u22127.5", [-7.5]),
        ("COVID-19 in 2020", [19.0, 2020.0]),
        ("CO2", []),
        ("1e3 units", [1000.0]),
        (".5", [0.5]),
        ("1,234,567", [1234567.0]),
    ],
)
def test_numbers_in(text: str, numbers: list[float]) -> None:
    assert numbers_in(text) == numbers


def test_first_number_is_none_without_digits() -> None:
    assert first_number("no digits here") is None


def test_contains_phrase_needs_word_boundaries() -> None:
    assert contains_phrase("it was gold.", "gold")
    assert not contains_phrase("golden gate", "gold")
    assert not contains_phrase("anything", "")


def test_content_tokens_drop_stopwords() -> None:
    assert content_tokens("It is the gold one") == ["gold", "one"]


def test_token_f1_matches_the_spec_formula() -> None:
    # candidate: they, originated, japan — answer: fortune, cookies, originated, california
    score = token_f1("They originated in Japan.", "Fortune cookies originated in California")
    assert score == pytest.approx(2 / 7)


def test_token_f1_is_zero_without_content_tokens() -> None:
    assert token_f1("the of and", "the of and") == 0.0


def test_best_token_f1_keeps_the_first_of_equal_scores() -> None:
    assert best_token_f1("red apple", ["red car", "red bus"]) == (pytest.approx(0.5), 0)
    assert best_token_f1("zzz", ["red", "blue"]) == (0.0, None)


def test_a_text_candidate_with_content_is_usable() -> None:
    assert reject_unusable_text(Candidate.of_text("B")) is None


@pytest.mark.parametrize(
    ("candidate", "problem"),
    [
        (Candidate.of_text(""), "empty_answer"),
        (Candidate.of_text(" \n\t "), "empty_answer"),
        (Candidate.of_code("B"), "wrong_candidate_kind"),
        (Candidate.of_text("x" * (MAX_CANDIDATE_CHARS + 1)), "answer_too_long"),
    ],
)
def test_unusable_candidates_fail_as_invalid(candidate: Candidate, problem: str) -> None:
    verdict = reject_unusable_text(candidate)
    assert verdict is not None
    assert verdict.status == "failed"
    assert verdict.reason == Reason.INVALID_CANDIDATE
    assert verdict.details["problem"] == problem
