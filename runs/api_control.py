"""``POST /api/v1/runs/{id}/control/``: pause, resume or cancel a run (runs.control), with the
written reason the audit log keeps: what the run page's buttons do, for a harness."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from runs import control, selectors
from runs.api import RunApiView
from runs.models import Run
from runs.privileged import client_ip

CHANGES = {"pause": control.run_pause, "resume": control.run_resume, "cancel": control.run_cancel}


class RunControlInput(serializers.Serializer):
    action = serializers.ChoiceField(choices=sorted(CHANGES))
    reason = serializers.CharField(
        max_length=control.MAX_REASON, help_text="Why: kept in the audit log."
    )


class RunControlOutput(serializers.Serializer):
    run = serializers.IntegerField()
    control = serializers.CharField(help_text="active, paused or cancelled")
    reason = serializers.CharField()


def control_body(run: Run) -> dict[str, Any]:
    return {"run": run.pk, "control": run.control, "reason": run.control_reason}


class RunControlApi(RunApiView):
    @extend_schema(
        operation_id="run_control",
        request=RunControlInput,
        responses={
            200: RunControlOutput,
            400: OpenApiResponse(
                description="No such action, no reason, a cancelled run, or no change."
            ),
            403: OpenApiResponse(description="Neither the run's owner nor an admin."),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get(run_id, user=request.user)
        if not control.can_control(request.user, run):
            raise PermissionDenied(
                "Only the run's owner or an admin may pause, resume or cancel it."
            )
        given = RunControlInput(data=request.data)
        given.is_valid(raise_exception=True)
        change = CHANGES[given.validated_data["action"]]
        try:
            changed = change(
                run,
                user=request.user,
                reason=given.validated_data["reason"],
                ip_address=client_ip(request),
            )
        except control.ControlRefused as refused:
            return Response({"detail": str(refused)}, status=400)
        return Response(control_body(changed))
