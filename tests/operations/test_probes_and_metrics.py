"""The load balancer's probes (no sign-in, no data) and /metrics in the Prometheus text format
(a token or an allowed network; a 404 for anyone else), parsed with prometheus_client's own
parser."""

from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from bench.common import manage
from runs.models import CandidateOrigin, TaskResult
from securebench_site.celery import app
from tests.operations.support import TASKS, quiz, scored, submit, submitted_ago

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-for-the-tests-7d0c1b"


def test_live_answers_anyone_with_nothing_but_its_status(db):
    response = Client().get("/health/live")

    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_ready_checks_the_database_and_the_broker(broker):
    response = Client().get("/health/ready")

    assert response.status_code == 200
    assert response.json() == {"status": "ready", "failing": []}


def test_ready_says_not_ready_naming_only_the_broker_that_does_not_answer(broker, monkeypatch):
    # A real broker address where nothing listens (port 9 on loopback: discard, closed here).
    # (The environment's CELERY_BROKER_URL, when set, wins over the configured URL.)
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:9/0")
    monkeypatch.setitem(app.conf, "broker_url", "redis://127.0.0.1:9/0")
    monkeypatch.setitem(app.conf, "broker_transport_options", {})

    response = Client().get("/health/ready")

    assert response.status_code == 503
    assert response.json() == {"status": "not ready", "failing": ["broker"]}
    assert b"127.0.0.1" not in response.content  # no address, no error text for a stranger


def test_metrics_are_not_found_without_a_token_or_an_allowed_network(db, settings):
    settings.SECUREBENCH_METRICS_TOKEN = TOKEN
    settings.SECUREBENCH_METRICS_NETWORKS = []
    client = Client()

    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 404
    assert client.get("/metrics", headers={"Authorization": TOKEN + "x"}).status_code == 404
    settings.SECUREBENCH_METRICS_TOKEN = ""
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 404


def test_an_allowed_network_reads_the_metrics_without_a_token(db, settings):
    settings.SECUREBENCH_METRICS_TOKEN = ""
    settings.SECUREBENCH_METRICS_NETWORKS = ["127.0.0.0/8"]

    assert Client().get("/metrics").status_code == 200  # the test client comes from 127.0.0.1
    settings.SECUREBENCH_METRICS_NETWORKS = ["10.0.0.0/8", "not-a-network"]
    assert Client().get("/metrics").status_code == 404


def test_metrics_count_waiting_work_results_and_verification_times(broker, make_pack, settings):
    settings.SECUREBENCH_METRICS_TOKEN = TOKEN
    version = quiz(make_pack)
    scored(version, CandidateOrigin.ORACLE)  # every reference passes
    scored(version, CandidateOrigin.NULL)  # every empty answer fails
    # ... ten minutes ago; since then a run has waited two minutes with no worker: stalled.
    TaskResult.objects.update(started_at=timezone.now() - timedelta(minutes=10))
    submitted_ago(submit(version), 120)

    response = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    by_queue = {
        name: {s.labels["queue"]: s.value for s in families[f"securebench_{name}"].samples}
        for name in ("queue_waiting", "queue_running", "queue_stalled")
    }
    assert by_queue["queue_waiting"] == {"text": TASKS, "sandbox": 0, "actions": 0}
    assert by_queue["queue_running"]["text"] == 0
    assert by_queue["queue_stalled"] == {"text": 1.0, "sandbox": 0.0, "actions": 0.0}
    oldest = families["securebench_queue_oldest_waiting_seconds"].samples
    assert next(s.value for s in oldest if s.labels["queue"] == "text") >= 120
    results = {
        (s.labels["status"], s.labels["reason"]): s.value
        for s in families["securebench_results"].samples
    }
    assert results[("passed", "")] == TASKS and results[("queued", "")] == TASKS
    assert sum(v for (status, _), v in results.items() if status == "failed") == TASKS
    durations = {
        s.name: s.value
        for s in families["securebench_verification_seconds"].samples
        if s.labels.get("queue") == "text" and s.labels.get("le", "+Inf") == "+Inf"
    }
    assert durations["securebench_verification_seconds_count"] == 2 * TASKS
    assert families["securebench_workers_alive"].samples[0].value == 0


def test_ready_says_not_ready_naming_only_the_database_when_it_does_not_answer(tmp_path):
    """A site whose PostgreSQL server is gone (nothing listens on its port): a request through
    the whole middleware stack in a process of its own gets 503 naming the database, with no
    address or reason in the answer; the reason goes to the log."""
    env = {
        "DEBUG": "0",
        "SECRET_KEY": "readiness-test-key-not-for-production-8c1f27d9e6a54b03",
        "ALLOWED_HOSTS": "testserver",
        "DATABASE_URL": f"postgres://securebench@127.0.0.1:{closed_port()}/gone",
    }
    code = (
        "from django.test import Client; r = Client().get('/health/ready'); "
        "print(r.status_code); print(r.content.decode())"
    )
    finished = manage(tmp_path, "shell", "-c", code, check=False, env=env)

    assert finished.returncode == 0, finished.stderr[-3000:]
    status, body = finished.stdout.strip().splitlines()[-2:]
    assert status == "503"
    assert json.loads(body) == {"status": "not ready", "failing": ["database"]}
    assert "readiness: the database does not answer" in finished.stderr


def closed_port() -> int:
    """A local port nothing listens on: bound, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
