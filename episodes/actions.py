"""Actions that run in a sandbox (``run_python``; a live workspace's reset and tools) run on
workers, never in the web process.

The web process marks the step queued, sends its id on the ``actions`` queue and polls the
step row until a worker has written the observation. A worker takes a step by a conditional
update ``queued → running``; a step no worker took in time is marked ``expired`` the same
way, so it is either run once or never, and the agent is told which.

A workspace action may outlive the answer window (a long build, a test suite): it keeps
running on its worker, which streams its output into the step row (episodes.progress). The
web then answers with the output so far and ``running``; the agent's ``wait`` (or its next
step) collects the rest. Short actions (``run_python``) never continue past the window: a
step still running then is marked expired, as one no worker took.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from episodes import live_workspaces, wire
from episodes.models import Step, StepState
from episodes.progress import STALE_HEARTBEAT_SECONDS
from episodes.tools import RUN_PYTHON
from job_queue import send_job
from runs.pipeline import worker_name, worker_sandbox
from verifiers.sandbox import SandboxUnavailable
from verifiers.snippet import SnippetOutcome, SnippetRejected, run_snippet
from verifiers.verdict import storable, storable_text

logger = logging.getLogger(__name__)
POLL_SECONDS = 0.01
# Polling slows down once an action has run this long: a long command needs no 10 ms reads.
FAST_POLL_WINDOW = 1.0
SLOW_POLL_SECONDS = 0.05
LIMIT_MESSAGES = {
    "timeout": "it ran out of time and was stopped",
    "memory": "it ran out of memory and was stopped",
    "output": "its output was cut at the limit",
    "processes": "it tried to start too many processes",
}
# Steps whose worker never wrote back: run_python's are long over after this; a workspace
# action's worker beats while it runs, so one silent past STALE_HEARTBEAT_SECONDS
# (episodes.progress) is dead.
ABANDONED_STEP_MINUTES = 10

DONE = "done"  # the action finished: its observation is the final one
RUNNING = "running"  # still running on a worker: the observation shows its output so far
NOT_RUN = "not_run"  # no worker took it in time (or it could not be sent)


@dataclass(frozen=True)
class ActionAnswer:
    obs: dict[str, Any]
    state: str  # DONE | RUNNING | NOT_RUN
    truncated: bool = False  # the action ran out of the episode's wall-time budget

    @property
    def running(self) -> bool:
        return self.state == RUNNING


def answer_deadline() -> float:
    """When a step's answer is due (monotonic clock): the stock client gives up at 10 s."""
    window = (
        settings.SECUREBENCH_EPISODE_ACTION_WAIT_SECONDS
        + settings.SECUREBENCH_EPISODE_ACTION_GRACE_SECONDS
    )
    return time.monotonic() + window


def run_sandboxed(
    step: Step, *, may_continue: bool = False, deadline: float | None = None
) -> ActionAnswer:
    """Queue the step for a worker and wait for its observation, within the answer window
    (or until ``deadline``). ``may_continue``: a workspace action, left running at the
    deadline and answered with its output so far."""
    deadline = answer_deadline() if deadline is None else deadline
    # A workspace action is unanswered until its final observation reaches the agent.
    Step.objects.filter(pk=step.pk).update(state=StepState.QUEUED, answered=not may_continue)
    if not send_job("episodes.run_step_action", step.pk):
        return _not_run(step, "the site could not hand your action to a worker")
    take_by = min(deadline, time.monotonic() + settings.SECUREBENCH_EPISODE_ACTION_WAIT_SECONDS)
    row = _row_when(step.pk, take_by, lambda row: row["state"] != StepState.QUEUED)
    if row["state"] == StepState.QUEUED and _expire(step.pk, StepState.QUEUED):
        return _not_run(step, "no worker was free to run it within the answer window")
    return await_action(step, deadline=deadline, may_continue=may_continue)


