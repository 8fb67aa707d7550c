"""Health reports finished by a real Celery worker (bubblewrap sandboxes for code): a stored
version's upload hook queues its report, the worker audits it, scores the health runs, and
the last evaluation's hook finishes the report and publishes the version when it may."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from pack_health.models import HealthReport, ReportStatus
from packs.models import ContractVersion, PublishPolicy
from securebench_site.celery import app
from tests.conftest import mc_row
from tests.pack_health.support import clean_mc_rows, store_draft
from tests.runs.conftest import FAST_PIPELINE_ENV, WorkerPool, bwrap_or_skip, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CODE_DEFAULTS = {
    "family": "code_completion",
    "environment": {"image": "python:3.11-slim", "timeout_seconds": 60},
}


def code_row(task_id: str, tests: str, solution: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "input": {"language": "python", "prompt": f"Write {task_id}() in candidate.py.\n"},
        "eval": {"tests": {"source": "inline", "code": tests}, "canonical_solution": solution},
    }


def healthy_code_rows() -> list[dict[str, Any]]:
    return [
        code_row(
            "double",
            "def check():\n    assert double(4) == 8\n    assert double(-1) == -2\n\ncheck()\n",
            "def double(x):\n    return 2 * x\n",
        ),
        code_row(
            "greet",
            "def check():\n    assert greet('ada') == 'hello ada'\n\ncheck()\n",
            "def greet(name):\n    return 'hello ' + name\n",
        ),
    ]


def broken_code_rows() -> list[dict[str, Any]]:
    return [
        # The reference solution is wrong: the oracle fails.
        code_row(
            "wrong-oracle",
            "def check():\n    assert triple(3) == 9\n\ncheck()\n",
            "def triple(x):\n    return 3 + x + 1\n",
        ),
        # The checker accepts any workspace, and no expected state holds it back: an empty
        # candidate passes (and with no reference, the task is unverifiable).
        {
            "id": "lax-check",
            "family": "terminal_task",
            "input": {"instructions": "Write ok into done.txt."},
            "environment": {"image": "python:3.11-slim", "timeout_seconds": 60},
            "eval": {
                "checker": {"command": ["python3", "-c", "import sys; sys.exit(0)"]},
            },
        },
    ]


def wait_for_reports(versions: list[ContractVersion], timeout: float = 240) -> None:
    def done() -> bool:
        reports = HealthReport.objects.filter(contract_version__in=versions)
        return reports.count() == len(versions) and all(
            r.status == ReportStatus.DONE for r in reports
        )

    wait_for(done, timeout, "the health reports to finish")


def test_healthy_packs_are_checked_by_the_worker_and_published_as_their_policy_says(
    workers: WorkerPool, make_pack
):
    bwrap_or_skip()
    quiz = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())
    code = store_draft(make_pack, {"id": "code", "version": 1, "defaults": CODE_DEFAULTS},
                       healthy_code_rows())  # fmt: skip
    manual = store_draft(
        make_pack, {"id": "by-hand", "version": 1}, [mc_row("m1", "A"), mc_row("m2", "C")],
        policy=PublishPolicy.MANUAL,
    )  # fmt: skip
    # The upload hook queued one report each; no worker has read them yet.
    assert HealthReport.objects.filter(status=ReportStatus.QUEUED).count() == 3
    workers.start()

    wait_for_reports([quiz, code, manual])

    for version in (quiz, code, manual):
        version.refresh_from_db()
        report = version.health_reports.get()
        assert report.verdict == "healthy", (version, list(report.findings.values()))
        assert report.counts["oracle"]["checked"] == version.task_count
        assert report.counts["adversarial"]["checked"] > 0
        assert report.timing["slowest"], version
    assert quiz.state == "published" and code.state == "published"
    assert quiz.published_at is not None and quiz.published_by is None
    assert manual.state == "draft"  # healthy, but this pack publishes by a maintainer's click
    sandboxed = code.health_reports.get().timing
    assert {t["task_id"] for t in sandboxed["slowest"]} == {"double", "greet"}


def test_a_pack_whose_oracle_fails_or_null_passes_is_failing_and_stays_draft(
    workers: WorkerPool, make_pack
):
    bwrap_or_skip()
    version = store_draft(
        make_pack, {"id": "broken", "version": 1, "defaults": CODE_DEFAULTS}, broken_code_rows()
    )
    workers.start()

    wait_for_reports([version])

    version.refresh_from_db()
    report = version.health_reports.get()
    assert report.verdict == "failing" and version.state == "draft"
    found = set(report.findings.values_list("code", "task_label"))
    assert {("oracle_failed", "wrong-oracle"), ("null_passed", "lax-check")} <= found
    assert ("unverifiable", "lax-check") in found and ("oracle_failed", "lax-check") not in found
    assert ("null_passed", "wrong-oracle") not in found
    oracle = report.findings.get(code="oracle_failed")
    assert oracle.evidence["status"] == "failed" and oracle.evidence["result_id"]
    assert report.counts["oracle"]["failing"] == 1 and report.counts["null"]["failing"] == 1
    # Any workspace passes that checker, so each built-in attack does too, named in its finding.
    attacks = report.findings.filter(code="attack_passed", task_label="lax-check")
    assert attacks.exists()
    assert all(f.evidence["attack"] in f.message for f in attacks)
    assert report.counts["adversarial"]["failing"] == attacks.count()


def test_the_beat_sweep_starts_a_report_whose_start_message_was_lost(
    workers: WorkerPool, make_pack
):
    quiz = store_draft(make_pack, {"id": "quiz", "version": 1}, clean_mc_rows())
    # As if the broker lost the upload's message: the queue holds nothing for this report.
    report = quiz.health_reports.get()
    with app.connection_for_write() as connection:
        assert connection.default_channel.queue_purge("text") == 1
    long_ago = timezone.now() - timedelta(minutes=10)
    HealthReport.objects.filter(pk=report.pk).update(created_at=long_ago)
    workers.start(env=FAST_PIPELINE_ENV)

    wait_for_reports([quiz], timeout=120)

    report.refresh_from_db()
    assert report.verdict == "healthy" and report.started_at is not None
