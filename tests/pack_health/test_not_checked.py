"""Checks the site could not run (no sandbox backend here): the report says "not checked —
infrastructure" with the cause in the site's own words, never "failing"; the draft is not
published unchecked, nor blamed; and the beat's sweep checks it again once a worker can,
a bounded number of times."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from pack_health import hooks, selectors, services
from pack_health.models import HealthReport, ReportStatus, ReportTrigger
from packs.models import ContractVersion, VersionState
from runs import pipeline
from runs.models import ResultStatus, TaskResult
from tests.conftest import make_user
from tests.pack_health.support import store_draft

pytestmark = pytest.mark.django_db
WORKER = "worker-7:4242"
DOUBLE = {
    "id": "double",
    "family": "code_completion",
    "environment": {"image": "python:3.12-slim", "timeout_seconds": 60},
    "input": {"language": "python", "prompt": "Write double(x) in candidate.py.\n"},
    "eval": {
        "tests": {"source": "inline", "code": "assert double(4) == 8\n"},
        "canonical_solution": "def double(x):\n    return 2 * x\n",
    },
}


@pytest.fixture
def no_sandbox(monkeypatch, settings):
    """A worker whose only backend, Docker, does not answer: every sandboxed verification
    ends in sandbox_unavailable (once: no retries here)."""
    monkeypatch.setenv("SECUREBENCH_SANDBOX", "docker")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/securebench-test-docker.sock")
    monkeypatch.setattr(pipeline, "_worker_sandbox", None)
    settings.SECUREBENCH_MAX_ATTEMPTS = 1


@pytest.fixture
def workers(monkeypatch):
    """What operations would tell pack_health of the live workers ("" = none can run it)."""
    seen = {"capability": ""}
    monkeypatch.setattr(hooks, "_providers", [lambda: seen["capability"]])
    return seen


def run_report(report: HealthReport) -> HealthReport:
    services.health_start(report.pk)
    queued = TaskResult.objects.filter(
        evaluation__run__health_run__report=report, status=ResultStatus.QUEUED
    ).values_list("pk", flat=True)
    pipeline.score_results(list(queued), worker=WORKER)
    services.health_finish_if_done(report.pk)
    report.refresh_from_db()
    return report


@pytest.fixture
def version(make_pack) -> ContractVersion:
    return store_draft(make_pack, {"id": "doubler", "version": 1}, [DOUBLE])


def test_checks_that_could_not_run_are_not_checked_and_the_draft_waits_unblamed(
    version, no_sandbox, workers, client
):
    report = run_report(services.health_request(version))

    assert report.verdict == "not_checked" and selectors.badge_of(report) == "not_checked"
    assert report.counts["oracle"]["not_checked"] == 1 and report.counts["oracle"]["failing"] == 0
    version.refresh_from_db()
    assert version.state == VersionState.DRAFT  # never published unchecked
    findings = list(report.findings.exclude(check_name="leak"))
    assert findings and {f.severity for f in findings} == {"not_checked"}
    for finding in findings:
        assert "not the pack" in finding.message and "No sandbox backend" in finding.message
        assert "worker-7" in finding.message
        # The exception's own text (the verifier's output) stays sealed.
        assert "nonexistent" not in finding.message and "nonexistent" not in str(finding.evidence)
    why = services.override_needed(version)
    assert "infrastructure" in why and "failing" not in why

    maintainer = make_user("author", "pack maintainer")
    version.pack.maintainers.add(maintainer)
    client.force_login(maintainer)
    page = client.get(reverse("pack_health:report", args=["doubler", 1])).content.decode()
    assert "not checked — infrastructure" in page and "No sandbox backend" in page
    assert "waits for a worker that can run its checks" in page and "/operations/" in page
    assert "failing" not in page and "✗" not in page
    panel = client.get(reverse("packs:version", args=["doubler", 1])).content.decode()
    assert "not checked — infrastructure" in panel and "checked again automatically" in panel
    assert "failing" not in panel


def test_the_sweep_checks_again_once_a_worker_can_and_a_bounded_number_of_times(
    version, no_sandbox, workers, settings
):
    first = run_report(services.health_request(version))
    later = first.finished_at + timedelta(days=1)

    # No live worker can run sandboxed checks: nothing is queued, however long it waited.
    assert services.health_sweep(now=later)["rechecked"] == 0

    workers["capability"] = "one worker with Docker"  # a worker came: at once
    assert services.health_sweep(now=first.finished_at)["rechecked"] == 1
    again = selectors.latest_report(version)
    assert again.trigger == ReportTrigger.RECHECK and again.status == ReportStatus.QUEUED
    assert services.health_sweep(now=later)["rechecked"] == 0  # its report is open: no second

    again = run_report(again)
    assert again.verdict == "not_checked" and again.workers_seen == "one worker with Docker"
    # The workers did not change: the next re-check waits, twice as long each time in a row.
    base = timedelta(seconds=settings.SECUREBENCH_HEALTH_RECHECK_SECONDS)
    assert services.health_sweep(now=again.finished_at + base)["rechecked"] == 0
    rechecks = 1
    while services.health_sweep(now=again.finished_at + base * 2**rechecks)["rechecked"]:
        rechecks += 1
        again = run_report(selectors.latest_report(version))
        assert rechecks <= services.MAX_RECHECKS
    assert rechecks == services.MAX_RECHECKS
    assert services.health_sweep(now=later + timedelta(days=365))["rechecked"] == 0
    # A person's "check again" starts the count over.
    services.health_request(version)
    assert version.health_reports.count() == services.MAX_RECHECKS + 2
