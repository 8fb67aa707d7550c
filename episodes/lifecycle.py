"""One episode from reset to verdict: steps recorded before they run, budgets measured and
enforced here, the final answer frozen and scored by the run's evaluation pipeline.

No transaction is held while an action runs or a verdict is awaited: on SQLite a write
transaction locks the whole database, and the worker must be able to write meanwhile.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from episodes import actions, wire
from episodes.budgets import EpisodeBudgets, budget_crossed, episode_budgets
from episodes.live_workspaces import new_folder_name, workspace_end
from episodes.models import Episode, EpisodeStatus, Step, StepState
from episodes.objectives import first_observation, workspace_waiting_observation
from episodes.tools import (
    STOP,
    WAIT,
    ArgumentProblem,
    Tool,
    check_arguments,
    family_tools,
    is_workspace_family,
)
from runs.models import ResultStatus, TaskResult
from runs.services import run_record_live_candidate
from verifiers.task import Candidate as VerifierCandidate
from verifiers.verdict import Reason

logger = logging.getLogger(__name__)
POLL_SECONDS = 0.02
# How long final_step waits for a workspace command still running before it ends the episode.
FINAL_STEP_PATIENCE = 2.0
ANSWER_PREVIEW_CHARS = 200


@dataclass(frozen=True)
class StepOutcome:
    output: dict[str, Any]  # EnvironmentOutput
    step: Step


# --- reset ---------------------------------------------------------------------------------


def episode_reset(episode: Episode) -> dict[str, Any]:
    """Start (or restart) the episode: the objective and the public payload, nothing else."""
    task = episode.task
    _refuse_reset_past_budget(episode)
    if is_workspace_family(task.family):
        return _workspace_reset(episode)
    obs = first_observation(task.family, task.agent_payload)
    budgets = episode_budgets(episode)
    with transaction.atomic():
        locked = _locked_open(episode)
        now = _count_reset(locked)
        _next_step(
            locked,
            method="cube/reset",
            state=StepState.DONE,
            observation=obs,
            finished_at=now,
            duration_ms=0.0,
        )
    return {"obs": obs, "info": _reset_info(episode, budgets)}


def _characters(count: int) -> str:
    return f"{count:,} character{'' if count == 1 else 's'}"


def _count_reset(locked: Episode, *also_saved: str) -> datetime:
    """Count a reset on the locked episode (a step, and the start of its wall-time clock if it
    is the first) and save it with ``also_saved``, fields the caller set; returns now."""
    now = timezone.now()
    locked.step_count += 1
    locked.reset_count += 1
    locked.first_reset_at = locked.first_reset_at or now
    locked.last_activity_at = now
    fields = ["step_count", "reset_count", "first_reset_at", "last_activity_at", *also_saved]
    locked.save(update_fields=fields)
    return now


def _reset_info(episode: Episode, budgets: EpisodeBudgets) -> dict[str, Any]:
    task = episode.task
    return {
        "task_id": task.task_id,
        "attempt": episode.attempt,
        "tools": [tool.name for tool in family_tools(task.family)],
        "budgets": budgets.as_info(),
    }


def _refuse_reset_past_budget(episode: Episode) -> None:
    """A reset counts as a step: the one that would go past a budget is not run (no fresh
    start, no new workspace). It ends the episode as a crossing step does, truncated with its
    answer scored as it stands, and is answered as a wrong-state error: a reset's answer has
    no room for a verdict."""
    budgets = episode_budgets(episode)
    with transaction.atomic():
        locked = _locked_open(episode)
        crossed = budget_crossed(budgets, steps=locked.step_count + 1, since=locked.first_reset_at)
        if not crossed:
            return
        locked.step_count += 1
        locked.last_activity_at = timezone.now()
        locked.save(update_fields=["step_count", "last_activity_at"])
        step = _next_step(
            locked,
            method="cube/reset",
            state=StepState.RUNNING,
            truncated=True,  # not run: the attempt it would have restarted is the one scored
        )
    _end_truncated(episode, step, crossed, "")
    raise wire.RpcError(
        wire.WRONG_STATE,
        f"Budget exhausted: {crossed}. The reset was not run; the episode has ended and is "
        "scored as it stood.",
    )


def _locked_open(episode: Episode) -> Episode:
    locked = Episode.objects.select_for_update().select_related("episode_run").get(pk=episode.pk)
    if locked.status != EpisodeStatus.OPEN:
        raise wire.RpcError(
            wire.WRONG_STATE,
            f"this episode has ended ({locked.ending or locked.status}); spawn a new one "
            "if the contract allows more attempts",
        )
    return locked


def _next_step(locked: Episode, *, method: str, **fields: Any) -> Step:
    """The locked episode's step row for the step just counted (its index is the count)."""
    return Step.objects.create(
        episode=locked,
        run_id=locked.episode_run.run_id,
        index=locked.step_count,
        method=method,
        **fields,
    )


