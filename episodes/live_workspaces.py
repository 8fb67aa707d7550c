"""The episode side of live workspaces (terminal_task, artifact_task and repo_patch): where
each lives, one action run in it, and the ending that hands it to its collection.

Each episode owns a folder under SECUREBENCH_EPISODE_WORKSPACE_DIR (its name, set at the first
reset, is stored on the episode) holding the workspace as a tar snapshot; ``verifiers.live``
lays it out, runs each action in a fresh sandbox over it and builds the candidate from it.
Every action runs on a worker (the ``actions`` queue), never in the web process: the web
queues steps (episodes.actions, in the order episodes.lifecycle keeps) and reads what they
gave. The web only names the folder (``new_folder_name``) and ends the episode
(``workspace_end``), as a step that spends the wall-time budget does on its worker.

What an action shows the agent is NOT scrubbed of the task's sealed values: nothing sealed
is ever in a workspace sandbox (verifiers.live lays out public files only), so all it can
print comes from the public lane or the agent itself — and a ``<redacted>`` in place of a
string the agent printed would tell it that the string is sealed (an oracle for hidden
answers). The trajectory shows it to the run's owner, who sees the agent's candidates too.

Once the episode has ended, a worker collects its candidate from the workspace and destroys
the folder: episodes.live_collection, which sits above this module and episodes.services.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from episodes import objectives, wire
from episodes.budgets import episode_budgets
from episodes.models import Episode, EpisodeStatus, Step, StepState
from episodes.progress import STALE_HEARTBEAT_SECONDS, StepProgress, episode_still_wants
from episodes.tools import BASH, LIST_FILES, READ_FILE, WRITE_FILE
from job_queue import send_job
from packs.selectors import evaluator_task_lanes
from runs.pipeline import worker_sandbox
from verifiers import live
from verifiers.sandbox import Sandbox, SandboxUnavailable
from verifiers.task import TaskLanes

logger = logging.getLogger(__name__)
# A reset or an ending waits this long for the episode's running action to stop (its
# watcher kills it within a second; a dead worker's step is past its heartbeat by then).
QUIET_SECONDS = 15.0


# --- where a workspace lives -----------------------------------------------------------------


def new_folder_name(episode_id: int) -> str:
    """The episode's folder: its id (for the reaper) and a random part (never reused)."""
    return f"{episode_id}-{secrets.token_hex(8)}"


def workspace_root() -> Path:
    return Path(settings.SECUREBENCH_EPISODE_WORKSPACE_DIR)


def folder_of(episode: Episode) -> Path | None:
    name = episode.workspace_folder
    if not name or "/" in name or name.startswith("."):
        return None
    return workspace_root() / name


def workspace_limits() -> live.WorkspaceLimits:
    return live.WorkspaceLimits(
        workspace_bytes=settings.SECUREBENCH_EPISODE_WORKSPACE_BYTES,
        workspace_files=settings.SECUREBENCH_EPISODE_WORKSPACE_FILES,
        command_seconds_default=float(settings.SECUREBENCH_EPISODE_COMMAND_SECONDS),
        command_seconds_max=float(settings.SECUREBENCH_EPISODE_COMMAND_MAX_SECONDS),
    )


def workspace_of(episode: Episode, lanes: TaskLanes, backend: str) -> live.LiveWorkspace:
    folder = folder_of(episode)
    if folder is None:
        raise live.WorkspaceUnsupported("this episode has no workspace yet: call cube/reset")
    workspace_root_ready()
    return live.plan_live_workspace(lanes, backend, folder, workspace_limits())


def workspace_root_ready() -> Path:
    """The workspaces' folder, created if missing, and refused unless it is a real folder of
    ours: the default lies in the shared temp folder, where anyone could have made it first."""
    root = workspace_root()
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        # Traversable, not listable: the sandbox's uid reaches the read-only asset copies
        # inside an episode's folder by their path, and must not see which episodes exist.
        root.mkdir(mode=0o711)
        root.chmod(0o711)
    except FileExistsError:
        pass
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        logger.error("live workspaces: %s is not a folder of ours alone; refusing it", root)
        raise live.WorkspaceUnsupported(
            "the site cannot lay out workspaces right now (its operator was told why)"
        )
    return root


def unreachable_ancestor(folder: Path) -> Path | None:
    """The first folder on the way to ``folder`` that the sandbox's unprivileged uid cannot
    pass through (read-only asset copies are mounted from inside an episode's folder)."""
    for ancestor in reversed(folder.resolve().parents):
        try:
            if not ancestor.stat().st_mode & 0o001:
                return ancestor
        except OSError:
            return ancestor
    return None


