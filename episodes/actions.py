"""Actions that run in a sandbox (``run_python`` now; live workspaces next) run on workers,
never in the web process.

The web process marks the step queued, sends its id on the ``actions`` queue and polls the
step row until a worker has written the observation. A worker takes a step by a conditional
update ``queued → running``; a step no worker took within the answer window is marked
``expired`` the same way, so it is either run once or never, and the agent is told which.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from kombu.exceptions import KombuError

from episodes import wire
from episodes.models import Step, StepState
from packs.selectors import evaluator_task_lanes
from runs.pipeline import worker_name, worker_sandbox
from verifiers.sandbox import SandboxUnavailable
from verifiers.snippet import SnippetOutcome, SnippetRejected, run_snippet
from verifiers.verdict import scrub, secret_strings

logger = logging.getLogger(__name__)
POLL_SECONDS = 0.01
LIMIT_MESSAGES = {
    "timeout": "it ran out of time and was stopped",
    "memory": "it ran out of memory and was stopped",
    "output": "its output was cut at the limit",
    "processes": "it tried to start too many processes",
}


def run_sandboxed(step: Step, tool_name: str, arguments: dict[str, str]) -> dict[str, Any]:
    """Queue the step for a worker and wait for its observation, within the answer window."""
    from episodes import tasks  # noqa: PLC0415 - the Celery tasks import this module

    Step.objects.filter(pk=step.pk).update(state=StepState.QUEUED)
    try:
        tasks.run_step_action.delay(step.pk)
    except (KombuError, OSError, ConnectionError) as exc:
        logger.warning("could not send the action of step %s: %s", step.pk, exc)
        Step.objects.filter(pk=step.pk, state=StepState.QUEUED).update(state=StepState.EXPIRED)
        return _busy(step, "the site could not hand your action to a worker")
    done = _observation_within(step.pk, settings.SECUREBENCH_EPISODE_ACTION_WAIT_SECONDS)
    if done is not None:
        return done
    if Step.objects.filter(pk=step.pk, state=StepState.QUEUED).update(state=StepState.EXPIRED):
        return _busy(step, "no worker was free to run it within the answer window")
    # A worker took it at the last moment: its sandbox's own limit ends it shortly.
    done = _observation_within(step.pk, settings.SECUREBENCH_EPISODE_ACTION_GRACE_SECONDS)
    if done is not None:
        return done
    # The worker's own write is conditional on "running": once expired here, what the agent
    # was told (not run in time) is what the trajectory keeps.
    if Step.objects.filter(pk=step.pk, state=StepState.RUNNING).update(state=StepState.EXPIRED):
        return _busy(step, "it did not finish within the answer window")
    return _observation_within(step.pk, 0) or _busy(
        step, "it did not finish within the answer window"
    )


def _observation_within(step_id: int, seconds: float) -> dict[str, Any] | None:
    """The step's observation once a worker has stored it, polling for at most ``seconds``
    (always looking at least once)."""
    deadline = time.monotonic() + seconds
    while True:
        row = Step.objects.filter(pk=step_id).values("state", "observation").first()
        if row and row["state"] == StepState.DONE:
            return row["observation"]
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_SECONDS)


def _busy(step: Step, why: str) -> dict[str, Any]:
    message = f"Your {step.action} call was not run: {why}. Try again."
    return wire.observation(
        [wire.text_content(message, tool_call_id=step.action_id or None)],
        err=wire.step_error("SiteBusy", message),
    )


# --- the worker's side ---------------------------------------------------------------------


def step_action_run(step_id: int) -> bool:
    """Run a queued step's action in a fresh sandbox and store what it gave; False when the
    step was not (or no longer) queued."""
    claimed = Step.objects.filter(pk=step_id, state=StepState.QUEUED).update(
        state=StepState.RUNNING, worker=worker_name()[:200]
    )
    if not claimed:
        return False
    step = Step.objects.select_related("episode__task").get(pk=step_id)
    obs, backend = _run_python(step)
    Step.objects.filter(pk=step_id, state=StepState.RUNNING).update(
        state=StepState.DONE, observation=obs, sandbox_backend=backend[:32]
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
    # The sandbox holds nothing of the task, but what the agent prints is recorded in the
    # trajectory: scrub the task's sealed values as every verifier output is scrubbed.
    lanes = evaluator_task_lanes(step.episode.task)
    secrets = secret_strings([*lanes.evaluation_inputs.values(), *lanes.hidden.values()])
    stdout, stderr = scrub(outcome.stdout, secrets), scrub(outcome.stderr, secrets)
    lines = [f"exit code: {outcome.exit_code if outcome.exit_code is not None else '—'}"]
    if outcome.limit:
        lines.append(f"limit: {LIMIT_MESSAGES.get(outcome.limit, outcome.limit)}")
    lines.append(f"--- stdout ---\n{stdout}" if stdout else "--- stdout: (empty) ---")
    if stderr:
        lines.append(f"--- stderr ---\n{stderr}")
    return wire.observation([wire.text_content("\n".join(lines), tool_call_id=tool_call_id)])


def expired_steps_sweep() -> int:
    """Steps left queued or running by a web process that died mid-wait: mark them expired
    after a generous margin, so that the trajectory says what became of them."""
    cutoff = timezone.now() - timedelta(minutes=10)
    return Step.objects.filter(
        state__in=[StepState.QUEUED, StepState.RUNNING], created_at__lt=cutoff
    ).update(state=StepState.EXPIRED)