# --- steps ---------------------------------------------------------------------------------


def episode_step(
    episode: Episode, *, method: str, name: Any, arguments: Any, action_id: Any
) -> StepOutcome:
    """Record the action, run it, record what it gave. The step that crosses a budget is not
    run: it ends the episode (truncated) and the answer as it stands is scored."""
    if not isinstance(name, str) or not name:
        raise wire.RpcError(wire.INVALID_PARAMS, "params.name must be the name of a tool")
    if action_id is not None and not isinstance(action_id, str | int):
        raise wire.RpcError(wire.INVALID_PARAMS, "params.action_id must be a string")
    action_id_text = "" if action_id is None else str(action_id)[:200]
    budgets = episode_budgets(episode)
    tools = {tool.name: tool for tool in family_tools(episode.task.family)}
    tool = tools.get(name)
    checked: dict[str, Any] | None = None
    problem = ""
    if tool is not None:
        try:
            checked = check_arguments(tool, arguments)
        except ArgumentProblem as exc:
            problem = str(exc)
    recorded_arguments = checked if checked is not None else _recordable(arguments)
    step, crossed = _step_begin(
        episode, method, name[:100], action_id_text, recorded_arguments, budgets
    )
    if crossed:
        return _end_truncated(episode, step, crossed, action_id_text)
    if tool is None:
        known = ", ".join(tools)
        return _finish_step(
            step,
            _error_obs("UnknownTool", f"there is no tool {name[:100]!r}; tools: {known}", step),
        )
    if checked is None:
        return _finish_step(step, _error_obs("InvalidArguments", problem, step))
    return _run_tool(episode, step, tool, checked)


def _recordable(arguments: Any) -> dict[str, Any]:
    # Arguments that fit no schema are kept in a bounded, inert form for the trajectory.
    text = repr(arguments)
    return {"unparsed": text[:2000] + ("…" if len(text) > 2000 else "")}


def _step_begin(
    episode: Episode,
    method: str,
    name: str,
    action_id: str,
    arguments: dict[str, Any],
    budgets: EpisodeBudgets,
) -> tuple[Step, str]:
    with transaction.atomic():
        locked = _locked_open(episode)
        if locked.first_reset_at is None:
            raise wire.RpcError(wire.WRONG_STATE, "call cube/reset first: it starts the episode")
        now = timezone.now()
        locked.step_count += 1
        locked.last_activity_at = now
        locked.save(update_fields=["step_count", "last_activity_at"])
        crossed = budget_crossed(budgets, steps=locked.step_count, since=locked.first_reset_at)
        step = _next_step(
            locked,
            method=method,
            action=name,
            action_id=action_id,
            arguments=arguments,
            state=StepState.RUNNING,
        )
    return step, crossed


def _run_tool(episode: Episode, step: Step, tool: Tool, arguments: dict[str, Any]) -> StepOutcome:
    if is_workspace_family(episode.task.family):
        return _workspace_tool(episode, step, tool)
    if tool.name == STOP:
        return _end_with_final_step(episode, step)
    if tool.submits is not None:
        text = arguments.get("answer", arguments.get("code", ""))
        preview = text if len(text) <= ANSWER_PREVIEW_CHARS else text[:ANSWER_PREVIEW_CHARS] + "…"
        noun = "Solution" if tool.submits == "code" else "Answer"
        obs = wire.observation(
            [
                wire.text_content(
                    f"{noun} recorded ({_characters(len(text))}): {preview}\n"
                    "Submit again to replace it, or call final_step to have it scored.",
                    tool_call_id=step.action_id or None,
                )
            ]
        )
        return _finish_step(step, obs)
    answer = actions.run_sandboxed(step)
    return _finish_step(step, answer.obs, state=None)