def _unreachable_mounts(ws: live.LiveWorkspace) -> str:
    if not ws.read_only_mounts:
        return ""
    blocked = unreachable_ancestor(ws.folder)
    if blocked is None:
        return ""
    logger.error(
        "live workspaces: %s is not traversable by the sandbox's uid, so read-only assets "
        "cannot be mounted; give it o+x or point SECUREBENCH_EPISODE_WORKSPACE_DIR elsewhere",
        blocked,
    )
    return "The site cannot lay out this task's read-only files (its operator was told why)."


def destroy_workspace(episode: Episode) -> None:
    folder = folder_of(episode)
    if folder is not None:
        live.destroy(folder)


# --- one step --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepResult:
    """What a workspace step gave, to store in its row."""

    obs: dict[str, Any]
    backend: str = ""
    files_written: tuple[str, ...] = ()
    truncated: bool = False
    end_note: str = ""  # set when the step ended the episode (its wall-time budget ran out)


@dataclass
class _Context:
    step: Step
    episode: Episode
    lanes: TaskLanes
    sandbox: Sandbox

    @property
    def tool_call_id(self) -> str | None:
        return self.step.action_id or None


def run_step(step: Step) -> StepResult:
    """Run a claimed workspace step (a reset's seed, or a tool) and say what it gave."""
    episode = Episode.objects.select_related("task", "episode_run__run__contract_version").get(
        pk=step.episode_id
    )
    tool_call_id = step.action_id or None
    sandbox = worker_sandbox()
    if sandbox is None:
        return StepResult(_error("SandboxUnavailable", _NO_SANDBOX, tool_call_id))
    lanes = evaluator_task_lanes(episode.task)
    context = _Context(step=step, episode=episode, lanes=lanes, sandbox=sandbox)
    wanted = episode_still_wants(episode.pk, _reset_generation(step))
    why = wanted()
    if why:
        return StepResult(_stopped(step, why, tool_call_id))
    if step.method == "cube/reset":
        await_quiet(episode.pk, except_step=step.pk)
    try:
        with StepProgress(step, still_wanted=wanted) as progress:
            result = _dispatch(context, progress)
    except live.WorkspaceUnsupported as exc:
        return StepResult(_error("WorkspaceUnsupported", str(exc), tool_call_id), sandbox.name)
    except SandboxUnavailable:
        logger.warning("workspace step %s: the sandbox could not start", step.pk, exc_info=True)
        return StepResult(_error("SandboxUnavailable", _NO_SANDBOX, tool_call_id), sandbox.name)
    except Exception:
        # LiveWorkspaceError included: its message may name host paths; the log keeps it.
        logger.exception("workspace step %s failed", step.pk)
        message = "The site could not run this action (it logged why); try again."
        return StepResult(_error("WorkspaceError", message, tool_call_id), sandbox.name)
    if progress.stopped_because:
        return StepResult(_stopped(step, progress.stopped_because, tool_call_id), sandbox.name)
    return result


_NO_SANDBOX = "No sandbox is available on this worker right now; try again."


def _reset_generation(step: Step) -> int:
    """How many resets the episode had when this step was made: a later reset stops it."""
    return Step.objects.filter(
        episode_id=step.episode_id, method="cube/reset", truncated=False, index__lte=step.index
    ).count()


def _dispatch(context: _Context, progress: StepProgress) -> StepResult:
    step, episode = context.step, context.episode
    ws = workspace_of(episode, context.lanes, context.sandbox.name)
    if step.method == "cube/reset":
        problem = _unreachable_mounts(ws)
        if problem:
            return StepResult(_error("WorkspaceError", problem, context.tool_call_id))
        outcome = live.seed(context.sandbox, ws, context.lanes)
        obs = objectives.workspace_first_observation(
            episode.task,
            episode.episode_run.run.contract_version.contract or {},
            listing=_with_notes(outcome.text, outcome.notes),
            workdir=ws.workdir,
        )
        return StepResult(obs, outcome.backend)
    if not ws.snapshot.is_file():
        message = "The workspace is not ready: call cube/reset to lay it out."
        return StepResult(_error("NoWorkspace", message, context.tool_call_id))
    arguments = step.arguments
    if step.action == BASH:
        cap = _remaining_budget(episode)
        if cap is not None and cap <= 0:
            return _budget_spent(context, "")
        outcome = live.run_bash(
            context.sandbox,
            ws,
            str(arguments["command"]),
            arguments.get("timeout"),
            on_output=progress.on_output,
            wall_cap=cap,
            cancel=progress.cancel,
        )
    elif step.action == READ_FILE:
        outcome = live.read_file(
            context.sandbox,
            ws,
            str(arguments["path"]),
            arguments.get("offset"),
            arguments.get("limit"),
        )
    elif step.action == WRITE_FILE:
        # Like a command, a write is held to the wall-time budget (a step queued in time may
        # reach its worker late): no file is ever written after the budget ran out.
        cap = _remaining_budget(episode)
        if cap is not None and cap <= 0:
            return _budget_spent(context, "")
        outcome = live.write_file(
            context.sandbox, ws, str(arguments["path"]), str(arguments["content"]), wall_cap=cap
        )
    elif step.action == LIST_FILES:
        outcome = live.list_files(context.sandbox, ws, arguments.get("path"))
    else:
        raise ValueError(f"not a workspace action: {step.action!r}")
    return _outcome_result(context, outcome)


