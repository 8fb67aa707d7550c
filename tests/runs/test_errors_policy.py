"""Errors of ours are never the agent's failure: the default scorers leave them out, the
scorers that counted them as fails keep doing so under their old keys (the registry's rule),
and a run with errors says how much of it was judged."""

from __future__ import annotations

from runs.evaluators import DEFAULT_EVALUATOR, TaskCounts, evaluator_get
from runs.state import Phase, RunState

TASKS = [
    TaskCounts("multiple_choice", n=1, c=1, score_sum=1.0),
    TaskCounts("multiple_choice", n=1, c=0, score_sum=0.0),
    TaskCounts("multiple_choice", n=0, c=0, errored=1),  # the sandbox broke: not judged
]


def test_the_default_scorer_scores_the_judged_tasks_only():
    assert DEFAULT_EVALUATOR == "securebench@2"
    assert evaluator_get("securebench@2").evaluate(TASKS)["pass_rate"].value == 0.5


def test_securebench_1_still_counts_an_error_as_a_fail():
    assert evaluator_get("securebench@1").evaluate(TASKS)["pass_rate"].value == 1 / 3


def test_pass_at_k_2_leaves_errored_samples_out():
    samples = [TaskCounts("code_completion", n=1, c=1, score_sum=1.0, errored=1)]

    assert evaluator_get("securebench-pass-at-k@2").evaluate(samples)["pass@1"].value == 1.0
    assert evaluator_get("securebench-pass-at-k@1").evaluate(samples)["pass@1"].value == 0.5


def test_each_scorer_says_what_it_does_with_errors():
    assert "left out" in evaluator_get("securebench@2").errors_words
    assert "count as failures" in evaluator_get("securebench@1").errors_words


def test_a_done_run_with_an_error_is_incomplete_and_says_how_much_was_judged():
    state = RunState(
        1, 1, Phase.DONE, tasks=3, candidates=3, total=3, passed=1, failed=1, errored=1
    )

    assert state.incomplete and state.judged == 2
    assert state.judged_words == "2 of 3 tasks judged"
    assert state.as_json()["incomplete"] is True


def test_a_run_still_scoring_is_not_called_incomplete():
    state = RunState(1, 1, Phase.RUNNING, tasks=3, candidates=3, total=3, passed=1, queued=2)

    assert not state.incomplete