def _error_obs(error_type: str, message: str, step: Step) -> dict[str, Any]:
    err = wire.step_error(error_type, message)
    text = wire.text_content(
        f"Action failed — {error_type}: {message}", tool_call_id=step.action_id or None
    )
    return wire.observation([text], err=err)


def _finish_step(
    step: Step,
    obs: dict[str, Any],
    *,
    state: str | None = StepState.DONE,
    reward: float = 0.0,
    done: bool = False,
    truncated: bool = False,
    info: dict[str, Any] | None = None,
) -> StepOutcome:
    now = timezone.now()
    step.observation = obs
    step.error_type = (obs.get("error") or {}).get("error_type", "")[:100]
    step.reward, step.done, step.truncated = reward, done, truncated
    step.finished_at = now
    step.duration_ms = (now - step.created_at).total_seconds() * 1000
    fields = ["observation", "error_type", "reward", "done", "truncated", "finished_at"]
    fields.append("duration_ms")
    if state is not None:
        step.state = state
        fields.append("state")
    step.save(update_fields=fields)
    output = wire.environment_output(
        obs,
        reward=reward,
        done=done,
        truncated=truncated,
        info={**(info or {}), "step": step.index, "profiling": {"step_ms": step.duration_ms}},
        err=obs.get("error"),
    )
    return StepOutcome(output=output, step=step)


# --- ending: final_step, budgets, close, idle ----------------------------------------------


def _end_with_final_step(
    episode: Episode,
    step: Step,
    *,
    before: list[dict[str, Any]] | None = None,
    deadline: float | None = None,
) -> StepOutcome:
    episode_finish(episode, ending=EpisodeStatus.DONE, note="")
    return _answer_with_verdict(
        episode,
        step,
        truncated=False,
        note="Task finished by the agent.",
        before=before,
        deadline=deadline,
    )


def _end_truncated(episode: Episode, step: Step, crossed: str, action_id: str) -> StepOutcome:
    episode_finish(episode, ending=EpisodeStatus.TRUNCATED, note=crossed)
    what = "the workspace" if is_workspace_family(episode.task.family) else "your last submission"
    return _answer_with_verdict(
        episode,
        step,
        truncated=True,
        note=f"Budget exhausted: {crossed}. This action was not run; {what} is scored as it "
        "stands.",
        deadline=actions.answer_deadline(),
    )


def _answer_with_verdict(
    episode: Episode,
    step: Step,
    *,
    truncated: bool,
    note: str,
    before: list[dict[str, Any]] | None = None,
    deadline: float | None = None,
) -> StepOutcome:
    """The ending step's answer, with the verdict if it lands in time (bounded so that the
    whole answer leaves within the client's timeout)."""
    wait = None
    if deadline is not None:
        limit = settings.SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS
        wait = max(0.0, min(limit, deadline - time.monotonic()))
    episode = episode_await_verdict(episode, wait=wait)
    info = verdict_info(episode)
    if episode.verdict_reason == Reason.CONTRACT_VIOLATION:
        note = f"{note} The task failed: {episode.end_note}."
    contents = [*(before or []), wire.text_content(note, tool_call_id=step.action_id or None)]
    return _finish_step(
        step,
        wire.observation(contents),
        reward=episode.reward or 0.0,
        done=True,
        truncated=truncated,
        info=info,
    )


