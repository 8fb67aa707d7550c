"""A run's model endpoint (a capability URL) and every model call that went through it.

Nothing here holds a provider key: the operator's lives in the settings, and a key an agent
brings with a call is used for that call and forgotten.
"""

from __future__ import annotations

from django.db import models

from episodes.models import Episode
from runs.models import Run


class ModelEndpoint(models.Model):
    # One per run: the agent names the task of each call in a header (gateway.views), so a
    # bundle run opened ahead of time, which has no episodes, meters the same way.
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="model_endpoint")
    # sha256 of the URL's secret (episodes.capabilities); the secret is shown once.
    capability_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"model endpoint of run {self.run_id}"


class CallStatus(models.TextChoices):
    OK = "ok", "ok"
    # The provider refused the request itself (4xx): the agent's request, not our fault.
    REJECTED = "rejected", "rejected by the provider"
    # The provider failed or could not be reached: an infrastructure error, never the agent's.
    ERROR = "error", "provider error"
    # Not forwarded: the task's budget was already spent.
    REFUSED = "refused", "refused (over budget)"


class ModelCall(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="model_calls")
    # The open episode of the call's task in an episode run, else empty.
    episode = models.ForeignKey(
        Episode, null=True, blank=True, on_delete=models.SET_NULL, related_name="model_calls"
    )
    task_id = models.CharField(max_length=200)
    api = models.CharField(max_length=32)  # chat_completions, messages
    model = models.CharField(max_length=200, blank=True)
    stream = models.BooleanField(default=False)
    # "operator" (the site's key) or "own" (the agent's, passed through, never stored).
    key_source = models.CharField(max_length=16)
    status = models.CharField(max_length=16, choices=CallStatus.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Null when the price table does not know the model: never a guess.
    usd = models.FloatField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    first_byte_ms = models.FloatField(null=True, blank=True)
    # Our own sentence (never the provider's body, which may quote a key).
    note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "created_at", "id"]
        indexes = [models.Index(fields=["run", "task_id"])]

    def __str__(self) -> str:
        return f"model call {self.pk} of run {self.run_id}"
