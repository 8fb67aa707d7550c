"""The canary: the built-in canary pack scored by a real worker with its reference answers
and with empty ones. Right verdicts show green on /operations/ and in /metrics; a worker whose
sandbox backend is broken turns it red, naming the task; a check that never finishes, or a
schedule that stopped, shows as late."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from operations.canary import canary_start, canary_status
from operations.models import CanaryCheck
from runs.models import Run
from tests.conftest import make_user
from tests.runs.conftest import WorkerPool, bwrap_or_skip, wait_for


def settled(check: CanaryCheck, timeout: float = 180) -> str:
    wait_for(lambda: canary_status().state not in ("running", "none"), timeout, "the canary")
    check.refresh_from_db()
    return canary_status().state


def operations_page() -> str:
    client = Client()
    client.force_login(make_user(f"admin-{CanaryCheck.objects.count()}", superuser=True))
    return client.get(reverse("operations:overview")).content.decode()


def canary_metric(settings_) -> float:
    settings_.SECUREBENCH_METRICS_TOKEN = "canary-test-token"
    body = Client().get("/metrics", headers={"Authorization": "Bearer canary-test-token"})
    families = {f.name: f for f in text_string_to_metric_families(body.content.decode())}
    return families["securebench_canary_ok"].samples[0].value


@pytest.mark.django_db(transaction=True)
def test_right_verdicts_are_green_and_checks_reuse_two_runs(workers: WorkerPool, settings):
    bwrap_or_skip()
    workers.start(env={"SECUREBENCH_SANDBOX": "bwrap"})

    first = canary_start()
    assert settled(first) == "ok", first.problem
    second = canary_start()
    assert settled(second) == "ok", second.problem

    assert Run.objects.filter(agent_name="site-canary").count() == 2, "oracle and null only"
    page = operations_page()
    assert "canary-ok" in page and "canary-alert" not in page
    assert canary_metric(settings) == 1


@pytest.mark.django_db(transaction=True)
def test_a_broken_sandbox_backend_turns_the_canary_red(workers: WorkerPool, settings):
    # A Docker host whose engine is gone: every sandboxed verification is unavailable.
    workers.start(
        env={"SECUREBENCH_SANDBOX": "docker", "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    )

    check = canary_start()

    assert settled(check) == "wrong"
    check.refresh_from_db()
    assert "oracle canary/code: error" in check.problem
    assert "canary/text" not in check.problem, "the text task needs no sandbox"
    page = operations_page()
    assert "canary-alert" in page and "The canary gives wrong verdicts" in page
    assert canary_metric(settings) == 0


@pytest.mark.django_db
def test_a_check_that_never_finishes_or_a_stopped_schedule_is_late(settings):
    check = canary_start()  # no worker: it never finishes
    late = timezone.now() + timedelta(seconds=settings.SECUREBENCH_CANARY_LATE_SECONDS + 1)
    assert canary_status().state == "running"
    assert canary_status(late).state == "late"
    CanaryCheck.objects.filter(pk=check.pk).update(verdict="ok", finished_at=timezone.now())
    long_after = timezone.now() + timedelta(minutes=2 * settings.SECUREBENCH_CANARY_MINUTES + 1)
    assert canary_status(long_after).state == "late"
    assert canary_status().state == "ok"


def test_the_schedule_runs_the_canary_every_ten_minutes_by_default() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["run-canary"]
    assert entry["task"] == "operations.run_canary"
    assert entry["schedule"] == 600.0
