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
    # The local image a Docker host runs a pack's image in when it lacks that image and cannot
    # pull it (verifiers.sandbox.docker_engine.fallback_image); blank: none, such checks wait.
    fallback_image = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.node} (pid {self.pid})"


class CanaryVerdict(models.TextChoices):
    RUNNING = "running", "running"
    OK = "ok", "right verdicts"
    WRONG = "wrong", "wrong verdicts"


class CanaryCheck(models.Model):
    """One scheduled check of the site itself: the canary pack scored once more with its
    reference answers (every task must pass) and with empty ones (every task must fail)."""

    started_at = models.DateTimeField(db_index=True)
    oracle = models.ForeignKey(
        "runs.Evaluation", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    null = models.ForeignKey(
        "runs.Evaluation", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict = models.CharField(
        max_length=16, choices=CanaryVerdict.choices, default=CanaryVerdict.RUNNING
    )
    # Which task came out how, when the verdicts were wrong.
    problem = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"canary check of {self.started_at:%Y-%m-%d %H:%M}: {self.verdict}"
