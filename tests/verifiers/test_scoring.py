from __future__ import annotations

from verifiers.oracle import null_candidate, oracle_candidate
from verifiers.scoring import verify
from verifiers.task import Candidate, TaskLanes

MARKER = "hidden-answer-marker-7781"


def mc_task(answer: str = "B") -> TaskLanes:
    return TaskLanes(
        task_id="t1",
        family="multiple_choice",
        public={"question": "Which?", "choices": ["one", "two", "three"]},
        evaluation_inputs={},
        hidden={"answer": answer},
    )


def test_a_missing_candidate_fails_with_its_own_reason():
    verdict = verify(mc_task(), None)

    assert (verdict.status, verdict.reason) == ("failed", "missing_candidate")


def test_a_candidate_of_the_wrong_kind_is_invalid():
    verdict = verify(mc_task(), Candidate.of_patch("diff --git a/x b/x\n"))

    assert (verdict.status, verdict.reason) == ("failed", "invalid_candidate")
    assert verdict.details == {"expected_kind": "text"}


def test_deferred_and_unknown_families_are_pending():
    for family in ("tool_call", "invented_family"):
        task = TaskLanes("t", family, {"goal": "x"}, {}, {"expected_calls": []})

        verdict = verify(task, Candidate.of_text("anything"))

        assert (verdict.status, verdict.reason) == ("pending", "no_verifier")


def test_oracle_and_null_candidates_decide_a_text_task():
    task = mc_task()

    assert verify(task, oracle_candidate(task)).status == "passed"
    assert verify(task, null_candidate(task)).reason == "invalid_candidate"


def test_stored_text_never_contains_an_exact_hidden_value():
    task = TaskLanes(
        "t",
        "short_answer",
        {"question": "Say it"},
        {},
        {"accepted_answers": [MARKER]},
    )

    verdict = verify(task, Candidate.of_text(f"maybe {MARKER} or not {MARKER}?"))

    assert MARKER not in repr(verdict)