def await_action(step: Step, *, deadline: float, may_continue: bool = True) -> ActionAnswer:
    """The step's observation once its worker has stored it, waiting until ``deadline``;
    past it, the output so far (``may_continue``) or the step expired (the worker's own
    write is conditional on "running": what the agent was told is what the trajectory keeps).
    """
    row = _row_when(step.pk, deadline, lambda row: row["state"] not in _LIVE_STATES)
    if row["state"] == StepState.DONE:
        return ActionAnswer(row["observation"], DONE, truncated=row["truncated"])
    if row["state"] == StepState.EXPIRED:
        taken = Step.objects.filter(pk=step.pk).exclude(worker="").exists()
        why = "its worker stopped before it finished" if taken else "no worker took it in time"
        return _not_run(step, why, record=False)
    if may_continue:
        return ActionAnswer(output_so_far(step), RUNNING)
    if _expire(step.pk, row["state"]):
        return _not_run(step, "it did not finish within the answer window", record=False)
    final = _row_when(step.pk, 0, lambda row: True)
    if final["state"] == StepState.DONE:
        return ActionAnswer(final["observation"], DONE, truncated=final["truncated"])
    return _not_run(step, "it did not finish within the answer window", record=False)


_LIVE_STATES = (StepState.QUEUED, StepState.RUNNING)
_ROW_FIELDS = ("state", "observation", "truncated")


def _row_when(step_id: int, deadline: float, ready: Any) -> dict[str, Any]:
    """The step's row once ``ready(row)``, polling until ``deadline`` (looking at least
    once)."""
    started = time.monotonic()
    while True:
        row = Step.objects.filter(pk=step_id).values(*_ROW_FIELDS).first()
        if row is None:
            raise Step.DoesNotExist(step_id)
        now = time.monotonic()
        if ready(row) or now >= deadline:
            return row
        pause = POLL_SECONDS if now - started < FAST_POLL_WINDOW else SLOW_POLL_SECONDS
        time.sleep(max(0.0, min(pause, deadline - now)))


def _expire(step_id: int, state: str) -> bool:
    return bool(Step.objects.filter(pk=step_id, state=state).update(state=StepState.EXPIRED))


def _not_run(step: Step, why: str, *, record: bool = True) -> ActionAnswer:
    if record:
        Step.objects.filter(pk=step.pk, state=StepState.QUEUED).update(state=StepState.EXPIRED)
    Step.objects.filter(pk=step.pk).update(answered=True)
    name = step.action or "reset"
    message = f"Your {name} call was not run: {why}. Try again."
    obs = wire.observation(
        [wire.text_content(message, tool_call_id=step.action_id or None)],
        err=wire.step_error("SiteBusy", message),
    )
    return ActionAnswer(obs, NOT_RUN)


def output_so_far(step: Step) -> dict[str, Any]:
    """A running action's output the agent has not seen yet (the last part of it when more
    was printed than is kept), as an observation; what it shows is marked seen."""
    row = Step.objects.filter(pk=step.pk).values("live_output", "live_chars", "shown_chars").get()
    tail, total, shown = row["live_output"], row["live_chars"], row["shown_chars"]
    new = max(0, total - shown)
    if new == 0:
        text = "(no new output yet)"
    elif new <= len(tail):
        text = tail[-new:]
    else:
        text = f"[… {new - len(tail):,} characters not kept …]\n{tail}"
    Step.objects.filter(pk=step.pk, shown_chars__lt=total).update(shown_chars=total)
    name = step.action or "reset"
    message = (
        f"Step {step.index} ({name}) is still running. Its output since you last looked:\n"
        f"{text}\nCall wait to see the rest."
    )
    return wire.observation([wire.text_content(message, tool_call_id=step.action_id or None)])


# --- the worker's side ---------------------------------------------------------------------


