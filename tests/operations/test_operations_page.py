"""/operations/ for reviewers and admins: queues with their oldest waiting item, a stalled queue
named as such, running results with their leases, workers by heartbeat, failure reasons of
the last day and the evaluations open longest; refreshed in place."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags

from operations.canary import canary_version
from operations.models import WorkerBeat
from runs.models import CandidateOrigin, ResultStatus, Run, TaskResult
from tests.conftest import make_user
from tests.operations.support import TASKS, quiz, scored, submit, submitted_ago

pytestmark = pytest.mark.django_db

URL = "/operations/"


def signed_in(*roles: str, superuser: bool = False) -> Client:
    client = Client()
    client.force_login(make_user("-".join(roles) or "root", *roles, superuser=superuser))
    return client


def beat(node: str, *, seconds_ago: float = 1, stopped: bool = False) -> WorkerBeat:
    when = timezone.now() - timedelta(seconds=seconds_ago)
    return WorkerBeat.objects.create(
        node=node, host=node.partition("@")[2], pid=4242, queues="sandbox,text", concurrency=2,
        sandbox="docker", images=["python:3.11-slim"], started_at=when, last_seen=when,
        stopped_at=when if stopped else None,
    )  # fmt: skip


@pytest.mark.parametrize("roles", [("viewer",), ("submitter",), ("pack maintainer",)])
def test_the_page_is_for_reviewers_and_admins_only(roles):
    assert signed_in(*roles).get(URL).status_code == 403
    assert Client().get(URL).status_code == 302  # to the sign-in page


def test_reviewers_and_admins_see_it_and_its_link(db):
    for client in (signed_in("reviewer"), signed_in(superuser=True)):
        page = client.get("/")
        assert 'href="/operations/">Operations</a>' in page.content.decode()
        assert client.get(URL).status_code == 200
    assert 'href="/operations/"' not in signed_in("submitter").get("/").content.decode()


def test_the_old_address_redirects_permanently_and_the_probes_stay(db):
    # /health/ was the page's address: bookmarks land on /operations/, which still asks for
    # a sign-in and the role; the load balancer's probes keep their standard paths.
    for client in (Client(), signed_in("submitter"), signed_in("reviewer")):
        response = client.get("/health/")
        assert response.status_code == 301
        assert response["Location"] == URL
    chain = Client().get("/health/", follow=True).redirect_chain
    assert chain == [(URL, 301), (f"{reverse('login')}?next={URL}", 302)]
    assert Client().get("/health/live").status_code == 200
    assert Client().get("/health/ready").status_code in (200, 503)  # answered, not moved


def test_waiting_work_with_no_worker_is_shown_stalled(broker, make_pack):
    evaluation = submit(quiz(make_pack))
    submitted_ago(evaluation, 90)  # past the 60 s threshold, and nothing was ever claimed

    body = signed_in("reviewer").get(URL).content.decode()

    assert "Stalled: the text queue." in body
    assert f"{TASKS} items waiting, the oldest for 9" in body
    assert "No worker has sent a heartbeat" in body
    assert "make worker" in body


def test_young_waiting_work_or_a_queue_being_consumed_is_not_stalled(broker, make_pack):
    version = quiz(make_pack)
    fresh = submit(version)
    reviewer = signed_in("reviewer")
    assert "Stalled" not in reviewer.get(URL).content.decode()  # it waited only a moment

    # Old work on a queue a worker is taking from (a claim 5 s ago): busy, not stalled.
    submitted_ago(fresh, 600)
    first = TaskResult.objects.filter(evaluation=fresh).order_by("position").first()
    TaskResult.objects.filter(pk=first.pk).update(
        status=ResultStatus.RUNNING, started_at=timezone.now() - timedelta(seconds=5),
        lease_expires_at=timezone.now() + timedelta(minutes=5), worker="w1@host", attempts=1,
    )  # fmt: skip
    beat("w1@host")

    body = reviewer.get(URL).content.decode()

    assert "Stalled" not in body
    assert "w1@host" in body and "python:3.11-slim" in body  # the worker and its images


def test_a_stalled_queue_with_a_live_worker_says_to_check_its_queues(broker, make_pack):
    submitted_ago(submit(quiz(make_pack)), 120)
    beat("sandbox-only@host")

    body = signed_in("reviewer").get(URL).content.decode()

    assert "Stalled: the text queue." in body and "--queues" in body


def test_running_results_show_their_leases_and_an_expired_one_is_flagged(broker, make_pack):
    evaluation = submit(quiz(make_pack))
    now = timezone.now()
    results = list(TaskResult.objects.filter(evaluation=evaluation).order_by("position"))
    TaskResult.objects.filter(pk=results[0].pk).update(
        status=ResultStatus.RUNNING, started_at=now - timedelta(minutes=30),
        lease_expires_at=now - timedelta(minutes=1), worker="dead@host", attempts=1,
    )  # fmt: skip
    TaskResult.objects.filter(pk=results[1].pk).update(
        status=ResultStatus.RUNNING, started_at=now, lease_expires_at=now + timedelta(minutes=5),
        worker="alive@host", attempts=1,
    )  # fmt: skip

    body = signed_in("reviewer").get(URL).content.decode()

    assert "dead@host" in body and "alive@host" in body
    assert body.count('class="lease-expired"') == 1
    assert "1 running result whose lease ran out" in body


def test_workers_not_seen_lately_are_listed_apart(db):
    beat("alive@a", seconds_ago=5)
    beat("silent@b", seconds_ago=300)
    beat("stopped@c", seconds_ago=2, stopped=True)

    response = signed_in("reviewer").get(URL)

    alive = [b.node for b in response.context["workers_alive"]]
    gone = {b.node for b in response.context["workers_gone"]}
    assert alive == ["alive@a"] and gone == {"silent@b", "stopped@c"}
    assert "Not seen lately" in response.content.decode()


def test_failures_of_the_last_day_by_reason_and_open_evaluations(broker, make_pack):
    version = quiz(make_pack)
    scored(version, CandidateOrigin.NULL)  # every empty answer fails
    waiting = submit(version)

    response = signed_in("reviewer").get(URL)

    reasons = {(r.status, r.reason): r.count for r in response.context["reasons"]}
    assert sum(reasons.values()) == TASKS and all(s == "failed" for s, _ in reasons)
    longest = response.context["longest"]
    assert [e.pk for e in longest] == [waiting.pk] and longest[0].open_results == TASKS


def test_failures_of_people_health_checks_and_the_canary_are_counted_apart(broker, make_pack):
    people = scored(quiz(make_pack), CandidateOrigin.NULL)  # 4 empty answers fail
    health = scored(people.run.contract_version, CandidateOrigin.NULL)
    Run.objects.filter(pk=health.run_id).update(health_check=True)  # a version's health check
    canary_run = scored(canary_version(), CandidateOrigin.NULL)  # fails on purpose
    canary_failures = canary_run.results.filter(status="failed").count()

    response = signed_in("reviewer").get(URL)
    text = re.sub(r"\s+", " ", strip_tags(response.content.decode())).replace("&#x27;", "'")

    assert (
        f"People's runs: {TASKS} · Packs' health checks: {TASKS} · "
        f"Site canary: {canary_failures}" in text
    )
    by_source: dict[str, int] = {}
    for row in response.context["reasons"]:
        by_source[row.source_label] = by_source.get(row.source_label, 0) + row.count
    assert by_source == {
        "people's runs": TASKS,
        "packs' health checks": TASKS,
        "site canary": canary_failures,
    }
    assert "<td>people&#x27;s runs</td><td>failed</td>" in response.content.decode()


def test_the_overview_refreshes_itself_as_a_fragment(db):
    reviewer = signed_in("reviewer")

    page = reviewer.get(URL).content.decode()
    fragment = reviewer.get(URL, headers={"HX-Request": "true"}).content.decode()

    assert 'hx-trigger="every 5s"' in page
    assert fragment.lstrip().startswith('<div id="overview"') and "<html" not in fragment
