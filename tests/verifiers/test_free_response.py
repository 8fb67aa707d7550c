from __future__ import annotations

from typing import Any

import pytest

from verifiers.families import free_response
from verifiers.scoring import verify_text_family
from verifiers.task import Candidate, TaskLanes
from verifiers.text import MAX_CANDIDATE_CHARS
from verifiers.verdict import Reason, Verdict

FORTUNE_COOKIES = {
    "type": "contains_any",
    "accepted_answers": [
        "Fortune cookies originated in California",
        "The precise origin of fortune cookies is unclear",
    ],
    "rejected_answers": ["Fortune cookies originated in Japan", "Fortune cookies come from China"],
    "min_token_f1": 0.3,
}


def task(rubric: Any) -> TaskLanes:
    hidden = {"rubric": rubric, "reference_answer": "unused by the verifier"}
    return TaskLanes("fr", "free_response", {"prompt": "Where?"}, {}, hidden)


def verify(text: str, rubric: Any = None) -> Verdict:
    rubric = FORTUNE_COOKIES if rubric is None else rubric
    return free_response.verify(task(rubric), Candidate.of_text(text))


# --- upstream tests (spec §4.3) ------------------------------------------------------------


def test_containing_an_accepted_answer_passes_with_its_index() -> None:
    verdict = verify("Fortune cookies originated in California, in the early 1900s.")
    assert verdict.passed
    assert verdict.details["matched_answer_index"] == 0
    assert verdict.details["match_strategy"] == "containment"


def test_containing_a_rejected_answer_fails() -> None:
    verdict = verify("Fortune cookies originated in Japan.")
    assert (verdict.status, verdict.reason) == ("failed", Reason.WRONG_ANSWER)
    assert verdict.details["rejected_answer_index"] == 0
    assert verdict.details["rejection_strategy"] == "containment"


def test_a_paraphrase_passes_on_token_f1() -> None:
    verdict = verify("Fortune cookies were first made in California.")
    assert verdict.passed
    assert verdict.details["match_strategy"] == "token_f1"


def test_a_paraphrase_closer_to_a_rejected_answer_fails() -> None:
    # accepted F1 2/7 is below 0.3; rejected F1 4/7 reaches it and beats the accepted one.
    verdict = verify("They originated in Japan.")
    assert not verdict.passed
    assert verdict.details["matched_answer_index"] is None
    assert verdict.details["rejection_strategy"] == "token_f1"


def test_a_rejected_phrase_fails_even_beside_an_accepted_one() -> None:
    rubric = {"accepted_answers": ["safe"], "rejected_answers": ["forbidden exploit marker"]}
    verdict = verify("This is safe. forbidden exploit marker", rubric)
    assert not verdict.passed
    assert verdict.details["matched_answer_index"] == 0
    assert verdict.details["rejected_answer_index"] == 0


def test_a_candidate_listing_every_answer_fails() -> None:
    answers = FORTUNE_COOKIES["accepted_answers"] + FORTUNE_COOKIES["rejected_answers"]
    assert not verify(". ".join(answers)).passed


# --- rubric semantics ----------------------------------------------------------------------


def test_the_default_threshold_needs_every_token() -> None:
    rubric = {"accepted_answers": ["Paris is the capital"]}
    assert verify("The capital: Paris", rubric).passed  # F1 1.0 on {paris, capital}
    assert not verify("Paris", rubric).passed


def test_containment_needs_whole_words() -> None:
    rubric = {"accepted_answers": ["cat"], "min_token_f1": 1.0}
    assert not verify("concatenate", rubric).passed
    assert verify("A cat.", rubric).passed


def test_us_is_spelled_out_on_both_sides() -> None:
    rubric = {"accepted_answers": ["in the United States"]}
    assert verify("They are made in the U.S. today", rubric).passed


def test_a_rejected_f1_below_the_accepted_f1_does_not_reject() -> None:
    rubric = {
        "accepted_answers": ["red green blue"],
        "rejected_answers": ["red yellow"],
        "min_token_f1": 0.5,
    }
    assert verify("red green blue yellow", rubric).passed


def test_a_zero_threshold_still_needs_some_overlap() -> None:
    rubric = {"accepted_answers": ["alpha"], "min_token_f1": 0}
    assert not verify("beta", rubric).passed
    assert verify("alpha beta", rubric).passed


def test_extra_rubric_keys_and_null_fields_are_tolerated() -> None:
    rubric = {"accepted_answers": ["yes"], "rejected_answers": None, "min_token_f1": None, "x": 1}
    assert verify("yes", rubric).passed


@pytest.mark.parametrize(
    "rubric",
    [
        "any answer mentioning California",
        ["California"],
        {},
        {"type": "llm_judge", "accepted_answers": ["x"]},
        {"accepted_answers": []},
        {"accepted_answers": "California"},
        {"accepted_answers": ["ok", ""]},
        {"accepted_answers": ["ok", 3]},
        {"accepted_answers": ["..."]},
        {"accepted_answers": ["ok"], "rejected_answers": "no"},
        {"accepted_answers": ["ok"], "rejected_answers": [" "]},
        {"accepted_answers": ["ok"], "min_token_f1": 1.5},
        {"accepted_answers": ["ok"], "min_token_f1": -0.1},
        {"accepted_answers": ["ok"], "min_token_f1": True},
        {"accepted_answers": ["ok"], "min_token_f1": "0.5"},
    ],
)
def test_a_malformed_rubric_is_a_task_error(rubric: Any) -> None:
    verdict = verify("ok", rubric)
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)
    assert verdict.details == {"problem": "rubric"}


# --- unusable candidates -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", " \t\n"])
def test_an_empty_candidate_is_invalid(text: str) -> None:
    assert verify(text).reason == Reason.INVALID_CANDIDATE


def test_a_candidate_of_another_kind_is_invalid() -> None:
    candidate = Candidate.of_workspace({"answer.txt": "Fortune cookies originated in California"})
    verdict = free_response.verify(task(FORTUNE_COOKIES), candidate)
    assert (verdict.status, verdict.reason) == ("failed", Reason.INVALID_CANDIDATE)


def test_an_overly_long_candidate_is_invalid() -> None:
    text = "Fortune cookies originated in California. " * (MAX_CANDIDATE_CHARS // 40)
    assert verify(text).reason == Reason.INVALID_CANDIDATE


# --- the verdict never carries hidden values -----------------------------------------------

MARKER = "HIDDENMARKER-91be"


@pytest.mark.parametrize(
    "text",
    [MARKER, f"It is {MARKER}.", f"REJECTED-{MARKER}", "unrelated", f"{MARKER} REJECTED-{MARKER}"],
)
def test_the_verdict_never_echoes_the_rubric(text: str) -> None:
    rubric = {
        "accepted_answers": [MARKER],
        "rejected_answers": [f"REJECTED-{MARKER}"],
        "min_token_f1": 0.731,
    }
    verdict = verify(text, rubric)
    assert MARKER not in repr(verdict)
    assert "0.731" not in repr(verdict)
    assert verdict.stdout == verdict.stderr == ""
    assert verdict.sandbox_backend is None


def test_the_text_dispatcher_sends_free_response_here() -> None:
    candidate = Candidate.of_text("Fortune cookies originated in California")
    assert verify_text_family(task(FORTUNE_COOKIES), candidate).passed
