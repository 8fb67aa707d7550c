"""What the workers say of themselves: one row per worker process, refreshed by a heartbeat."""

from __future__ import annotations

from django.db import models


class WorkerBeat(models.Model):
    """The last heartbeat of one Celery worker (its main process), by Celery node name."""

    node = models.CharField(max_length=200, unique=True)  # e.g. celery@host, actions@host
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    queues = models.CharField(max_length=200, blank=True)
    concurrency = models.PositiveIntegerField(default=0)
    # What this host's verifications run in ("docker", "bwrap", or why none is usable).
    sandbox = models.CharField(max_length=200, blank=True)
    # The Docker images present on the host (tags), for the images panel; [] on bwrap.
    images = models.JSONField(default=list)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.node} (pid {self.pid})"
