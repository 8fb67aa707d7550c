"""A health report's runs: created through the ordinary run services on a draft, scored by the
ordinary pipeline, and listed nowhere but on the report (run lists, the runs API, the pack
filter of the run list, leaderboards, the compare picker)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pack_health import services
from pack_health.models import HealthReport, HealthRun, ReportStatus, ReportVerdict
from packs.models import PublishPolicy, VersionState
from runs import selectors as run_selectors
from runs.models import CandidateOrigin, Run, RunSource
from runs.services import RunMetadata, run_submit_reference
from tests.conftest import make_user
from tests.pack_health.support import check_inline, clean_mc_rows, leaky_rows, store_draft

pytestmark = pytest.mark.django_db


def test_a_request_creates_one_open_report_and_its_health_runs_on_the_draft(make_pack):
    version = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())

    report = services.health_request(version)
    again = services.health_request(version)
    assert again.pk == report.pk and report.number == 1 and report.status == ReportStatus.QUEUED

    assert services.health_start(report.pk) is True
    assert services.health_start(report.pk) is False  # a duplicate message changes nothing
    report.refresh_from_db()
    assert report.status == ReportStatus.RUNNING
    runs = {(h.check_name, h.slot): h.run for h in HealthRun.objects.filter(report=report)}
    assert {"oracle", "repeat", "null"} <= {check for check, _slot in runs}
    attacks = [run for (check, _slot), run in runs.items() if check == "adversarial"]
    assert attacks, "multiple choice has attack candidates (answer spraying)"
    assert all(run.health_check for run in runs.values())
    assert runs[("oracle", 0)].origin == CandidateOrigin.ORACLE
    assert runs[("repeat", 0)].origin == CandidateOrigin.ORACLE
    assert runs[("null", 0)].origin == CandidateOrigin.NULL
    assert {run.origin for run in attacks} == {CandidateOrigin.ADVERSARIAL}
    assert all(run.candidate_count == 3 and run.is_submitted for run in runs.values())
    # Runs on a draft are refused to everyone else; these were accepted.
    version.refresh_from_db()
    assert version.state == VersionState.DRAFT


def test_health_runs_are_listed_on_no_run_list_leaderboard_or_api(make_pack, client):
    version = store_draft(
        make_pack, {"id": "quiz", "version": 1}, clean_mc_rows(), policy=PublishPolicy.AUTO
    )
    report = check_inline(version)
    assert report.verdict == ReportVerdict.HEALTHY
    version.refresh_from_db()
    assert version.state == VersionState.PUBLISHED  # so everyone may list its runs now
    health_runs = set(Run.objects.filter(health_check=True).values_list("pk", flat=True))
    assert len(health_runs) >= 4
    # One ordinary reference run, listed as reference runs always are.
    listed, _ = run_submit_reference(
        contract_version=version,
        origin="oracle",
        metadata=RunMetadata(agent_name="my oracle"),
        source=RunSource.COMMAND,
    )
    admin = make_user("root", superuser=True)
    client.force_login(admin)

    assert set(run_selectors.run_list(user=admin).values_list("pk", flat=True)) == {listed.pk}
    page = client.get("/runs/").content.decode()
    assert f"/runs/{listed.pk}/" in page
    assert not any(f'href="/runs/{pk}/"' in page for pk in health_runs)
    api = client.get("/api/v1/runs/").json()
    assert [row["id"] for row in api["results"]] == [listed.pk]
    assert run_selectors.packs_with_runs() == ["quiz"]
    # Scored health runs would stand as reference rows: the board has none of them.
    board = run_selectors.leaderboard(version)
    assert not {row.run.pk for row in board.reference} & health_runs
    assert not set(run_selectors.comparable_runs(listed).values_list("pk", flat=True)) & health_runs


def test_only_health_runs_of_a_pack_leave_it_off_the_run_lists(make_pack):
    version = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())
    check_inline(version)

    assert run_selectors.packs_with_runs() == []
    assert run_selectors.leaderboard_versions() == []


def test_a_leak_fails_the_report_and_keeps_the_draft(make_pack):
    version = store_draft(make_pack, {"id": "leaky", "version": 1}, leaky_rows())

    report = check_inline(version)

    assert report.status == ReportStatus.DONE and report.verdict == ReportVerdict.FAILING
    leak = report.findings.get(check_name="leak", task_label="leaky")
    assert leak.severity == "failing"
    assert report.counts["leak"]["failing"] >= 1 and report.counts["leak"]["checked"] == 2
    assert report.counts["oracle"]["checked"] == 2 and report.counts["oracle"]["failing"] == 0
    version.refresh_from_db()
    assert version.state == VersionState.DRAFT


def test_finishing_twice_records_the_findings_once(make_pack):
    version = store_draft(make_pack, {"id": "leaky", "version": 1}, leaky_rows())
    report = check_inline(version)
    count = report.findings.count()

    assert services.health_finish_if_done(report.pk) is False
    assert services.health_sweep()["finished"] == 0
    assert report.findings.count() == count > 0


def test_a_start_left_by_a_dead_worker_is_taken_over_only_after_its_time_limit(make_pack, broker):
    # ``broker``: the sweep sends its start message to the test's own broker.
    version = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())
    report = services.health_request(version)
    # A worker claimed the start and died before writing anything.
    claimed = timezone.now() - timedelta(seconds=60)
    HealthReport.objects.filter(pk=report.pk).update(started_at=claimed)

    assert services.health_start(report.pk) is False  # it may still be working
    assert services.health_sweep()["restarted"] == 0
    too_long = timedelta(seconds=services.START_TAKEOVER_SECONDS + 1)
    HealthReport.objects.filter(pk=report.pk).update(started_at=timezone.now() - too_long)
    assert services.health_sweep()["restarted"] == 1

    assert services.health_start(report.pk) is True
    report.refresh_from_db()
    assert report.status == ReportStatus.RUNNING and report.health_runs.count() >= 4


@pytest.mark.django_db(transaction=True)
def test_storing_a_version_queues_its_health_report_once_the_upload_commits(make_pack, settings):
    settings.SECUREBENCH_HEALTH_ON_UPLOAD = True
    version = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())

    reports = list(HealthReport.objects.filter(contract_version=version))
    assert [(r.number, r.trigger, r.status) for r in reports] == [(1, "upload", "queued")]


@pytest.mark.django_db(transaction=True)
def test_with_checks_on_upload_off_a_version_waits_for_a_maintainers_request(make_pack, settings):
    settings.SECUREBENCH_HEALTH_ON_UPLOAD = False
    version = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())

    assert not HealthReport.objects.filter(contract_version=version).exists()