def episode_finish(episode: Episode, *, ending: str, note: str) -> bool:
    """Freeze the episode's answer and queue its verdict; False if it had already ended."""
    if is_workspace_family(episode.task.family):
        return workspace_end(episode.pk, ending=ending, note=note)
    with transaction.atomic():
        locked = Episode.objects.select_for_update().select_related("episode_run__run", "task")
        locked = locked.get(pk=episode.pk)
        if locked.status != EpisodeStatus.OPEN:
            return False
        now = timezone.now()
        candidate = _frozen_candidate(locked)
        wall = (now - locked.first_reset_at).total_seconds() if locked.first_reset_at else 0.0
        result = run_record_live_candidate(
            locked.episode_run.run,
            locked.task,
            candidate,
            usage={"wall_seconds": round(wall, 3), "steps": float(locked.step_count)},
        )
        locked.result = result
        locked.ending = ending
        locked.end_note = note[:300]
        locked.ended_at = now
        locked.wall_seconds = wall
        locked.candidate_kind = candidate.kind if candidate else ""
        locked.candidate_text = candidate.text if candidate else ""
        locked.status = EpisodeStatus.SCORING
        copy_verdict(locked, result)
        locked.save()
    return True


def _frozen_candidate(episode: Episode) -> VerifierCandidate | None:
    """The last submission since the last reset (a reset restarts the attempt; one refused
    at the budget did not)."""
    resets = Step.objects.filter(episode=episode, method="cube/reset", truncated=False)
    last_reset = resets.order_by("-index").first()
    submits = {tool.name: tool.submits for tool in family_tools(episode.task.family)}
    steps = Step.objects.filter(
        episode=episode,
        action__in=[name for name, kind in submits.items() if kind],
        error_type="",
        state=StepState.DONE,
    )
    if last_reset is not None:
        steps = steps.filter(index__gt=last_reset.index)
    last = steps.order_by("-index").first()
    if last is None:
        return None
    kind = submits[last.action] or "text"
    text = last.arguments.get("answer", last.arguments.get("code", ""))
    return VerifierCandidate(kind=kind, text=text)


def copy_verdict(episode: Episode, result: TaskResult | None) -> None:
    """A final result's verdict onto its scoring episode, which takes its ending status."""
    if result is None or not result.is_final or episode.status != EpisodeStatus.SCORING:
        return
    episode.verdict_status = result.status
    episode.verdict_reason = result.failure_reason
    episode.reward = result.score if result.status == ResultStatus.PASSED else 0.0
    episode.status = episode.ending or EpisodeStatus.DONE


def episode_sync_verdict(episode: Episode) -> Episode:
    """Copy a landed verdict to a scoring episode (idempotent, cheap when nothing changed)."""
    if episode.status != EpisodeStatus.SCORING or episode.result_id is None:
        return episode
    result = TaskResult.objects.filter(pk=episode.result_id).first()
    if result is None or not result.is_final:
        return episode
    copy_verdict(episode, result)
    Episode.objects.filter(pk=episode.pk, status=EpisodeStatus.SCORING).update(
        status=episode.status,
        verdict_status=episode.verdict_status,
        verdict_reason=episode.verdict_reason,
        reward=episode.reward,
    )
    return episode


def episode_await_verdict(episode: Episode, *, wait: float | None = None) -> Episode:
    """Wait (bounded: the answer must leave within the client's timeout) for the verdict."""
    episode = Episode.objects.get(pk=episode.pk)
    limit = settings.SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS if wait is None else wait
    deadline = time.monotonic() + limit
    while True:
        if episode.status == EpisodeStatus.SCORING and episode.result_id is None:
            # A live workspace's candidate is recorded by a worker (episodes.live_collection).
            episode = Episode.objects.get(pk=episode.pk)
        episode = episode_sync_verdict(episode)
        if episode.status != EpisodeStatus.SCORING or time.monotonic() >= deadline:
            return episode
        time.sleep(POLL_SECONDS)


def verdict_info(episode: Episode) -> dict[str, Any]:
    """The verdict's status and reason only: never details, expected values or output."""
    if episode.status == EpisodeStatus.SCORING:
        info: dict[str, Any] = {"status": "scoring", "episode": "scoring"}
    else:
        info = {"status": episode.verdict_status, "episode": episode.status}
    if episode.verdict_reason:
        info["reason"] = episode.verdict_reason
    if episode.end_note:
        info["note"] = episode.end_note
    return info


