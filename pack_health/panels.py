"""The health panel on the version page (registered with packs.hooks): the badge and counts
for everyone who sees the version, the first findings for its maintainers and reviewers."""

from __future__ import annotations

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from pack_health import selectors
from pack_health.views import report_context
from packs.models import ContractVersion

PANEL_FINDINGS = 10


def version_panel(request: HttpRequest, version: ContractVersion) -> SafeString:
    report = selectors.latest_report(version)
    context = report_context(request, version, report)
    if report is not None and context["insider"]:
        findings = selectors.report_findings(report).exclude(severity="info")
        context["findings"] = list(findings[: PANEL_FINDINGS + 1])
        context["more_findings"] = len(context["findings"]) > PANEL_FINDINGS
        context["findings"] = context["findings"][:PANEL_FINDINGS]
        context["sealed_ids"] = selectors.findings_with_sealed_evidence(report)
    return render_to_string("pack_health/_version_panel.html", context, request=request)
