"""Reads behind the episode pages: a run's episodes, the state of its URL, and each step
prepared for reading (the trajectory) or for download (the JSONL transcript).

What a step holds is public-lane material (the objective, the agent's own arguments, the
output of its sandboxed snippets, scrubbed when recorded). Who may read it is the views'
business (episodes.views): the owner of an agent run, or a privileged user in debug mode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Prefetch, QuerySet
from django.http import Http404
from django.utils import timezone

from episodes import lifecycle
from episodes.models import Episode, EpisodeRun, EpisodeStatus, Step, StepState
from packs.models import Task
from packs.readable import ReadableField, readable_fields
from runs.models import FINAL_STATUSES, ResultStatus, Run, TaskResult

# Observation texts longer than this are shown as a preview, the rest behind "show all".
PREVIEW_LINES = 12
PREVIEW_CHARS = 1500
LIVE_EPISODE_STATUSES = (EpisodeStatus.OPEN, EpisodeStatus.SCORING)


# --- the run and its URL -------------------------------------------------------------------


def episode_run_for(run: Run) -> EpisodeRun:
    """The episode side of a run; 404 for a bundle run (it has no episodes to show)."""
    episode_run = EpisodeRun.objects.filter(run=run).first()
    if episode_run is None:
        raise Http404("This run has no episodes.")
    episode_run.run = run  # already loaded, with the caller's access checks behind it
    return episode_run


@dataclass(frozen=True)
class UrlState:
    """What the run's benchmark URL can still do. The URL itself is never stored."""

    state: str  # active | revoked | closed | expired
    at: datetime  # active: until when; otherwise since when

    @property
    def usable(self) -> bool:
        return self.state == "active"


def url_state(episode_run: EpisodeRun, *, now: datetime | None = None) -> UrlState:
    now = now or timezone.now()
    if episode_run.revoked_at is not None:
        return UrlState("revoked", episode_run.revoked_at)
    if episode_run.closed_at is not None:
        return UrlState("closed", episode_run.closed_at)
    if episode_run.expires_at <= now:
        return UrlState("expired", episode_run.expires_at)
    return UrlState("active", episode_run.expires_at)


# --- the episodes table --------------------------------------------------------------------


def run_episodes(episode_run: EpisodeRun) -> QuerySet[Episode]:
    return (
        Episode.objects.filter(episode_run=episode_run)
        .select_related("task", "result")
        # The rows read a result's status, reason and score: never its verifier output.
        .defer("result__stdout", "result__stderr", "result__details")
        .order_by("created_at", "id")
    )


def sync_landed_verdicts(episode_run: EpisodeRun) -> None:
    """Episodes whose verdict has landed since their final step show it, not "scoring".

    The same idempotent copy the reaper and cube/evaluate make (one read per episode being
    scored, a handful at most), so the live table never waits for the next reaper round."""
    scoring = Episode.objects.filter(episode_run=episode_run, status=EpisodeStatus.SCORING)
    for episode in scoring:
        lifecycle.episode_sync_verdict(episode)


@dataclass(frozen=True)
class EpisodeRow:
    """One episode as the episodes table shows it: its lifecycle and its verdict, two
    separate things (an episode the agent finished can fail), both read from the same
    moment as the run's counts (runs.state). A scoring episode whose result is already
    final shows its ending and that verdict, as the reaper will soon write them."""

    episode: Episode
    lifecycle: str  # an EpisodeStatus value
    verdict: str  # a final ResultStatus value, or "" while there is none
    reason: str
    reward: float | None
    result_id: int | None  # the task's result page, once the task has a result


def shown_lifecycle(status: str, ending: str, result_status: str | None) -> str:
    if status == EpisodeStatus.SCORING and result_status in FINAL_STATUSES:
        return ending or EpisodeStatus.DONE
    return status


def episode_rows(episodes: list[Episode], result_ids: dict[int, int]) -> list[EpisodeRow]:
    """Rows of the table; ``episodes`` loaded with their result (``select_related``)."""
    rows = []
    for e in episodes:
        landed = e.result if e.result is not None and e.result.is_final else None
        scoring = e.status == EpisodeStatus.SCORING
        if scoring and landed is not None:
            verdict, reason = landed.status, landed.failure_reason
            reward = landed.score if landed.status == ResultStatus.PASSED else 0.0
        else:
            verdict, reason, reward = e.verdict_status, e.verdict_reason, e.reward
        status = landed.status if landed is not None else None
        rows.append(
            EpisodeRow(
                episode=e,
                lifecycle=shown_lifecycle(e.status, e.ending, status),
                verdict=verdict,
                reason=reason,
                reward=reward,
                result_id=result_ids.get(e.task_id),
            )
        )
    return rows