def _with_notes(text: str, notes: tuple[str, ...] | list[str]) -> str:
    """The outcome's notes (e.g. which host tools stood in for the image's) after its text."""
    shown = [note for note in notes if note and note not in text]
    if not shown:
        return text
    return text + "\n" + "\n".join(f"[note] {note}" for note in shown)


def _outcome_result(context: _Context, outcome: live.ActionOutcome) -> StepResult:
    text = _with_notes(outcome.text, outcome.notes)
    if outcome.limit == "budget":
        return _budget_spent(context, text, outcome)
    content = wire.text_content(text, tool_call_id=context.tool_call_id)
    err = None
    if not outcome.ok:
        err = wire.step_error(outcome.error_type or "ActionFailed", _first_line(text))
    return StepResult(
        wire.observation([content], err=err),
        outcome.backend,
        tuple(outcome.files_written),
    )


def _budget_spent(
    context: _Context, text: str, outcome: live.ActionOutcome | None = None
) -> StepResult:
    budget = episode_budgets(context.episode).wall_time_seconds
    when = "while the command ran" if context.step.action == BASH else "before it was run"
    note = f"the wall-time budget of {budget:g} s ran out {when}"
    message = (
        f"{text}\n\n" if text else ""
    ) + f"Budget exhausted: {note}; the workspace as it stands is scored."
    return StepResult(
        wire.observation([wire.text_content(message, tool_call_id=context.tool_call_id)]),
        outcome.backend if outcome else "",
        tuple(outcome.files_written) if outcome else (),
        truncated=True,
        end_note=note,
    )


def _remaining_budget(episode: Episode) -> float | None:
    """Seconds left of the episode's wall-time budget (None: the contract sets none)."""
    budget = episode_budgets(episode).wall_time_seconds
    if budget is None or episode.first_reset_at is None:
        return None
    return budget - (timezone.now() - episode.first_reset_at).total_seconds()


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0][:500]


def _error(error_type: str, message: str, tool_call_id: str | None) -> dict[str, Any]:
    return wire.observation(
        [wire.text_content(f"Action failed — {error_type}: {message}", tool_call_id=tool_call_id)],
        err=wire.step_error(error_type, message),
    )


def _stopped(step: Step, why: str, tool_call_id: str | None) -> dict[str, Any]:
    message = f"This {step.action or 'reset'} was stopped: {why}."
    return wire.observation(
        [wire.text_content(message, tool_call_id=tool_call_id)],
        err=wire.step_error("Stopped", message),
    )


def await_quiet(episode_id: int, *, except_step: int | None) -> bool:
    """Wait until no other action of the episode runs (a live one is being stopped by its
    watcher); a step whose worker stopped beating is not waited for."""
    deadline = time.monotonic() + QUIET_SECONDS
    while True:
        fresh = timezone.now() - timedelta(seconds=STALE_HEARTBEAT_SECONDS)
        running = Step.objects.filter(
            episode_id=episode_id, state=StepState.RUNNING, heartbeat_at__gte=fresh
        )
        if except_step is not None:
            running = running.exclude(pk=except_step)
        if not running.exists():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def after_step(step: Step, result: StepResult) -> None:
    """A step that spent the wall-time budget ends its episode, truncated (scored as it
    stands). Called by the worker before the step is marked done, so that whoever reads the
    finished step finds the episode already ending."""
    if result.truncated:
        workspace_end(step.episode_id, ending=EpisodeStatus.TRUNCATED, note=result.end_note)


# --- the ending ------------------------------------------------------------------------------


def workspace_end(episode_id: int, *, ending: str, note: str) -> bool:
    """End a workspace episode: no more steps, its running action is stopped (its worker
    sees the ending), and a worker collects the candidate from the workspace, records it
    and destroys the workspace. False if it had already ended."""
    with transaction.atomic():
        locked = Episode.objects.select_for_update().get(pk=episode_id)
        if locked.status != EpisodeStatus.OPEN:
            return False
        now = timezone.now()
        locked.ending = ending
        locked.end_note = note[:300]
        locked.ended_at = now
        start = locked.first_reset_at
        locked.wall_seconds = (now - start).total_seconds() if start else 0.0
        locked.status = EpisodeStatus.SCORING
        locked.save(update_fields=["ending", "end_note", "ended_at", "wall_seconds", "status"])
        transaction.on_commit(lambda: send_collect(locked.pk), robust=True)
    return True


def send_collect(episode_id: int) -> bool:
    """Queue the collection of an ended episode's workspace (the reaper sends it again if
    this message is lost)."""
    return send_job("episodes.collect_workspace", episode_id)
