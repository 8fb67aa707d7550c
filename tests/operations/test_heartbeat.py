"""Worker heartbeats from a real Celery worker: its row appears with its queues, processes
and sandbox backend, is refreshed while it runs, and is marked stopped at a warm shutdown."""

from __future__ import annotations

import signal

import pytest

from operations.models import WorkerBeat
from tests.runs.conftest import WorkerPool, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FAST_BEATS = {"SECUREBENCH_HEARTBEAT_SECONDS": "1"}


def test_a_worker_beats_while_it_runs_and_says_when_it_stopped(workers: WorkerPool):
    worker = workers.start("beating", queues="text,sandbox", concurrency=1, env=FAST_BEATS)

    wait_for(lambda: WorkerBeat.objects.filter(node__startswith="beating@").exists(), 30,
             "the worker's first heartbeat")  # fmt: skip
    beat = WorkerBeat.objects.get(node__startswith="beating@")
    assert beat.pid == worker.process.pid
    assert beat.queues == "sandbox,text" and beat.concurrency == 1
    assert beat.sandbox in {"bwrap", "docker"}, beat.sandbox
    assert beat.stopped_at is None
    first = beat.last_seen
    wait_for(lambda: WorkerBeat.objects.get(pk=beat.pk).last_seen > first, 30, "a second beat")

    worker.process.send_signal(signal.SIGTERM)  # a warm shutdown, as `make worker` stops
    worker.process.wait(timeout=60)

    beat.refresh_from_db()
    assert beat.stopped_at is not None and beat.stopped_at >= beat.last_seen
