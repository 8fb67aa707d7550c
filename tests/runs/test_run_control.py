"""Run control: the owner or an admin pauses, resumes and cancels a run with a written
reason, audited; a paused run's queued work is neither sent nor claimed; a cancelled run's
open work is released unjudged and its evaluation finishes, incomplete."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs.bundle import parse_candidate_objects
from runs.models import AuditEvent, ResultStatus, Run, RunControl, RunSource
from runs.pipeline import evaluation_dispatch, results_claim, score_results
from runs.services import RunMetadata, run_add_candidates, run_create, run_submit
from runs.state import Phase, run_state
from tests.conftest import make_user
from tests.runs.test_evaluators import api_client, version

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _broker(broker) -> None:
    """Evaluations send Celery messages on commit; keep them in a broker of the test's own."""


def submitted(cv, owner) -> Run:
    run = run_create(
        contract_version=cv, metadata=RunMetadata("agent"), source=RunSource.API, user=owner
    )
    lines = [{"task_id": t, "candidate": {"kind": "text", "text": "B"}} for t in ("q0", "q1")]
    run_add_candidates(run, parse_candidate_objects(lines))
    run_submit(run)
    run.refresh_from_db()
    return run


@pytest.fixture
def owner():
    return make_user("owner", "submitter")


def test_a_paused_runs_work_waits_and_resuming_lets_it_through(make_pack, client, owner):
    run = submitted(version(make_pack, "pausing", 2), owner)
    evaluation = run.evaluations.get()
    ids = list(evaluation.results.values_list("pk", flat=True))
    client.force_login(owner)

    client.post(reverse("runs:control", args=[run.pk]), {"action": "pause", "reason": "odd"})
    run.refresh_from_db()
    assert run.control == RunControl.PAUSED and run_state(run).phase == Phase.PAUSED
    assert evaluation_dispatch(evaluation.pk) == 0
    assert results_claim(ids, worker="w").results == []
    client.post(reverse("runs:control", args=[run.pk]), {"action": "resume", "reason": "fine"})

    assert score_results(ids) == 2
    assert run.evaluations.get().is_done
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "reason"))
    assert actions == [("run_paused", "odd"), ("run_resumed", "fine")]


def test_cancelling_releases_open_work_unjudged(make_pack, client, owner):
    run = submitted(version(make_pack, "cancelling", 2), owner)
    client.force_login(owner)

    client.post(
        reverse("runs:control", args=[run.pk]), {"action": "cancel", "reason": "wrong model"}
    )

    evaluation = run.evaluations.get()
    assert evaluation.is_done and evaluation.errored == 2 and evaluation.score is None
    assert set(evaluation.results.values_list("failure_reason", flat=True)) == {"cancelled"}
    state = run_state(run)
    assert state.incomplete and state.judged_words == "0 of 2 tasks judged"
    again = client.post(
        reverse("runs:control", args=[run.pk]), {"action": "resume", "reason": "oops"}, follow=True
    )
    assert "stays cancelled" in again.content.decode()


def test_only_the_owner_or_an_admin_may_and_a_reason_is_required(make_pack, client, owner):
    run = submitted(version(make_pack, "guarded", 2), owner)
    client.force_login(make_user("other", "submitter"))
    assert (
        client.post(
            reverse("runs:control", args=[run.pk]), {"action": "pause", "reason": "x"}
        ).status_code
        == 403
    )

    client.force_login(make_user("root", superuser=True))
    blank = client.post(
        reverse("runs:control", args=[run.pk]), {"action": "pause", "reason": " "}, follow=True
    )
    assert "Write a reason" in blank.content.decode()
    client.post(reverse("runs:control", args=[run.pk]), {"action": "pause", "reason": "ops"})
    run.refresh_from_db()
    assert run.control == RunControl.PAUSED and AuditEvent.objects.get().username == "root"
    assert not run.evaluations.get().results.exclude(status=ResultStatus.QUEUED).exists()


def test_a_harness_pauses_and_cancels_through_the_api_and_others_are_refused(make_pack, owner):
    run = submitted(version(make_pack, "api-control", 2), owner)
    url = f"/api/v1/runs/{run.pk}/control/"
    stranger = api_client(make_user("stranger", "submitter")).post(
        url, {"action": "pause", "reason": "mine now"}, "json"
    )
    api = api_client(owner)

    paused = api.post(url, {"action": "pause", "reason": "rate limited"}, "json")
    no_reason = api.post(url, {"action": "resume", "reason": ""}, "json")
    unknown = api.post(url, {"action": "restart", "reason": "why not"}, "json")
    cancelled = api.post(url, {"action": "cancel", "reason": "wrong model"}, "json")
    after = api.post(url, {"action": "resume", "reason": "oops"}, "json")

    assert stranger.status_code == 403
    assert paused.status_code == 200, paused.json()
    assert paused.json() == {"run": run.pk, "control": "paused", "reason": "rate limited"}
    assert (no_reason.status_code, unknown.status_code) == (400, 400)
    assert cancelled.json()["control"] == "cancelled"
    assert after.status_code == 400 and "stays cancelled" in after.json()["detail"]
    state = api.get(f"/api/v1/runs/{run.pk}/").json()["state"]
    assert (state["judged"], state["incomplete"]) == (0, True)
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "username"))
    assert actions == [("run_paused", "owner"), ("run_cancelled", "owner")]
