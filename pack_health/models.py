"""Health reports of contract versions, their findings and the runs that scored them.

A report is written by workers (pack_health.services) and read by pages and the API; its
findings keep public-safe text apart from sealed evidence (leaked values, verifier output),
which is shown only in debug mode, audited (DESIGN.md §2).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from packs.models import ContractVersion, Task
from runs.models import Run


class ReportStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"


class ReportVerdict(models.TextChoices):
    HEALTHY = "healthy", "healthy"
    WARNINGS = "warnings", "warnings"
    # Some check could not run because of the site (verifiers.pack_findings.NOT_CHECKED).
    NOT_CHECKED = "not_checked", "not checked — infrastructure"
    FAILING = "failing", "failing"


class ReportTrigger(models.TextChoices):
    UPLOAD = "upload", "on upload"
    ON_DEMAND = "on_demand", "on demand"
    # The sweep's own: the last report could not run its checks, and now a worker can.
    RECHECK = "recheck", "checked again automatically"


class HealthCheck(models.TextChoices):
    ORACLE = "oracle", "oracle"
    NULL = "null", "null"
    REPEAT = "repeat", "repeat"
    LEAK = "leak", "leak audit"
    ADVERSARIAL = "adversarial", "adversarial smoke"


class Severity(models.TextChoices):
    FAILING = "failing", "failing"
    NOT_CHECKED = "not_checked", "not checked — infrastructure"
    WARNING = "warning", "warning"
    INFO = "info", "info"


class HealthReport(models.Model):
    contract_version = models.ForeignKey(
        ContractVersion, on_delete=models.PROTECT, related_name="health_reports"
    )
    number = models.PositiveIntegerField()
    trigger = models.CharField(max_length=16, choices=ReportTrigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=16, choices=ReportStatus.choices, default=ReportStatus.QUEUED
    )
    # Empty until done.
    verdict = models.CharField(max_length=16, choices=ReportVerdict.choices, blank=True)
    # Per check: {"checked": n, "failing": n, "warning": n, "info": n}; public.
    counts = models.JSONField(default=dict)
    # Per-task timing of the oracle check: {"median_seconds", "slowest": [{"task_id", "seconds"}]}.
    timing = models.JSONField(default=dict)
    # When the checks themselves could not run (not a finding about the pack).
    error = models.TextField(blank=True)
    # A not-checked report: what the workers able to run sandboxed checks looked like when it
    # finished (pack_health.hooks.sandbox_capability). The sweep checks again once it changes.
    workers_seen = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["contract_version", "number"], name="one_health_report_number"
            ),
        ]

    def __str__(self) -> str:
        return f"health report {self.number} of {self.contract_version}"

    @property
    def is_done(self) -> bool:
        return self.status == ReportStatus.DONE


class HealthFinding(models.Model):
    report = models.ForeignKey(HealthReport, on_delete=models.CASCADE, related_name="findings")
    check_name = models.CharField(max_length=16, choices=HealthCheck.choices)
    # A stable machine name, e.g. "oracle_failed", "hidden_value_in_public".
    code = models.CharField(max_length=64)
    severity = models.CharField(max_length=16, choices=Severity.choices, db_index=True)
    # None for findings about the pack as a whole (description, files, answer letters).
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    task_label = models.CharField(max_length=200, blank=True)
    # Never holds sealed text: what was found and where, by resource names and public paths.
    message = models.TextField()
    evidence = models.JSONField(default=dict)
    # Sealed text (the leaked value, the verifier's output): debug mode only, audited.
    sealed_evidence = models.JSONField(default=dict)

    class Meta:
        ordering = ["report", "id"]
        indexes = [models.Index(fields=["report", "severity"])]

    def __str__(self) -> str:
        return f"{self.severity} {self.code} ({self.task_label or 'pack'})"


class HealthRun(models.Model):
    """A run the report scored through the pipeline: its check, and for attacks the slot."""

    report = models.ForeignKey(HealthReport, on_delete=models.CASCADE, related_name="health_runs")
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="health_run")
    check_name = models.CharField(max_length=16, choices=HealthCheck.choices)
    # Adversarial runs: the i-th attack of each task's family (verifiers.adversarial).
    slot = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["report", "id"]

    def __str__(self) -> str:
        return f"{self.check_name} run {self.run_id} of report {self.report_id}"
