"""Worker heartbeats: each Celery worker's main process writes its row every few seconds.

A Celery bootstep (added to the worker by securebench_site.celery) starts the beat once the
worker's timer runs and marks the row stopped at a warm shutdown. A worker killed outright
stops beating: the operations page then shows it as last seen so long ago.

The sandbox backend and the Docker images are probed once at start and then every
``PROBE_EVERY`` beats: a probe costs a round trip to the engine, a beat a single UPDATE.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from celery import bootsteps
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from verifiers.sandbox import SandboxUnavailable, get_sandbox
from verifiers.sandbox.docker_engine import fallback_image

logger = logging.getLogger(__name__)

PROBE_EVERY = 8
MAX_IMAGES = 100


@dataclass
class WorkerFacts:
    node: str
    pid: int
    queues: str
    concurrency: int
    sandbox: str = ""
    images: list[str] = field(default_factory=list)
    fallback_image: str = ""


def sandbox_facts() -> tuple[str, list[str], str]:
    """The backend this host's verifications would use, the images it holds (Docker), and
    the local image that stands in for a pack's image it lacks and cannot pull ("": none)."""
    try:
        sandbox = get_sandbox()
    except SandboxUnavailable as exc:
        return f"none ({exc})"[:200], [], ""
    client = getattr(sandbox, "client", None)
    if client is None:
        return sandbox.name, [], ""
    try:
        tags = sorted({tag for image in client.images.list() for tag in image.tags})
    except Exception as exc:  # noqa: BLE001 - the engine went away between two calls
        logger.warning("could not list the Docker images: %s", exc)
        tags = []
    return sandbox.name, tags[:MAX_IMAGES], fallback_image(client) or ""


def beat_record(facts: WorkerFacts, *, started: bool = False) -> None:
    """Write the worker's row (created at its first beat, refreshed at each one after)."""
    from operations.models import WorkerBeat  # noqa: PLC0415 - loads with Celery, before Django

    now = timezone.now()
    values: dict[str, Any] = {
        "host": (
            settings.SECUREBENCH_HOST_NAME or facts.node.partition("@")[2] or socket.gethostname()
        ),
        "pid": facts.pid,
        "queues": facts.queues[:200],
        "concurrency": facts.concurrency,
        "sandbox": facts.sandbox,
        "images": facts.images,
        "fallback_image": facts.fallback_image[:255],
        "last_seen": now,
        "stopped_at": None,
    }
    if started:
        values["started_at"] = now
    updated = WorkerBeat.objects.filter(node=facts.node).update(**values)
    if not updated:
        WorkerBeat.objects.update_or_create(node=facts.node, defaults={**values, "started_at": now})


def beat_stopped(node: str) -> None:
    from operations.models import WorkerBeat  # noqa: PLC0415 - loads with Celery, before Django

    WorkerBeat.objects.filter(node=node).update(stopped_at=timezone.now())


_probe_requested = threading.Event()


def probe_at_next_beat() -> None:
    """Probe the sandbox and images at the next beat, not only every PROBE_EVERY beats (an
    image was just pulled: the operations page should show it)."""
    _probe_requested.set()


class Heartbeat(bootsteps.StartStopStep):
    """Beats on the worker's own timer (the thread that runs Celery's event heartbeats)."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.timer_ref: Any = None
        self.facts: WorkerFacts | None = None
        self.beats = 0

    def start(self, worker: Any) -> None:
        queues = ",".join(sorted(q.name for q in worker.app.amqp.queues.consume_from.values()))
        self.facts = WorkerFacts(
            node=worker.hostname, pid=os.getpid(), queues=queues, concurrency=worker.concurrency
        )
        self._beat(started=True)
        self.timer_ref = worker.timer.call_repeatedly(
            settings.SECUREBENCH_HEARTBEAT_SECONDS, self._beat, priority=10
        )

    def stop(self, worker: Any) -> None:
        if self.timer_ref is not None:
            self.timer_ref.cancel()
            self.timer_ref = None
        if self.facts is not None:
            self._safely(lambda: beat_stopped(self.facts.node))

    def _beat(self, started: bool = False) -> None:
        facts = self.facts
        if facts is None:
            return
        if self.beats % PROBE_EVERY == 0 or _probe_requested.is_set():
            _probe_requested.clear()
            facts.sandbox, facts.images, facts.fallback_image = sandbox_facts()
        self.beats += 1
        self._safely(lambda: beat_record(facts, started=started))

    @staticmethod
    def _safely(write: Any) -> None:
        # A database that is briefly away must not stop the worker: the next beat tries again.
        close_old_connections()
        try:
            write()
        except DatabaseError as exc:
            logger.warning("worker heartbeat not written: %s", exc)
