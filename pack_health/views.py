"""The health report page, its live progress, "check again", publishing, and the audited
sealed-evidence panel. Reads are in pack_health.selectors, writes in pack_health.services.

Who sees what: anyone who may see the version sees its badge and counts; the pack's
maintainers and privileged users see per-task findings and the forms; sealed evidence is
shown only in debug mode, one finding per request, each recorded in the audit log.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING

from pack_health import selectors, services
from pack_health.models import HealthReport, ReportStatus, ReportVerdict, Severity
from packs import access as pack_access
from packs import selectors as pack_selectors
from packs.models import ContractVersion, VersionState
from packs.pagination import paginate
from runs import privileged, rendering
from runs.models import AuditAction
from verifiers.pack_findings import CHECKS

FINDINGS_PER_PAGE = 50


def _version(request: HttpRequest, pack_id: str, version: int) -> ContractVersion:
    # A draft is a 404 for whoever may not see it, as everywhere (packs.access).
    return pack_selectors.visible_version_get(pack_id, version, user=request.user)


def report_url(version: ContractVersion, report: HealthReport | None = None) -> str:
    url = reverse("pack_health:report", args=[version.pack.pack_id, version.version])
    if report is not None and report.number != _latest_number(version):
        url += f"?report={report.number}"
    return url


def _latest_number(version: ContractVersion) -> int | None:
    latest = selectors.latest_report(version)
    return latest.number if latest else None


def _report_number(request: HttpRequest) -> int | None:
    try:
        return int(request.GET.get("report", ""))
    except ValueError:
        return None


def report_context(
    request: HttpRequest, version: ContractVersion, report: HealthReport | None
) -> dict[str, Any]:
    """What the page and the panel share: badge, counts, progress, and for maintainers the
    findings and forms."""
    pack = version.pack
    insider = selectors.can_see_findings(request.user, pack)
    context: dict[str, Any] = {
        "cv": version,
        "pack": pack,
        "report": report,
        "badge": selectors.badge_of(report),
        "counts": selectors.check_counts(report) if report else [],
        # A done report's counts say it all: no grouped query over its results.
        "progress": selectors.report_progress(report) if report and not report.is_done else None,
        "insider": insider,
        "debug_mode": privileged.debug_mode(request) if insider else None,
        "is_draft": version.state == VersionState.DRAFT,
        "causes": selectors.infrastructure_causes(report)
        if report is not None and report.verdict == ReportVerdict.NOT_CHECKED
        else [],
        "report_url": reverse("pack_health:report", args=[pack.pack_id, version.version]),
    }
    if insider:
        context["override_needed"] = services.override_needed(version)
        context["open_report"] = selectors.open_report(version)
    return context


def _page_context(
    request: HttpRequest, cv: ContractVersion, report: HealthReport | None
) -> dict[str, Any]:
    """The whole report page: the shared context, and for maintainers the findings (one
    page, filtered), the health runs and which findings have sealed evidence."""
    context = report_context(request, cv, report)
    if report is not None and context["insider"]:
        severity = request.GET.get("severity", "")
        check = request.GET.get("check", "")
        severity = severity if severity in Severity.values else ""
        check = check if check in CHECKS else ""
        findings = selectors.report_findings(report, severity=severity, check=check)
        page = paginate(request, findings, FINDINGS_PER_PAGE)
        context |= {
            "page": page,
            "severity": severity,
            "check": check,
            "severities": _severities(report, severity),
            "checks": CHECKS,
            "sealed_ids": selectors.findings_with_sealed_evidence(report),
            "runs": selectors.report_runs(report),
        }
    context |= {
        "reports": cv.health_reports.order_by("-number")[:20],
        "publish_error": "",
        "reason": "",
    }
    return context


def _severities(report: HealthReport, selected: str) -> list[tuple[str, str]]:
    """The filter offers the severities the report has: a report with no failing finding
    never shows the word "failing"."""
    found = selectors.severities_found(report) | {selected}
    return [(value, label) for value, label in Severity.choices if value in found]


@require_GET
@vary_on_headers("HX-Request")
@pack_access.browse_view
def health_report(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    cv = _version(request, pack_id, version)
    report = selectors.report_for(cv, _report_number(request))
    context = _page_context(request, cv, report)
    template = "pack_health/report.html"
    if request.htmx and request.headers.get("HX-Target") in ("findings", "report-view"):
        template += "#" + request.headers["HX-Target"]
    return render(request, template, context)


@require_GET
@pack_access.browse_view
def health_progress(request: HttpRequest, pack_id: str, version: int, number: int) -> HttpResponse:
    """The live progress fragment, polled every 2 s; 286 (stop polling) once done."""
    cv = _version(request, pack_id, version)
    report = selectors.report_for(cv, number)
    context = report_context(request, cv, report)
    context["progress"] = selectors.report_progress(report)  # the last poll shows the totals
    status = HTMX_STOP_POLLING if report.status == ReportStatus.DONE and request.htmx else 200
    return render(request, "pack_health/report.html#progress", context, status=status)


@require_POST
@login_required
def health_check_again(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    cv = _version(request, pack_id, version)
    if not services.can_request(request.user, cv.pack):
        raise PermissionDenied("Only a maintainer of this pack (or a reviewer) may check it again.")
    open_before = selectors.open_report(cv)
    report = services.health_request(cv, user=request.user)
    if open_before is not None:
        messages.info(request, f"Health report {report.number} is still running; it was kept.")
    else:
        messages.success(request, f"Health report {report.number} is queued.")
    return redirect(report_url(cv))


@require_POST
@login_required
def health_publish(request: HttpRequest, pack_id: str, version: int) -> HttpResponse:
    cv = _version(request, pack_id, version)
    if not selectors.can_see_findings(request.user, cv.pack):
        raise PermissionDenied("Only a maintainer of this pack (or a reviewer) may publish it.")
    reason = request.POST.get("reason", "")
    if cv.state == VersionState.PUBLISHED:
        messages.info(request, f"v{cv.version} is already published.")
        return redirect(report_url(cv))
    try:
        published = services.version_publish(
            cv, request.user, reason, ip_address=privileged.client_ip(request)
        )
    except services.PublishRefused as refused:
        context = _page_context(request, cv, selectors.latest_report(cv))
        context |= {"publish_error": str(refused), "reason": reason}
        return render(request, "pack_health/report.html", context, status=400)
    note = " (despite its health checks; your reason is shown beside the badge)"
    messages.success(
        request,
        f"{cv.pack.pack_id} v{cv.version} is published{note if published.publish_reason else ''}.",
    )
    return redirect(reverse("packs:version", args=[cv.pack.pack_id, cv.version]))


@require_GET
def finding_evidence(
    request: HttpRequest, pack_id: str, version: int, number: int, finding_id: int
) -> HttpResponse:
    """One finding's sealed evidence: debug mode only (404 without the privilege, 403 with it
    while debug mode is off), and recorded in the audit log."""
    cv = pack_selectors.version_get(pack_id, version)
    mode = privileged.require_privileged(request, cv.pack)
    report = selectors.report_for(cv, number)
    finding = selectors.finding_get(report, finding_id)
    privileged.audit(
        request,
        AuditAction.VIEW_HEALTH_EVIDENCE,
        mode=mode,
        object_type="health_finding",
        object_id=finding.pk,
        pack_id=cv.pack.pack_id,
        version=cv.version,
        task_id=finding.task_label,
        resource=f"health report {report.number} · {finding.check_name} · {finding.code}",
    )
    blocks = [
        block
        for name, value in sorted(finding.sealed_evidence.items())
        for block in rendering.value_blocks(name, value)
    ]
    context = {"cv": cv, "pack": cv.pack, "report": report, "finding": finding, "blocks": blocks}
    if request.htmx:
        return render(request, "pack_health/_evidence.html", context)
    return render(request, "pack_health/evidence.html", context)
