"""The home page: now running (live, polling that stops), latest results, the top of each
board, my runs, the queue's stall line, and empty states that teach; the one-click reference
runs from the home page, the version page and an empty leaderboard."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from packs.models import ContractVersion, VersionState
from runs.models import CandidateOrigin, Evaluation, EvaluationStatus, Run, TaskResult
from runs.services import reference_run_fill
from runs.stats import wilson_interval
from tests.conftest import make_user
from tests.runs.pages.support import (
    FAILED,
    PASSED,
    QUEUED,
    RUNNING,
    import_version,
    make_evaluation,
    make_run,
)

HOME = "/"


@pytest.fixture
def cv(db, make_pack) -> ContractVersion:
    return import_version(make_pack, "arith", tasks=4)


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def home(user: User) -> str:
    response = signed_in(user).get(HOME)
    assert response.status_code == 200
    return response.content.decode()


def section(body: str, section_id: str) -> str:
    """The HTML of one <section id=…> of the page ("" when absent)."""
    found = re.search(rf'<section[^>]*id="{section_id}".*?</section>', body, re.S)
    return found.group(0) if found else ""


def make_draft(cv: ContractVersion) -> ContractVersion:
    ContractVersion.objects.filter(pk=cv.pk).update(state=VersionState.DRAFT, published_at=None)
    cv.refresh_from_db()
    return cv


# --- empty states -----------------------------------------------------------------------------


def test_with_no_runs_a_reviewer_is_offered_the_reference_runs_of_each_version(cv):
    body = home(make_user("rev", "reviewer"))

    first = section(body, "first-steps")
    assert "Score the reference solutions of arith v1" in first
    assert reverse("runs:reference-runs", args=["arith", 1]) in first
    assert section(body, "latest-results") == ""


def test_with_no_runs_a_submitter_gets_the_submit_page_and_the_agent_snippet(cv):
    body = home(make_user("sub", "submitter"))

    first = section(body, "first-steps")
    assert 'data-testid="empty-submit"' in first
    assert reverse("runs:submit") in first
    assert "BenchmarkClient(" in first
    assert "score-references" not in first  # not privileged


def test_with_no_runs_a_viewer_gets_a_plain_empty_state(cv):
    first = section(home(make_user("view", "viewer")), "first-steps")

    assert "No results to show yet" in first
    assert "score-references" not in first and "empty-submit" not in first


# --- one click instead of a shell ---------------------------------------------------------------


def test_one_click_scores_the_reference_solutions_as_an_oracle_and_a_null_run(
    cv, django_capture_on_commit_callbacks
):
    reviewer = make_user("rev", "reviewer")
    url = reverse("runs:reference-runs", args=["arith", 1])

    with django_capture_on_commit_callbacks() as sent:
        response = signed_in(reviewer).post(url, {"next": HOME})

    runs = {run.origin: run for run in Run.objects.filter(contract_version=cv)}
    assert set(runs) == {CandidateOrigin.ORACLE, CandidateOrigin.NULL}
    # The button lands on exactly the two runs it made, with their live state.
    oracle, null = runs[CandidateOrigin.ORACLE].pk, runs[CandidateOrigin.NULL].pk
    assert response.status_code == 302
    assert response.url == f"{reverse('runs:list')}?runs={oracle},{null}"
    # The web request stored two empty runs and left the references to a worker.
    assert all(run.submitted_by == reviewer and not run.candidate_count for run in runs.values())
    assert len(sent) == 1
    preparing = section(home(reviewer), "now-running")
    assert preparing.count("preparing-row") == 2 and 'hx-trigger="every 2s"' in preparing

    for run in runs.values():  # the worker's part (runs.jobs.fill_reference_runs)
        assert reference_run_fill(run.pk) is not None
        assert reference_run_fill(run.pk) is None  # a message delivered twice does nothing
        run.refresh_from_db()
        assert run.submitted_at is not None
    assert runs[CandidateOrigin.ORACLE].candidate_count == 4
    assert Evaluation.objects.filter(run__in=runs.values(), status="queued").count() == 2
    # Both show as in progress on the home page, labelled as reference runs.
    body = home(reviewer)
    running = section(body, "now-running")
    assert running.count("running-row") == 2 and "preparing-row" not in running
    assert "reference solutions" in running and "empty answers" in running
    assert "No evaluation has finished yet" in section(body, "latest-results")


@pytest.mark.parametrize("role", ["submitter", "viewer"])
def test_only_privileged_users_may_score_the_reference_solutions(cv, role):
    url = reverse("runs:reference-runs", args=["arith", 1])

    response = signed_in(make_user("someone", role)).post(url)

    assert response.status_code == 403
    assert not Run.objects.exists()


def test_a_draft_takes_no_reference_run_from_the_button_and_stores_nothing(cv):
    make_draft(cv)
    url = reverse("runs:reference-runs", args=["arith", 1])

    # A viewer cannot see the draft at all; a reviewer is told why nothing happened.
    assert signed_in(make_user("view", "viewer")).post(url).status_code == 404
    response = signed_in(make_user("rev", "reviewer")).post(url, follow=True)

    assert "Not scored: version 1 of arith is a draft" in response.content.decode()
    assert not Run.objects.exists()


def test_an_outside_next_address_is_not_followed(cv):
    # `next` is where a refused request returns (a draft): never to another site.
    make_draft(cv)
    url = reverse("runs:reference-runs", args=["arith", 1])

    response = signed_in(make_user("rev", "reviewer")).post(url, {"next": "https://evil.test/"})

    assert response.url == reverse("packs:version", args=["arith", 1])


def test_the_version_page_and_an_empty_board_offer_the_button_to_privileged_users_only(cv):
    version_url = reverse("packs:version", args=["arith", 1])
    board_url = reverse("runs:leaderboard", args=["arith", 1])
    button = reverse("runs:reference-runs", args=["arith", 1])
    reviewer = signed_in(make_user("rev", "reviewer"))
    viewer = signed_in(make_user("view", "viewer"))

    assert button in reviewer.get(version_url).content.decode()
    assert button in reviewer.get(board_url).content.decode()
    assert button not in viewer.get(version_url).content.decode()
    assert button not in viewer.get(board_url).content.decode()


# --- now running ---------------------------------------------------------------------------------


def test_now_running_shows_live_progress_and_its_polling_stops_when_nothing_runs(cv):
    viewer = make_user("view", "viewer")
    run = make_run(cv, "busy-agent")
    evaluation = make_evaluation(run, [PASSED, FAILED, RUNNING, QUEUED])
    partial = reverse("home-now-running")

    running = section(home(viewer), "now-running")
    assert "busy-agent" in running and "2 of 4" in running
    assert 'hx-trigger="every 2s"' in running
    assert signed_in(viewer).get(partial).status_code == 200

    TaskResult.objects.filter(evaluation=evaluation).update(status=PASSED)
    Evaluation.objects.filter(pk=evaluation.pk).update(
        status=EvaluationStatus.DONE, finished_at=timezone.now()
    )
    last = signed_in(viewer).get(partial)
    assert last.status_code == 286  # htmx stops polling
    assert "the workers are idle" in last.content.decode()
    assert 'hx-trigger="every' not in last.content.decode()
    # What just finished loads into the results below, in place.
    assert 'hx-select="#home-results"' in last.content.decode()


def test_a_queue_nobody_claims_from_is_named_on_the_home_page(cv):
    run = make_run(cv, "waiting-agent")
    evaluation = make_evaluation(run, [QUEUED, QUEUED, QUEUED, QUEUED])
    Evaluation.objects.filter(pk=evaluation.pk).update(
        status=EvaluationStatus.QUEUED, created_at=timezone.now() - timedelta(minutes=3)
    )
    TaskResult.objects.filter(evaluation=evaluation).update(started_at=None)

    running = section(home(make_user("view", "viewer")), "now-running")

    assert 'data-testid="stalled"' in running
    assert "Workers are not consuming" in running
    assert "4 items on the text queue" in running


def test_work_claimed_lately_is_not_called_stalled(cv):
    run = make_run(cv, "waiting-agent")
    evaluation = make_evaluation(run, [RUNNING, QUEUED, QUEUED, QUEUED])
    Evaluation.objects.filter(pk=evaluation.pk).update(
        created_at=timezone.now() - timedelta(minutes=3)
    )
    TaskResult.objects.filter(evaluation=evaluation, status=RUNNING).update(
        started_at=timezone.now()
    )

    assert "Workers are not consuming" not in home(make_user("view", "viewer"))


# --- latest results and the boards ---------------------------------------------------------


def test_latest_results_list_finished_evaluations_with_score_and_interval(cv):
    agent = make_run(cv, "scored-agent")
    make_evaluation(agent, [PASSED, PASSED, PASSED, FAILED])
    oracle = make_run(cv, "oracle", origin=CandidateOrigin.ORACLE)
    make_evaluation(oracle, [PASSED, PASSED, PASSED, PASSED])

    latest = section(home(make_user("view", "viewer")), "latest-results")

    assert "scored-agent" in latest and "3 / 4" in latest
    interval = wilson_interval(3, 4)  # the score with both ends of its interval
    assert f"0.75 [{interval.low:.2f}, {interval.high:.2f}]" in latest
    assert "reference solutions" in latest  # labelled, listed, never ranked


def test_the_top_of_a_board_shows_its_best_three_ranked_runs_only(cv):
    for name, statuses in (
        ("first", [PASSED] * 4),
        ("second", [PASSED, PASSED, PASSED, FAILED]),
        ("third", [PASSED, PASSED, FAILED, FAILED]),
        ("fourth", [PASSED, FAILED, FAILED, FAILED]),
    ):
        make_evaluation(make_run(cv, name), statuses)
    make_evaluation(make_run(cv, "the-oracle", origin=CandidateOrigin.ORACLE), [PASSED] * 4)

    tops = section(home(make_user("view", "viewer")), "board-tops")

    assert tops.index("first") < tops.index("second") < tops.index("third")
    assert "fourth" not in tops and "the-oracle" not in tops
    assert reverse("runs:leaderboard", args=["arith", 1]) in tops


def test_nothing_of_a_draft_or_of_anothers_open_run_reaches_a_viewers_home(cv, make_pack):
    draft = make_draft(import_version(make_pack, "secret-draft", tasks=4))
    make_evaluation(make_run(draft, "draft-agent"), [PASSED] * 4)
    make_evaluation(make_run(draft, "draft-running"), [RUNNING] * 4)
    make_run(cv, "unsubmitted-agent", submitted_at=None)
    make_evaluation(make_run(cv, "public-agent"), [PASSED] * 4)

    body = home(make_user("view", "viewer"))

    assert "public-agent" in body
    for hidden in ("secret-draft", "draft-agent", "draft-running", "unsubmitted-agent"):
        assert hidden not in body


# --- mine ------------------------------------------------------------------------------------


def test_my_runs_list_a_submitters_own_runs_and_their_state_and_nobody_elses(cv):
    me = make_user("me", "submitter")
    other = make_user("other", "submitter")
    make_evaluation(make_run(cv, "my-scored", submitted_by=me), [PASSED] * 4)
    make_run(cv, "my-open", submitted_by=me, submitted_at=None)
    make_evaluation(make_run(cv, "their-run", submitted_by=other), [PASSED] * 4)

    mine = section(home(me), "my-runs")

    assert "my-scored" in mine and "my-open" in mine and "○ open" in mine
    assert "their-run" not in mine
    assert section(home(make_user("view", "viewer")), "my-runs") == ""