def truncation_notes(episode_run_id: int) -> list[str]:
    return [
        f"task {task_id} (attempt {attempt}): {note}"
        for task_id, attempt, note in Episode.objects.filter(
            episode_run_id=episode_run_id, ending=EpisodeStatus.TRUNCATED
        ).values_list("task__task_id", "attempt", "end_note")
    ]


# --- evaluate, close, status ---------------------------------------------------------------


def episode_evaluate(episode: Episode) -> dict[str, Any]:
    episode = episode_sync_verdict(Episode.objects.get(pk=episode.pk))
    if episode.status == EpisodeStatus.OPEN:
        raise wire.RpcError(
            wire.NOT_PERMITTED,
            "the episode is not done: the verdict comes after final_step (a hosted benchmark "
            "does not score work in progress)",
        )
    return {"reward": float(episode.reward or 0.0), "info": verdict_info(episode)}


def episode_close(episode: Episode) -> None:
    """The end of the episode for good: still open, it is scored as it stands (abandoned)."""
    episode_finish(episode, ending=EpisodeStatus.ABANDONED, note="closed before final_step")
    Episode.objects.filter(pk=episode.pk, closed_at__isnull=True).update(closed_at=timezone.now())


def episode_status(episode: Episode) -> str:
    episode = episode_sync_verdict(Episode.objects.get(pk=episode.pk))
    parts = [f"{episode.status}", f"{episode.step_count} steps"]
    if episode.first_reset_at is None:
        parts.append("not reset yet")
    elif episode.status == EpisodeStatus.OPEN:
        elapsed = (timezone.now() - episode.first_reset_at).total_seconds()
        parts.append(f"{elapsed:.1f} s elapsed")
    if episode.verdict_status:
        parts.append(f"verdict {episode.verdict_status}")
    return ", ".join(parts)


def steps_throttled(run_id: int) -> bool:
    """More steps in this run's last second than the site allows (every client together)."""
    since = timezone.now() - timedelta(seconds=1)
    limit = settings.SECUREBENCH_EPISODE_STEPS_PER_SECOND
    return Step.objects.filter(run_id=run_id, created_at__gte=since).count() >= limit


# --- live workspaces (terminal_task, repo_patch): the web's side ---------------------------
# Every action runs on a worker (episodes.actions, episodes.live_workspaces); the web orders the
# steps: a step first waits for an earlier action still running, and answers with its rest.


def _workspace_reset(episode: Episode) -> dict[str, Any]:
    """Lay the workspace out again from the seed (on a worker): the first observation holds
    the objective, the file listing and the contract's surfaces."""
    task = episode.task
    deadline = actions.answer_deadline()
    with transaction.atomic():
        locked = _locked_open(episode)
        locked.workspace_folder = locked.workspace_folder or new_folder_name(locked.pk)
        _count_reset(locked, "workspace_folder")
        # What an earlier action still had to say went with the workspace it ran in.
        Step.objects.filter(episode=locked, answered=False).update(answered=True)
        step = _next_step(locked, method="cube/reset", state=StepState.RUNNING)
    answer = actions.run_sandboxed(step, may_continue=True, deadline=deadline)
    contract = locked.episode_run.run.contract_version.contract or {}
    if answer.state == actions.DONE and not answer.obs.get("error"):
        obs = answer.obs
        _mark_answered(step)
    elif answer.state == actions.DONE:
        # The seed failed: the objective still, and why there is no workspace.
        obs = workspace_waiting_observation(task, contract, err=answer.obs["error"])
        Step.objects.filter(pk=step.pk).update(observation=obs, answered=True)
    elif answer.running:
        # Not saved: the worker writes the reset's own observation when the seed is done.
        obs = workspace_waiting_observation(task, contract)
    else:
        obs = workspace_waiting_observation(task, contract, err=answer.obs.get("error"))
        Step.objects.filter(pk=step.pk).update(observation=obs, finished_at=timezone.now())
    info = {**_reset_info(episode, episode_budgets(episode)), "running": answer.running}
    return {"obs": obs, "info": info}


