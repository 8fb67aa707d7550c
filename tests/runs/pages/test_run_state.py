"""One run, one state: the phase and counts of runs.state in each phase a run goes through,
and every view of a run (run page, run list, home page, episodes, API) telling the same."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.models import (
    CandidateOrigin,
    Evaluation,
    EvaluationStatus,
    RunMode,
    TaskResult,
)
from runs.state import Phase, RunState, one_moment, run_state, run_states
from tests.components import require
from tests.conftest import make_user
from tests.runs.pages.support import (
    ERROR,
    FAILED,
    PASSED,
    PENDING,
    QUEUED,
    RUNNING,
    make_evaluation,
    make_run,
    page,
    run_url,
)

pytestmark = pytest.mark.django_db
# "● running 3 of 5 tasks finished (60 %)", as every view writes a run's state.
STATE_LINE = re.compile(
    r"(\w+)\s*</span>\s*<span class=\"state-line\">(\d+) of (\d+) tasks? finished \((\d+) %\)"
)


def shown_states(body: str) -> list[tuple[str, int, int, int]]:
    """Every state a page shows: (word, finished, total, percent)."""
    return [(w, int(f), int(t), int(p)) for w, f, t, p in STATE_LINE.findall(body)]


def seen(state: RunState) -> tuple[str, int, int, int]:
    return (state.word, state.finished, state.total, state.percent)


# --- each phase --------------------------------------------------------------------------------


def test_a_reference_run_whose_candidates_a_worker_builds_is_preparing(cv):
    run = make_run(cv, "oracle", origin=CandidateOrigin.ORACLE, submitted_at=None)

    state = run_state(run)

    assert state.phase == Phase.PREPARING and state.word == "preparing"
    assert (state.finished, state.total, state.percent, state.evaluation_number) == (0, 5, 0, None)
    assert state.segments == [] and state.live


def test_an_api_run_still_being_filled_is_open_with_its_candidates(cv):
    run = make_run(cv, submitted_at=None, candidate_count=3)

    state = run_state(run)

    assert state.phase == Phase.OPEN and state.candidates == 3 and state.tasks == 5


def test_a_queued_evaluation_draws_an_empty_bar(cv):
    run = make_run(cv)
    make_evaluation(run, [QUEUED] * 5, status=EvaluationStatus.QUEUED)

    state = run_state(run)
    body = page(_viewer(), reverse("runs:list"))

    assert state.phase == Phase.QUEUED and (state.queued, state.finished, state.percent) == (
        5,
        0,
        0,
    )
    assert state.segments == []  # 0 of 5: nothing drawn, the track stays empty
    assert shown_states(body) == [("queued", 0, 5, 0)]
    assert 'class="seg ' not in body


def test_results_that_landed_make_the_run_running_whatever_the_status_column_says(cv):
    # A live evaluation's row stays "queued" until a worker claims a result; results refused
    # or missing land final without one. The counts are the truth, not the column.
    run = make_run(cv)
    make_evaluation(run, [FAILED, FAILED, QUEUED, QUEUED, QUEUED], status=EvaluationStatus.QUEUED)

    state = run_state(run)
    body = page(_viewer(), run_url(run))

    assert state.phase == Phase.RUNNING and (state.failed, state.queued) == (2, 3)
    assert set(shown_states(body)) == {("running", 2, 5, 40)}
    assert '◷ queued</span>\n  <span class="state-line">' not in body


def test_a_partly_scored_run_counts_each_verdict_and_draws_only_what_is_finished(cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, RUNNING, QUEUED, FAILED, PENDING])

    state = run_state(run)

    assert state.phase == Phase.RUNNING
    assert (state.passed, state.failed, state.pending, state.running, state.queued) == (
        1,
        1,
        1,
        1,
        1,
    )
    assert (state.finished, state.scored, state.percent) == (3, 2, 60)
    widths = [segment.width for segment in state.segments]
    assert [s.status for s in state.segments] == [PASSED, FAILED, PENDING]
    assert sum(widths) == pytest.approx(600.0)  # 3 of 5 of the 1,000-wide axis, never more


def test_a_done_run_reads_its_frozen_summary(cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, PASSED, FAILED, FAILED, PENDING])

    state = run_state(run)

    assert state.phase == Phase.DONE and not state.live
    assert (state.passed, state.failed, state.pending, state.total, state.percent) == (
        2,
        2,
        1,
        5,
        100,
    )


def test_our_errors_are_counted_apart_from_the_agents_failures(cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, ERROR, ERROR, FAILED, PENDING])

    state = run_state(run)
    body = page(_viewer(), run_url(run))

    assert (state.errored, state.failed, state.scored) == (2, 1, 4)
    assert state.as_json()["error"] == 2 and state.as_json()["failed"] == 1
    assert re.search(r"⚠ error</span> 2 ours", body)


def test_the_percentage_is_rounded_down_so_that_it_never_reads_done_early():
    state = RunState(1, 1, Phase.RUNNING, tasks=200, candidates=200, total=200, passed=199)

    assert state.percent == 99


def test_a_live_episode_run_counts_its_ended_episodes_and_the_tasks_not_attempted(cv):
    run = make_run(cv, submitted_at=None, mode=RunMode.EPISODES, candidate_count=3)
    evaluation = Evaluation.objects.create(
        run=run, number=1, evaluator="securebench@1", total=5, status=EvaluationStatus.QUEUED
    )
    tasks = list(cv.tasks.order_by("position")[:3])
    for task, status in zip(tasks, [PASSED, FAILED, QUEUED], strict=True):
        TaskResult.objects.create(
            evaluation=evaluation,
            task=task,
            family=task.family,
            position=task.position,
            queue="text",
            status=status,
        )

    live = run_state(run)
    run.submitted_at = timezone.now()  # the client's cube/shutdown
    run.save()
    closed = run_state(run)

    assert live.phase == Phase.LIVE and live.word == "live"
    assert (live.finished, live.queued, live.unattempted, live.total) == (2, 1, 2, 5)
    assert closed.phase == Phase.RUNNING  # closed, one verdict still on its way


def test_many_runs_take_a_fixed_number_of_queries(cv, django_assert_num_queries):
    runs = [make_run(cv, f"agent-{i}") for i in range(6)]
    for i, run in enumerate(runs):
        make_evaluation(run, [PASSED, RUNNING, QUEUED, FAILED, PENDING] if i % 2 else [PASSED] * 5)

    with django_assert_num_queries(2):
        states = run_states(runs)

    assert {states[r.pk].phase for r in runs} == {Phase.RUNNING, Phase.DONE}


# --- every view tells the same -----------------------------------------------------------------


def _viewer() -> Client:
    client = Client()
    client.force_login(make_user("viewer-of-states", "viewer"))
    return client


def test_the_run_page_list_home_and_api_show_the_same_counts(cv):
    owner = make_user("owner", "submitter")
    client = Client()
    client.force_login(owner)
    run = make_run(cv, "agent-x", submitted_by=owner, candidate_count=5)
    # The stale column of the issue: "queued" while results are final.
    make_evaluation(run, [PASSED, FAILED, QUEUED, RUNNING, PENDING], status=EvaluationStatus.QUEUED)

    api = client.get(reverse("api-run", args=[run.pk])).json()["state"]
    run_page = page(client, run_url(run))
    listed = page(client, reverse("runs:list"))
    home = page(client, "/")
    live_section = client.get(
        run_url(run), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="evaluation-view"
    ).content.decode()

    expected = (api["word"], api["finished"], api["total"], api["percent"])
    assert expected == ("running", 3, 5, 60)
    # Header, card and evaluations table on the run page; its refresh; the list; the home
    # page's "Now running" and "My runs".
    assert shown_states(run_page) == [expected] * 3
    assert shown_states(live_section) == [expected] * 3
    assert shown_states(listed) == [expected]
    assert shown_states(home) == [expected] * 2
    assert (api["passed"], api["failed"], api["pending"], api["running"], api["queued"]) == (
        1,
        1,
        1,
        1,
        1,
    )
    assert "5 candidates for 5 tasks" in run_page
    # The refresh carries the header's state and the candidates out of band.
    assert 'id="run-head-state" hx-swap-oob="true"' in live_section
    assert 'id="run-candidates" hx-swap-oob="true"' in live_section


def test_the_api_lists_each_runs_state(cv):
    client = _viewer()
    done, running = make_run(cv, "a"), make_run(cv, "b")
    make_evaluation(done, [PASSED] * 5)
    make_evaluation(running, [PASSED, QUEUED, QUEUED, QUEUED, QUEUED])

    body = client.get(reverse("api-runs")).json()

    states = {row["agent_name"]: row["state"] for row in body["results"]}
    assert states["a"]["phase"] == "done" and states["a"]["passed"] == 5
    assert states["b"]["phase"] == "running" and states["b"]["finished"] == 1
    assert states["b"]["percent"] == 20 and states["b"]["live"] is True


def test_the_reference_button_lands_on_a_list_of_exactly_its_runs_with_their_state(cv):
    reviewer = make_user("rev", "reviewer")
    client = Client()
    client.force_login(reviewer)
    make_run(cv, "someone-else")

    response = client.post(reverse("runs:reference-runs", args=[cv.pack.pack_id, 1]), follow=True)

    body = response.content.decode()
    assert response.redirect_chain[-1][0].startswith(reverse("runs:list") + "?runs=")
    assert shown_states(body) == [("preparing", 0, 5, 0)] * 2
    assert "someone-else" not in body
    assert "being prepared by a worker" not in body  # a message that would go stale
    assert 'hx-trigger="every 2s"' in body  # the list follows them live


# --- one moment --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_page_reads_one_snapshot_while_a_result_lands(cv):
    # A worker's verdict committed between two reads of one page must not reach the second:
    # the header and the table would tell two stories. PostgreSQL's default level (READ
    # COMMITTED) shows it; one_moment asks for REPEATABLE READ.
    if connection.vendor != "postgresql":
        require("postgresql", "snapshots across a page's reads are checked on PostgreSQL")
    run = make_run(cv, "agent")
    evaluation = make_evaluation(run, [QUEUED] * 5)
    landed = TaskResult.objects.filter(evaluation=evaluation).order_by("position").first()

    def worker_lands_a_verdict() -> None:
        TaskResult.objects.filter(pk=landed.pk).update(status=PASSED)
        connection.close()

    with one_moment():
        before = run_state(run)
        thread = threading.Thread(target=worker_lands_a_verdict)
        thread.start()
        thread.join()
        during = run_state(run)

    assert seen(during) == seen(before)
    assert run_state(run).passed == before.passed + 1


def test_a_page_read_inside_a_transaction_already_open_still_answers(cv):
    # The test's own transaction has run queries: PostgreSQL refuses to change the isolation
    # level then, and one_moment must keep the outer level instead of failing the page.
    make_evaluation(make_run(cv, "agent"), [PASSED, FAILED])
    with transaction.atomic():
        list(TaskResult.objects.all())
        with one_moment():
            assert run_state(make_run(cv, "other")).phase
