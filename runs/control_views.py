"""The run page's pause, resume and cancel buttons (runs.control), one POST with the action
and the written reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from runs import control, selectors
from runs.models import Run
from runs.privileged import client_ip

ACTIONS: dict[str, tuple[Callable[..., Run], str]] = {
    "pause": (control.run_pause, "paused: its queued work waits until it is resumed"),
    "resume": (control.run_resume, "resumed: its waiting work is sent to the workers"),
    "cancel": (control.run_cancel, "cancelled: its open work was released, unjudged"),
}


@require_POST
def run_control(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(run_id, user=request.user)
    if not control.can_control(request.user, run):
        raise PermissionDenied("Only the run's owner or an admin may pause, resume or cancel it.")
    found = ACTIONS.get(request.POST.get("action", ""))
    if found is None:
        messages.error(request, "Choose pause, resume or cancel.")
        return redirect("runs:detail", run_id=run.pk)
    change, done = found
    arguments: dict[str, Any] = {
        "user": request.user,
        "reason": request.POST.get("reason", ""),
        "ip_address": client_ip(request),
    }
    try:
        change(run, **arguments)
    except control.ControlRefused as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, f"Run {run.pk} {done}.")
    return redirect("runs:detail", run_id=run.pk)