def step_action_run(step_id: int) -> bool:
    """Run a queued step's action in a fresh sandbox and store what it gave; False when the
    step was not (or no longer) queued."""
    now = timezone.now()
    claimed = Step.objects.filter(pk=step_id, state=StepState.QUEUED).update(
        state=StepState.RUNNING, worker=worker_name()[:200], heartbeat_at=now
    )
    if not claimed:
        return False
    step = Step.objects.select_related("episode__task").get(pk=step_id)
    if step.action == RUN_PYTHON:
        obs, backend = _run_python(step)
        Step.objects.filter(pk=step_id, state=StepState.RUNNING).update(
            state=StepState.DONE, observation=storable(obs), sandbox_backend=backend[:32]
        )
        return True
    result = live_workspaces.run_step(step)
    live_workspaces.after_step(step, result)
    finished = timezone.now()
    Step.objects.filter(pk=step_id, state=StepState.RUNNING).update(
        state=StepState.DONE,
        observation=storable(result.obs),
        error_type=storable_text((result.obs.get("error") or {}).get("error_type") or "")[:100],
        sandbox_backend=result.backend[:32],
        files_written=storable(list(result.files_written)),
        truncated=result.truncated,
        done=result.truncated,
        finished_at=finished,
        duration_ms=(finished - step.created_at).total_seconds() * 1000,
    )
    return True


def _run_python(step: Step) -> tuple[dict[str, Any], str]:
    sandbox = worker_sandbox()
    tool_call_id = step.action_id or None
    if sandbox is None:
        message = "No sandbox is available on this worker right now; try again."
        return wire.observation(
            [wire.text_content(message, tool_call_id=tool_call_id)],
            err=wire.step_error("SandboxUnavailable", message),
        ), ""
    code = str(step.arguments.get("code", ""))
    stdin = str(step.arguments.get("stdin", ""))
    try:
        outcome = run_snippet(sandbox, code, stdin)
    except SandboxUnavailable:
        logger.warning("run_python of step %s: the sandbox could not start", step.pk, exc_info=True)
        message = "The sandbox could not start on this worker; try again."
        return wire.observation(
            [wire.text_content(message, tool_call_id=tool_call_id)],
            err=wire.step_error("SandboxUnavailable", message),
        ), sandbox.name
    except SnippetRejected as exc:
        return wire.observation(
            [wire.text_content(f"Action failed — {exc}", tool_call_id=tool_call_id)],
            err=wire.step_error("InvalidArguments", str(exc)),
        ), sandbox.name
    return _snippet_observation(step, outcome, tool_call_id), outcome.backend


def _snippet_observation(
    step: Step, outcome: SnippetOutcome, tool_call_id: str | None
) -> dict[str, Any]:
    # Not scrubbed of the task's sealed values: the sandbox holds nothing of the task, so
    # what it prints is the agent's own code's doing, and a "<redacted>" where the agent
    # printed a guess would tell it the guess is sealed (an oracle for hidden tests and
    # reference solutions). The trajectory shows it to the run's owner only.
    stdout, stderr = outcome.stdout, outcome.stderr
    lines = [f"exit code: {outcome.exit_code if outcome.exit_code is not None else '—'}"]
    if outcome.limit:
        lines.append(f"limit: {LIMIT_MESSAGES.get(outcome.limit, outcome.limit)}")
    lines.append(f"--- stdout ---\n{stdout}" if stdout else "--- stdout: (empty) ---")
    if stderr:
        lines.append(f"--- stderr ---\n{stderr}")
    return wire.observation([wire.text_content("\n".join(lines), tool_call_id=tool_call_id)])


def expired_steps_sweep() -> int:
    """Steps whose worker or web process died: mark them expired, so that the trajectory
    says what became of them. A workspace action's worker beats while it runs
    (episodes.progress): a silent one is dead. Any other step after a generous margin."""
    now = timezone.now()
    stale = now - timedelta(seconds=STALE_HEARTBEAT_SECONDS)
    silent = Step.objects.filter(state=StepState.RUNNING, heartbeat_at__lt=stale).exclude(
        action=RUN_PYTHON
    )
    count = silent.update(state=StepState.EXPIRED)
    old = Step.objects.filter(
        state__in=[StepState.QUEUED, StepState.RUNNING],
        created_at__lt=now - timedelta(minutes=ABANDONED_STEP_MINUTES),
    ).exclude(Q(state=StepState.RUNNING, heartbeat_at__gte=stale) & ~Q(action=RUN_PYTHON))
    return count + old.update(state=StepState.EXPIRED)
