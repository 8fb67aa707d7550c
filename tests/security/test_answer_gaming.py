"""Answer-format gaming against the text families (security.md A49): spraying every choice,
listing guesses, hedging with a rejected claim, padding — all fail through the one entry point
the pipeline uses."""

from __future__ import annotations

import pytest

from verifiers.scoring import verify
from verifiers.task import Candidate, TaskLanes

MC = TaskLanes(
    "mc",
    "multiple_choice",
    {"question": "Which is prime?", "choices": ["4", "6", "7", "9"]},
    {},
    {"answer": "C"},
)
SA = TaskLanes(
    "sa", "short_answer", {"question": "Capital of France?"}, {}, {"accepted_answers": ["Paris"]}
)
FR = TaskLanes(
    "fr",
    "free_response",
    {"prompt": "Where did fortune cookies originate?"},
    {},
    {
        "rubric": {
            "type": "contains_any",
            "accepted_answers": ["Fortune cookies originated in California"],
            "rejected_answers": ["Fortune cookies originated in Japan"],
            "min_token_f1": 0.5,
        }
    },
)


@pytest.mark.parametrize(
    "text",
    [
        "A, B, C and D",
        "The answer is A, B, C, or D.",
        "A\nB\nC\nD",
        "Answer: C or D",
        "4, 6, 7, 9",
        "A, B, D\nAnswer: 7",
        "4\nAnswer: 7",
        "6 or 9\nAnswer: 7",
        "(A) (B)\nAnswer: 7",
        "Thinking...\nA, D\nAnswer: C",
    ],
)
def test_spraying_choices_fails(text):
    verdict = verify(MC, Candidate.of_text(text))

    assert (verdict.status, verdict.reason) == ("failed", "wrong_answer")


@pytest.mark.parametrize(
    "text", ["London, Berlin, Paris, Madrid", "Rome or Paris", "Lyon Paris Nice"]
)
def test_listing_guesses_fails(text):
    verdict = verify(SA, Candidate.of_text(text))

    assert verdict.status == "failed"


def test_a_rejected_claim_next_to_the_accepted_one_fails():
    text = "Fortune cookies originated in California. Fortune cookies originated in Japan."

    verdict = verify(FR, Candidate.of_text(text))

    assert verdict.status == "failed"


def test_an_empty_or_padded_answer_fails():
    assert verify(MC, Candidate.of_text("   ")).reason == "invalid_candidate"
    assert verify(SA, Candidate.of_text("Paris " * 5000)).reason == "invalid_candidate"


def test_the_honest_answers_still_pass():
    assert verify(MC, Candidate.of_text("Answer: C")).passed
    assert verify(MC, Candidate.of_text("4, 6 and 9 are composite.\nAnswer: 7")).passed
    assert verify(SA, Candidate.of_text("Paris")).passed
    assert verify(FR, Candidate.of_text("Fortune cookies originated in California.")).passed
