"""Health report API (v1): read a version's report, check it again, publish it.

Everyone who may see the version reads its badge and counts; the pack's maintainers and
privileged users read the per-task findings too (never sealed evidence: that is for the
audited debug-mode page only) and may ask for a new report or publish the version.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pack_health import selectors, services
from pack_health.models import HealthFinding, HealthReport
from packs import selectors as pack_selectors
from packs.api_parsers import TextJSONParser
from packs.models import ContractVersion, VersionState
from runs import privileged
from runs.api_serializers import StrictSerializer

MAX_FINDINGS = 1000


class CheckCountSerializer(serializers.Serializer):
    checked = serializers.IntegerField()
    failing = serializers.IntegerField()
    warning = serializers.IntegerField()
    info = serializers.IntegerField()
    not_checked = serializers.IntegerField(
        help_text="items the site's infrastructure could not check (no sandbox, no image)"
    )


class FindingSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    check = serializers.CharField(source="check_name")
    code = serializers.CharField()
    severity = serializers.CharField()
    task_id = serializers.CharField(
        source="task_label", allow_blank=True, help_text="empty for the pack as a whole"
    )
    message = serializers.CharField()
    evidence = serializers.DictField(help_text="public facts: statuses, reasons, paths, ids")


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(help_text="results of the health runs that are final")
    total = serializers.IntegerField(help_text="every result of the health runs")


class ReportSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    trigger = serializers.CharField()
    status = serializers.CharField(help_text="queued, running or done")
    verdict = serializers.CharField(
        allow_blank=True,
        help_text="healthy, warnings, not_checked (the site could not run some checks: not"
        " the pack's fault; checked again automatically) or failing; empty until done",
    )
    badge = serializers.CharField(
        help_text="healthy, warnings, not_checked, failing, running, queued or error (checks"
        " did not run)"
    )
    counts = serializers.DictField(child=CheckCountSerializer())
    timing = serializers.DictField()
    error = serializers.CharField(allow_blank=True)
    progress = ProgressSerializer()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    findings = FindingSerializer(
        many=True,
        required=False,
        help_text="maintainers and privileged users only (most serious first, at most 1000)",
    )


class HealthOutput(serializers.Serializer):
    pack = serializers.CharField()
    version = serializers.IntegerField()
    state = serializers.CharField(help_text="draft or published")
    publish_reason = serializers.CharField(
        allow_blank=True, help_text="why it was published despite its health checks"
    )
    report = ReportSerializer(allow_null=True, help_text="the latest report, null before any")


class StrictTextField(serializers.CharField):
    """A string, never a number or boolean turned into one."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class PublishInput(StrictSerializer):
    reason = StrictTextField(
        required=False,
        allow_blank=True,
        max_length=services.MAX_REASON_CHARS,
        help_text="needed when the latest report is failing, unfinished or missing",
    )


def _version(request: Request, pack_id: str, version: int) -> ContractVersion:
    return pack_selectors.visible_version_get(pack_id, version, user=request.user)


def _require_insider(request: Request, cv: ContractVersion, what: str) -> None:
    if not selectors.can_see_findings(request.user, cv.pack):
        raise PermissionDenied(f"Only a maintainer of this pack (or a reviewer) may {what}.")


def health_body(request: Request, cv: ContractVersion) -> dict[str, Any]:
    report = selectors.latest_report(cv)
    return {
        "pack": cv.pack.pack_id,
        "version": cv.version,
        "state": cv.state,
        "publish_reason": cv.publish_reason,
        "report": _report_body(request, cv, report) if report else None,
    }


def _report_body(request: Request, cv: ContractVersion, report: HealthReport) -> dict[str, Any]:
    progress = selectors.report_progress(report)
    body: dict[str, Any] = {
        "number": report.number,
        "trigger": report.trigger,
        "status": report.status,
        "verdict": report.verdict,
        "badge": selectors.badge_of(report),
        "counts": {row.check: _count(row) for row in selectors.check_counts(report)},
        "timing": report.timing,
        "error": report.error,
        "progress": {"done": progress.done, "total": progress.total},
        "created_at": report.created_at,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
    }
    if selectors.can_see_findings(request.user, cv.pack):
        findings: list[HealthFinding] = list(selectors.report_findings(report)[:MAX_FINDINGS])
        body["findings"] = findings
    return body


def _count(row: selectors.CheckCount) -> dict[str, int]:
    return {
        "checked": row.checked,
        "failing": row.failing,
        "warning": row.warning,
        "info": row.info,
        "not_checked": row.not_checked,
    }


def _answer(request: Request, cv: ContractVersion, code: int = 200) -> Response:
    return Response(HealthOutput(health_body(request, cv)).data, status=code)


class HealthReportApi(APIView):
    @extend_schema(operation_id="health_report", responses=HealthOutput)
    def get(self, request: Request, pack_id: str, version: int) -> Response:
        return _answer(request, _version(request, pack_id, version))


class HealthCheckApi(APIView):
    parser_classes = [TextJSONParser]

    @extend_schema(
        operation_id="health_check_again",
        request=None,
        responses={
            202: OpenApiResponse(
                HealthOutput, description="A new report is queued (or the open one is kept)."
            ),
        },
    )
    def post(self, request: Request, pack_id: str, version: int) -> Response:
        cv = _version(request, pack_id, version)
        _require_insider(request, cv, "check it again")
        services.health_request(cv, user=request.user)
        return _answer(request, cv, status.HTTP_202_ACCEPTED)


class HealthPublishApi(APIView):
    # JSON only: a form body with nothing usable in it must not read as "no reason given".
    parser_classes = [TextJSONParser]

    @extend_schema(
        operation_id="health_publish",
        request=PublishInput,
        responses={
            200: OpenApiResponse(HealthOutput, description="Published (or it already was)."),
            400: OpenApiResponse(
                description='Refused: {"reason": [...]} when a written reason is needed.'
            ),
        },
    )
    def post(self, request: Request, pack_id: str, version: int) -> Response:
        cv = _version(request, pack_id, version)
        _require_insider(request, cv, "publish it")
        payload = PublishInput(data=request.data)
        payload.is_valid(raise_exception=True)
        if cv.state != VersionState.PUBLISHED:
            try:
                cv = services.version_publish(
                    cv,
                    request.user,
                    payload.validated_data.get("reason", ""),
                    ip_address=privileged.client_ip(request),
                )
            except services.PublishRefused as refused:
                return Response({"reason": [str(refused)]}, status=400)
        return _answer(request, cv)
