"""Re-run only what errored, through the API, the command and the page; who may; and what the
run says about how much of it was judged. The error is a real one: a worker that claimed a
result and vanished until the reaper gave up on it (retries_exhausted)."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from runs.bundle import parse_candidate_objects
from runs.models import Evaluation, ResultStatus, Run, RunSource
from runs.pipeline import leases_reap, results_claim, score_results
from runs.services import RunMetadata, run_add_candidates, run_create, run_submit
from tests.conftest import make_user
from tests.runs.test_evaluators import api_client, score_now, version

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _one_attempt(settings, broker) -> None:
    settings.SECUREBENCH_MAX_ATTEMPTS = 1


def errored_run(cv, user=None) -> Run:
    """q0..q2 answered "B", "B", "A" (the answer is B); q0's worker vanished for good."""
    run = run_create(contract_version=cv, metadata=RunMetadata("agent"), source=RunSource.API)
    if user is not None:
        Run.objects.filter(pk=run.pk).update(submitted_by=user)
    lines = [
        {"task_id": task_id, "candidate": {"kind": "text", "text": answer}}
        for task_id, answer in (("q0", "B"), ("q1", "B"), ("q2", "A"))
    ]
    run_add_candidates(run, parse_candidate_objects(lines))
    evaluation = run_submit(run)
    ghost, *others = evaluation.results.order_by("position").values_list("pk", flat=True)
    assert results_claim([ghost], worker="ghost").results
    score_results(others)
    leases_reap(now=timezone.now() + timedelta(hours=1))
    run.refresh_from_db()
    return run


def test_the_error_is_left_out_of_the_score_and_the_run_is_incomplete(make_pack, client):
    run = errored_run(version(make_pack, "errs", 3))
    first = run.evaluations.get()

    assert (first.passed, first.failed, first.errored, first.evaluator) == (
        1,
        1,
        1,
        "securebench@2",
    )
    assert first.score == 0.5  # one of the two judged; the error is ours
    body = api_client(make_user("viewer", "viewer")).get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["state"]["judged"], body["state"]["incomplete"]) == (2, True)
    client.force_login(make_user("someone", "viewer"))
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "2 of 3 tasks judged" in page and 'data-testid="incomplete"' in page
    assert "Errors of ours are left out" in page


def test_the_board_counts_the_error_apart_from_the_judged_and_states_its_policy(make_pack, client):
    cv = version(make_pack, "board-errs", 3)
    run = errored_run(cv)
    client.force_login(make_user("someone", "viewer"))

    page = client.get(reverse("runs:leaderboard", args=[cv.pack.pack_id, cv.version]))

    row = page.content.decode().split(f"Run #{run.pk}")[0].rsplit("<tr", 1)[1]
    # One passed of the two judged, in the family's column and the run's: the error is
    # listed apart, not as a failure.
    assert row.count("1 / 2") == 2 and "1 / 3" not in row, row
    assert row.count("· 1 errored") == 2 and 'data-testid="incomplete"' in row
    assert "Errors of ours are left out" in page.content.decode()


def test_the_api_re_runs_only_what_errored_and_carries_the_rest_over(make_pack):
    run = errored_run(version(make_pack, "api-errs", 3))
    api = api_client(make_user("reviewer", "reviewer"))

    queued = api.post(f"/api/v1/runs/{run.pk}/evaluations/", {"errored_only": True}, "json")
    second = score_now(run.evaluations.get(number=2))

    assert queued.status_code == 202, queued.json()
    assert second.rerun_of == run.evaluations.get(number=1)
    rows = second.results.values_list("task__task_id", "carried_from_id")
    assert {task: source is not None for task, source in rows} == {
        "q0": False,
        "q1": True,
        "q2": True,
    }
    assert (second.passed, second.failed, second.errored, second.score) == (2, 1, 0, 2 / 3)
    again = api.post(f"/api/v1/runs/{run.pk}/evaluations/", {"errored_only": True}, "json")
    assert again.status_code == 409 and "no errored result" in again.json()["detail"]
    both = api.post(
        f"/api/v1/runs/{run.pk}/evaluations/",
        {"errored_only": True, "evaluator": "securebench@1"},
        "json",
    )
    assert both.status_code == 400


def test_the_command_re_runs_what_errored(make_pack):
    run = errored_run(version(make_pack, "cmd-errs", 3))
    out = StringIO()

    call_command("reevaluate_run", "--run", str(run.pk), "--errored", "--json", stdout=out)

    printed = json.loads(out.getvalue())
    assert (printed["evaluation"], printed["rerun_of"], printed["evaluator"]) == (
        2,
        1,
        "securebench@2",
    )
    second = score_now(run.evaluations.get(number=2))
    assert second.errored == 0 and second.total == 3
    with pytest.raises(CommandError, match="no errored result"):
        call_command("reevaluate_run", "--run", str(run.pk), "--errored")


def test_the_owner_re_runs_errored_from_the_page_and_a_stranger_may_not(make_pack, client):
    owner = make_user("owner", "submitter")
    run = errored_run(version(make_pack, "page-errs", 3), user=owner)
    client.force_login(make_user("stranger", "submitter"))

    refused = client.post(reverse("runs:rerun-errored", args=[run.pk]))
    assert refused.status_code == 403 and run.evaluations.count() == 1
    client.force_login(owner)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-testid="rerun-errored"' in page
    made = client.post(reverse("runs:rerun-errored", args=[run.pk]))

    assert made.status_code == 302
    second = score_now(run.evaluations.get(number=2))
    assert second.status == "done" and second.errored == 0
    shown = client.get(made["Location"]).content.decode()
    assert "1 result verified again, 2 carried over unchanged" in shown
    assert Evaluation.objects.filter(run=run, rerun_of__isnull=False).count() == 1
    assert set(second.results.values_list("status", flat=True)) <= {
        ResultStatus.PASSED,
        ResultStatus.FAILED,
    }


def test_error_rates_by_reason_worker_and_run_on_every_view(make_pack, client, settings):
    run = errored_run(version(make_pack, "rates", 3))
    settings.SECUREBENCH_METRICS_TOKEN = ""
    settings.SECUREBENCH_METRICS_NETWORKS = ["127.0.0.0/8"]

    metrics = client.get("/metrics").content.decode()
    assert 'securebench_error_rate{dimension="reason",value="retries_exhausted"} 0.333' in metrics
    assert f'securebench_error_rate{{dimension="run",value="{run.pk}"}} 0.333' in metrics
    assert 'securebench_error_rate{dimension="worker",value="ghost"} 1.0' in metrics
    assert 'dimension="contract_version",value="rates v1"' in metrics
    client.force_login(make_user("admin", superuser=True))
    operations = client.get("/operations/").content.decode()
    assert "Error rates in the last 24 hours" in operations and "retries_exhausted" in operations
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "Where the errors happened" in page and "33.3 %" in page
