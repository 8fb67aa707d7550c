"""What a result's times measured: the verifier's (``TaskResult.duration_seconds``) and, for a
live episode, the episode's own, from its first reset to its end, which episodes.lifecycle
records as the candidate's usage (runs never reads the episodes app)."""

from __future__ import annotations

from django.db.models import FloatField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from runs.models import Run, RunMode, TaskResult

# The usage key a live episode's candidate records its wall time under.
EPISODE_TIME_KEY = "wall_seconds"


def episode_seconds(usage_field: str) -> Cast:
    """An annotation: the episode's time from a candidate's usage (null for none)."""
    return Cast(KeyTextTransform(EPISODE_TIME_KEY, usage_field), FloatField())


def result_episode_seconds(run: Run, result: TaskResult) -> float | None:
    """How long the live episode behind this result took; None for a bundle run (whose
    per-task wall time the agent reports, and the run page sums as usage)."""
    if run.mode != RunMode.EPISODES or result.candidate is None:
        return None
    value = (result.candidate.usage or {}).get(EPISODE_TIME_KEY)
    return float(value) if isinstance(value, int | float) else None
