"""Reads for the health panel, report page and API.

Nothing here reads a finding's sealed evidence: lists defer it, and only the audited
debug-mode view (pack_health.views.finding_evidence) loads it, one finding at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Count, IntegerField, Q, QuerySet, Value, When
from django.shortcuts import get_object_or_404

from pack_health.models import (
    HealthFinding,
    HealthReport,
    HealthRun,
    ReportStatus,
    ReportVerdict,
    Severity,
)
from packs import access as pack_access
from packs.models import ContractVersion, Pack
from runs.models import FINAL_STATUSES, Evaluation, TaskResult
from verifiers.pack_findings import CHECKS

OPEN_REPORT_STATUSES = (ReportStatus.QUEUED, ReportStatus.RUNNING)
# The report's runs in the order the checks are explained.
RUN_ORDER = ("oracle", "repeat", "null", "adversarial")
# Failing findings first, then warnings, then notes; within a severity, in the order found.
SEVERITY_ORDER = {
    Severity.FAILING: 0,
    Severity.NOT_CHECKED: 1,
    Severity.WARNING: 2,
    Severity.INFO: 3,
}


def can_see_findings(user: Any, pack: Pack) -> bool:
    """Per-task findings (public-safe text) and the report's forms: the pack's maintainers
    and privileged users. Sealed evidence needs debug mode on top (runs.privileged)."""
    return pack_access.can_view_privileged(user, pack)


def latest_report(version: ContractVersion) -> HealthReport | None:
    return version.health_reports.order_by("-number").first()


def report_for(version: ContractVersion, number: int | None = None) -> HealthReport | None:
    """The report of that number (404 when there is none), or the latest one (None)."""
    if number is None:
        return latest_report(version)
    return get_object_or_404(version.health_reports, number=number)


def open_report(version: ContractVersion) -> HealthReport | None:
    return version.health_reports.filter(status__in=OPEN_REPORT_STATUSES).first()


@dataclass(frozen=True)
class CheckProgress:
    check: str
    done: int
    total: int


@dataclass(frozen=True)
class HealthProgress:
    """Results of the report's health runs that are final, out of all of them."""

    done: int
    total: int
    checks: list[CheckProgress]

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 0.0


def report_progress(report: HealthReport) -> HealthProgress:
    """One grouped query: per check, how many of its runs' results are final."""
    rows = (
        TaskResult.objects.filter(evaluation__run__health_run__report=report, evaluation__number=1)
        .values("evaluation__run__health_run__check_name")
        .annotate(total=Count("id"), done=Count("id", filter=Q(status__in=FINAL_STATUSES)))
        .order_by()
    )
    by_check = {row["evaluation__run__health_run__check_name"]: row for row in rows}
    checks = [
        CheckProgress(check, by_check[check]["done"], by_check[check]["total"])
        for check in CHECKS
        if check in by_check
    ]
    return HealthProgress(
        done=sum(c.done for c in checks), total=sum(c.total for c in checks), checks=checks
    )


@dataclass(frozen=True)
class CheckCount:
    check: str
    label: str
    checked: int
    failing: int
    warning: int
    info: int
    not_checked: int = 0


CHECK_LABELS = {
    "oracle": "Oracle (reference passes)",
    "repeat": "Repeat (same verdict twice)",
    "null": "Null (empty candidate fails)",
    "leak": "Leak audit (nothing sealed in public)",
    "adversarial": "Adversarial smoke (attacks fail)",
}


def check_counts(report: HealthReport) -> list[CheckCount]:
    """The report's counts per check, in a fixed order (public: no task is named)."""
    rows = []
    for check in CHECKS:
        counts = report.counts.get(check) or {}
        rows.append(
            CheckCount(
                check=check,
                label=CHECK_LABELS.get(check, check),
                checked=int(counts.get("checked", 0)),
                failing=int(counts.get("failing", 0)),
                warning=int(counts.get("warning", 0)),
                info=int(counts.get("info", 0)),
                not_checked=int(counts.get("not_checked", 0)),
            )
        )
    return rows


def report_findings(
    report: HealthReport, *, severity: str = "", check: str = ""
) -> QuerySet[HealthFinding]:
    """The report's findings without their sealed evidence, most serious first."""
    findings = report.findings.defer("sealed_evidence")
    if severity:
        findings = findings.filter(severity=severity)
    if check:
        findings = findings.filter(check_name=check)
    return findings.order_by(_severity_rank(), "id")


def _severity_rank() -> Case:
    return Case(
        *(When(severity=s, then=Value(rank)) for s, rank in SEVERITY_ORDER.items()),
        default=Value(9),
        output_field=IntegerField(),
    )


MAX_CAUSES = 5


def infrastructure_causes(report: HealthReport) -> list[str]:
    """Why the report's not-checked findings could not run, each cause once (public words:
    built from backend, image and host names, never from verifier output; no task named)."""
    causes = (
        report.findings.filter(severity=Severity.NOT_CHECKED)
        .values_list("evidence__cause", flat=True)
        .distinct()
        .order_by()
    )
    return sorted({cause for cause in causes[: MAX_CAUSES * 4] if cause})[:MAX_CAUSES]


def severities_found(report: HealthReport) -> set[str]:
    """The severities the report's findings have (the filter offers only these)."""
    return set(report.findings.values_list("severity", flat=True).distinct().order_by())


def findings_with_sealed_evidence(report: HealthReport) -> set[int]:
    """Ids of findings that have sealed evidence (the column is compared, never read out)."""
    return set(report.findings.exclude(sealed_evidence={}).values_list("pk", flat=True))


def finding_get(report: HealthReport, finding_id: int) -> HealthFinding:
    return get_object_or_404(report.findings.select_related("task"), pk=finding_id)


def report_runs(report: HealthReport) -> list[HealthRun]:
    """The report's runs with their first (the report's own) evaluation."""
    order = {check: index for index, check in enumerate(RUN_ORDER)}
    runs = sorted(
        report.health_runs.select_related("run"),
        key=lambda h: (order.get(h.check_name, len(order)), h.slot, h.pk),
    )
    evaluations = {
        e.run_id: e for e in Evaluation.objects.filter(run__in=[h.run_id for h in runs], number=1)
    }
    for health_run in runs:
        health_run.evaluation = evaluations.get(health_run.run_id)  # type: ignore[attr-defined]
    return runs


def badge_of(report: HealthReport | None) -> str:
    """The word the badge shows: healthy, warnings, not_checked, failing, running, queued,
    error or none."""
    if report is None:
        return "none"
    if report.status != ReportStatus.DONE:
        return report.status
    if report.error or not report.verdict:
        return "error"
    return report.verdict


def is_clean(report: HealthReport | None) -> bool:
    """A finished report with no failing check: the version may be published on it alone."""
    return (
        report is not None
        and report.status == ReportStatus.DONE
        and not report.error
        and report.verdict in (ReportVerdict.HEALTHY, ReportVerdict.WARNINGS)
    )