def _workspace_tool(episode: Episode, step: Step, tool: Tool) -> StepOutcome:
    deadline = actions.answer_deadline()
    before: list[dict[str, Any]] = []
    pending = _pending_action(step)
    if pending is not None:
        # final_step does not wait long for a running command: ending the episode stops it
        # (the workspace is scored as it stands), and the verdict needs the rest of the time.
        until = deadline if tool.name != STOP else time.monotonic() + FINAL_STEP_PATIENCE
        earlier = actions.await_action(pending, deadline=until)
        before = _earlier_contents(pending, earlier)
        if earlier.running and tool.name != STOP:
            return _still_running(step, tool, pending, before)
        if earlier.running:
            before.append(_text(step, f"Step {pending.index} is stopped: the episode ends."))
        if earlier.truncated:
            return _answer_with_verdict(
                episode,
                step,
                truncated=True,
                note="The episode ended when that command ran out of the wall-time budget; "
                "this action was not run.",
                before=before,
                deadline=deadline,
            )
    if tool.name == WAIT:
        if not before:
            before = [_text(step, "Nothing is running: every earlier action has finished.")]
        return _finish_step(step, wire.observation(before))
    if tool.name == STOP:
        return _end_with_final_step(episode, step, before=before, deadline=deadline)
    answer = actions.run_sandboxed(step, may_continue=True, deadline=deadline)
    if answer.running:
        # The step row is the worker's to complete; the agent gets the output so far.
        contents = [*before, *answer.obs["contents"]]
        output = wire.environment_output(
            wire.observation(contents), info={"running": True, "step": step.index}
        )
        return StepOutcome(output=output, step=step)
    _mark_answered(step)
    obs = answer.obs
    if before:
        obs = wire.observation([*before, *obs["contents"]], err=obs.get("error"))
    if answer.truncated:
        note = "The workspace as it stands is scored."
        return _answer_with_verdict(
            episode, step, truncated=True, note=note, before=obs["contents"], deadline=deadline
        )
    return _finish_step(step, obs, state=None)


def _pending_action(step: Step) -> Step | None:
    """The episode's latest earlier action whose final observation the agent has not had."""
    return (
        Step.objects.filter(episode_id=step.episode_id, answered=False, index__lt=step.index)
        .order_by("-index")
        .first()
    )


def _mark_answered(step: Step) -> None:
    Step.objects.filter(pk=step.pk).update(answered=True)


def _earlier_contents(pending: Step, answer: actions.ActionAnswer) -> list[dict[str, Any]]:
    """What an earlier action still had to say, to put before this step's own answer."""
    if answer.running:
        return list(answer.obs["contents"])
    _mark_answered(pending)
    name = pending.action or "reset"
    head = f"Step {pending.index} ({name}) finished:"
    if answer.state != actions.DONE:
        head = f"Step {pending.index} ({name}) was not run:"
    contents = [wire.text_content(head, name="earlier_step")]
    contents += answer.obs.get("contents") or []
    error = answer.obs.get("error")
    if isinstance(error, dict):
        contents.append(
            wire.text_content(
                f"(step {pending.index} failed — {error.get('error_type')}: "
                f"{error.get('exception_str')})",
                name="earlier_step",
            )
        )
    return contents


def _still_running(step: Step, tool: Tool, pending: Step, before: list[dict]) -> StepOutcome:
    """The earlier action is still running at the deadline: ``wait`` shows its new output;
    any other call is not run (the agent sends it again once that action is done)."""
    if tool.name == WAIT:
        obs = wire.observation(before)
    else:
        message = (
            f"Your {tool.name} call was not run: step {pending.index} is still running. Call "
            "wait to see the rest of its output, then send your call again."
        )
        obs = wire.observation(
            [*before, _text(step, message)], err=wire.step_error("StillRunning", message)
        )
    return _finish_step(step, obs, info={"running": True})


def _text(step: Step, message: str) -> dict[str, Any]:
    return wire.text_content(message, tool_call_id=step.action_id or None)
