"""Run control: the run's owner or an admin pauses, resumes or cancels a run, with a written
reason that the audit log keeps.

A paused run's queued work waits: the pipeline neither sends nor claims it, nor does the
reaper send it again (runs.pipeline filters on ``Run.control``); a verification already
running finishes. Resuming sends the waiting work. Cancelling first lets the layers above
close what they hold (a live run's episodes, through runs.hooks), then releases the open
work as unjudged (``error``, reason ``cancelled``: never the agent's failure), so the
evaluation finishes and the run reads incomplete.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from runs import hooks
from runs.access import owns
from runs.models import (
    OPEN_STATUSES,
    AuditAction,
    AuditEvent,
    Evaluation,
    EvaluationStatus,
    ResultStatus,
    Run,
    RunControl,
    TaskResult,
)
from runs.pipeline import evaluation_dispatch, evaluation_finish_if_done
from verifiers.verdict import Reason

MAX_REASON = 2000


class ControlRefused(ValueError):
    """A change the run's control cannot make (a cancelled run, a missing reason): the
    message is for users."""


def can_control(user: Any, run: Run) -> bool:
    """Its owner, or an admin (a superuser), who must be able to stop a run whose owner left."""
    return owns(user, run) or bool(getattr(user, "is_superuser", False))


def run_pause(run: Run, *, user: Any, reason: str, ip_address: str | None = None) -> Run:
    return _change(run, user, reason, ip_address, RunControl.PAUSED, AuditAction.RUN_PAUSED)


def run_resume(run: Run, *, user: Any, reason: str, ip_address: str | None = None) -> Run:
    run = _change(run, user, reason, ip_address, RunControl.ACTIVE, AuditAction.RUN_RESUMED)
    for evaluation_id in _open_evaluations(run):
        transaction.on_commit(lambda pk=evaluation_id: evaluation_dispatch(pk))
    return run


def run_cancel(run: Run, *, user: Any, reason: str, ip_address: str | None = None) -> Run:
    run = _change(run, user, reason, ip_address, RunControl.CANCELLED, AuditAction.RUN_CANCELLED)
    hooks.run_cancelled(run.pk, reason)
    now = timezone.now()
    for evaluation_id in _open_evaluations(run):
        # Clearing the lease makes a running verification's late verdict write nothing.
        TaskResult.objects.filter(evaluation_id=evaluation_id, status__in=OPEN_STATUSES).update(
            status=ResultStatus.ERROR,
            failure_reason=Reason.CANCELLED,
            score=0.0,
            lease_token=None,
            lease_expires_at=None,
            finished_at=now,
        )
        evaluation_finish_if_done(evaluation_id)
    return run


def _change(run: Run, user: Any, reason: str, ip_address: str | None, to: str, action: str) -> Run:
    if not can_control(user, run):
        raise PermissionDenied("Only the run's owner or an admin may pause, resume or cancel it.")
    reason = (reason or "").strip()
    if not reason:
        raise ControlRefused("Write a reason: it is kept in the audit log.")
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.control == RunControl.CANCELLED:
            raise ControlRefused(f"Run {run.pk} is cancelled; a cancelled run stays cancelled.")
        if locked.control == to:
            raise ControlRefused(f"Run {run.pk} is {to} already.")
        locked.control, locked.control_reason = to, reason[:MAX_REASON]
        locked.save(update_fields=["control", "control_reason"])
        AuditEvent.objects.create(
            user=user,
            username=user.get_username(),
            action=action,
            object_type="run",
            object_id=str(run.pk),
            pack_id=run.contract_version.pack.pack_id,
            version=run.contract_version.version,
            reason=reason[:MAX_REASON],
            ip_address=ip_address,
        )
    return locked


def _open_evaluations(run: Run) -> list[int]:
    return list(
        Evaluation.objects.filter(run=run)
        .exclude(status=EvaluationStatus.DONE)
        .values_list("pk", flat=True)
    )
