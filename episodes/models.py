"""Episode runs, their episodes and every step an agent took in them.

An *episode run* is a run (runs.Run, mode ``episodes``) served as a CUBE benchmark: its URL
holds a capability that only its hash here can recognise. Each spawned task is an
*episode* with a capability of its own; each reset, step or tool call is a *step*, written
before the action runs and completed after, so nothing an agent did is ever lost.
"""

from __future__ import annotations

from django.db import models

from packs.models import Task
from runs.models import Run, TaskResult


class EpisodeRun(models.Model):
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="episode_run")
    # sha256 of the URL's secret; the secret itself is shown once and never stored.
    capability_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    # Oracle runs only: until when `cube/privileged_info` answers. For a run opened from the
    # site, also bound to the opener's debug mode (its session must still hold it).
    privilege_until = models.DateTimeField(null=True, blank=True)
    # The opener's session key (django_session holds it in the clear already), so the
    # privilege ends the moment that session's debug mode does.
    privilege_session_key = models.CharField(max_length=64, blank=True)
    opened_by_ip = models.GenericIPAddressField(null=True, blank=True)
    privilege_reason = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"episode run {self.run_id}"


class EpisodeStatus(models.TextChoices):
    OPEN = "open", "open"
    SCORING = "scoring", "scoring"
    DONE = "done", "done"
    TRUNCATED = "truncated", "truncated"
    ABANDONED = "abandoned", "abandoned"


OPEN_EPISODE_STATUSES = (EpisodeStatus.OPEN,)
ENDED_EPISODE_STATUSES = (EpisodeStatus.DONE, EpisodeStatus.TRUNCATED, EpisodeStatus.ABANDONED)


class Episode(models.Model):
    episode_run = models.ForeignKey(EpisodeRun, on_delete=models.CASCADE, related_name="episodes")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    attempt = models.PositiveSmallIntegerField()
    capability_hash = models.CharField(max_length=64, unique=True)
    status = models.CharField(
        max_length=16, choices=EpisodeStatus.choices, default=EpisodeStatus.OPEN
    )
    # What the episode becomes once its verdict is recorded (done, truncated, abandoned);
    # status is "scoring" meanwhile. The note says which budget ran out, or why abandoned.
    ending = models.CharField(max_length=16, choices=EpisodeStatus.choices, blank=True)
    end_note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    first_reset_at = models.DateTimeField(null=True, blank=True)
    last_activity_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # After cube/close (or the run's shutdown) the episode URL answers nothing any more.
    closed_at = models.DateTimeField(null=True, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    reset_count = models.PositiveIntegerField(default=0)
    wall_seconds = models.FloatField(null=True, blank=True)
    # The frozen candidate (the last submit_*), and the verdict once recorded.
    candidate_kind = models.CharField(max_length=16, blank=True)
    candidate_text = models.TextField(blank=True)
    result = models.ForeignKey(
        TaskResult, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict_status = models.CharField(max_length=16, blank=True)
    verdict_reason = models.CharField(max_length=64, blank=True)
    reward = models.FloatField(null=True, blank=True)
    # Live workspace families (terminal_task, repo_patch): the episode's folder name under
    # SECUREBENCH_EPISODE_WORKSPACE_DIR, set at the first reset; the folder itself is removed
    # when the episode ends (and by the reaper if a worker died first).
    workspace_folder = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["episode_run", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["episode_run", "task", "attempt"], name="one_episode_per_attempt"
            ),
        ]
        indexes = [models.Index(fields=["status", "last_activity_at"])]

    def __str__(self) -> str:
        return f"episode {self.pk} ({self.task_id}, attempt {self.attempt})"

    @property
    def is_open(self) -> bool:
        return self.status == EpisodeStatus.OPEN


class StepState(models.TextChoices):
    QUEUED = "queued", "queued"  # waiting for a worker (sandboxed actions)
    RUNNING = "running", "running"
    DONE = "done", "done"
    EXPIRED = "expired", "expired"  # no worker took it within the answer window


class Step(models.Model):
    """One reset, step or tool call. Public-lane material only, scrubbed and capped."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="steps")
    # Denormalised for the per-run rate limit (an index on run and time).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    index = models.PositiveIntegerField()
    method = models.CharField(max_length=32)  # cube/reset, cube/step, tools/call
    action = models.CharField(max_length=100, blank=True)
    action_id = models.CharField(max_length=200, blank=True)
    arguments = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=StepState.choices, default=StepState.RUNNING)
    observation = models.JSONField(default=dict)
    error_type = models.CharField(max_length=100, blank=True)
    reward = models.FloatField(default=0.0)
    done = models.BooleanField(default=False)
    truncated = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    sandbox_backend = models.CharField(max_length=32, blank=True)
    # Workspace actions: what a long command printed so far (the last part of it, scrubbed),
    # written by the worker while it runs; how much it printed in all, and how much of that
    # the agent has been shown; whether the agent has had the finished observation.
    live_output = models.TextField(blank=True)
    live_chars = models.BigIntegerField(default=0)
    shown_chars = models.BigIntegerField(default=0)
    answered = models.BooleanField(default=True)
    # The worker running the action touches this while it runs: a stale one means it died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Paths the action created or changed in the workspace (for the trajectory).
    files_written = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["episode", "index"]
        constraints = [
            models.UniqueConstraint(fields=["episode", "index"], name="one_step_per_index"),
        ]
        indexes = [models.Index(fields=["run", "created_at"])]

    def __str__(self) -> str:
        return f"step {self.index} of episode {self.episode_id}"