def status_counts(episode_run: EpisodeRun) -> list[tuple[str, int]]:
    """Episodes per lifecycle status as the rows show it, in the order a run goes through
    them (statuses with none left out)."""
    rows = (
        Episode.objects.filter(episode_run=episode_run)
        .values_list("status", "ending", "result__status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    counts: dict[str, int] = {}
    for status, ending, result_status, n in rows:
        shown = shown_lifecycle(status, ending, result_status)
        counts[shown] = counts.get(shown, 0) + n
    return [(status, counts[status]) for status in EpisodeStatus.values if counts.get(status)]


def episodes_live(episode_run: EpisodeRun) -> bool:
    """Whether the table can still change: the run is open, or an episode is open or being
    scored. The page stops polling once this is False."""
    if episode_run.closed_at is None:
        return True
    return Episode.objects.filter(
        episode_run=episode_run, status__in=LIVE_EPISODE_STATUSES
    ).exists()


def result_ids_by_task(run: Run, task_ids: list[int]) -> dict[int, int]:
    """The result page of each task, in the run's newest evaluation (task pk → result pk)."""
    evaluation = run.evaluations.order_by("-number").first()
    if evaluation is None or not task_ids:
        return {}
    rows = TaskResult.objects.filter(evaluation=evaluation, task_id__in=task_ids)
    return dict(rows.values_list("task_id", "pk"))


# --- trajectories --------------------------------------------------------------------------


def task_attempts(episode_run: EpisodeRun, task: Task) -> list[Episode]:
    """Every episode of the task in the run, first attempt first, with its steps in order."""
    steps = Prefetch("steps", queryset=Step.objects.order_by("index"))
    return list(
        Episode.objects.filter(episode_run=episode_run, task=task)
        .select_related("task")
        .prefetch_related(steps)
        .order_by("attempt")
    )


@dataclass(frozen=True)
class ContentView:
    """One content of an observation, as text: the agent read exactly this."""

    label: str
    text: str
    preview: str  # equal to text when short
    lines: int
    # The task's public payload, field by field as a person reads it (packs.readable): its
    # prompt as text, its starter code highlighted; empty for every other content.
    fields: tuple[ReadableField, ...] = ()

    @property
    def is_long(self) -> bool:
        return self.preview != self.text


@dataclass(frozen=True)
class StepView:
    step: Step
    title: str
    arguments: str  # pretty JSON, "" when the step took none
    arguments_preview: str
    contents: list[ContentView]
    error_type: str
    error_message: str
    # Workspace actions: the paths the step wrote, and (while it runs) its output so far.
    files_written: list[str]
    live_output: str

    @property
    def arguments_long(self) -> bool:
        return self.arguments_preview != self.arguments

    @property
    def duration_seconds(self) -> float | None:
        ms = self.step.duration_ms
        return None if ms is None else ms / 1000


def step_views(steps: list[Step]) -> list[StepView]:
    return [step_view(step) for step in steps]


def step_view(step: Step) -> StepView:
    observation = step.observation if isinstance(step.observation, dict) else {}
    raw_contents = observation.get("contents")
    contents = [
        _content_view(item)
        for item in (raw_contents if isinstance(raw_contents, list) else [])
        if isinstance(item, dict)
    ]
    error = observation.get("error") if isinstance(observation.get("error"), dict) else {}
    arguments = _pretty(step.arguments) if step.arguments else ""
    return StepView(
        step=step,
        title=step_title(step),
        arguments=arguments,
        arguments_preview=_preview(arguments),
        contents=contents,
        error_type=step.error_type or str(error.get("error_type", "")),
        error_message=str(error.get("exception_str", "")),
        files_written=[str(path) for path in step.files_written or [] if isinstance(path, str)],
        live_output=step.live_output if step.state == StepState.RUNNING else "",
    )


def step_title(step: Step) -> str:
    if step.method == "cube/reset":
        return "reset"
    if step.method == "tools/call":
        return f"{step.action} (tools/call)"
    return step.action or step.method


def _content_view(item: dict[str, Any]) -> ContentView:
    data = item.get("data")
    text = data if isinstance(data, str) else _pretty(data)
    # Named contents (objective, task, reference) say what they are; a tool's plain answer
    # is what the agent observed.
    label = str(item.get("name") or "observation")
    fields = tuple(readable_fields(data)) if label == "task" and isinstance(data, dict) else ()
    return ContentView(
        label=label, text=text, preview=_preview(text), lines=text.count("\n") + 1, fields=fields
    )


def _preview(text: str) -> str:
    lines = text.split("\n")
    if len(lines) <= PREVIEW_LINES and len(text) <= PREVIEW_CHARS:
        return text
    return "\n".join(lines[:PREVIEW_LINES])[:PREVIEW_CHARS]


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


# --- the transcript ------------------------------------------------------------------------


def transcript_lines(episode_run: EpisodeRun, task: Task) -> Iterator[str]:
    """One JSON object per step, every attempt of the task in order (JSON Lines)."""
    for episode in task_attempts(episode_run, task):
        for step in episode.steps.all():
            yield json.dumps(_transcript_row(episode, step), ensure_ascii=False) + "\n"


def _transcript_row(episode: Episode, step: Step) -> dict[str, Any]:
    return {
        "episode": episode.pk,
        "task_id": episode.task.task_id,
        "attempt": episode.attempt,
        "index": step.index,
        "method": step.method,
        "action": step.action,
        "action_id": step.action_id,
        "arguments": step.arguments,
        "observation": step.observation,
        "error_type": step.error_type,
        "reward": step.reward,
        "done": step.done,
        "truncated": step.truncated,
        "created_at": _iso(step.created_at),
        "finished_at": _iso(step.finished_at),
        "duration_ms": step.duration_ms,
        "files_written": step.files_written,
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
