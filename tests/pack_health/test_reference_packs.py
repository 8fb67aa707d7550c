"""Real packs written elsewhere come out healthy: the four reference packs and the full
HumanEval set, each imported as an author would (its upload hook queues the report), checked
by a real Celery worker on bubblewrap, and published by its report."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from packs.models import ContractVersion, Task, VersionState
from packs.selectors import evaluator_lanes_for_tasks
from tests.pack_health.test_worker import wait_for_reports
from tests.runs.conftest import WorkerPool, bwrap_or_skip
from tests.runs.test_submit_run_command import REFERENCE_PACK_NAMES
from verifiers.adversarial import attack_candidates
from verifiers.oracle import oracle_candidate

pytestmark = pytest.mark.django_db(transaction=True)


def _expected_checks(version: ContractVersion) -> dict[str, int]:
    """How many tasks the oracle check must score and how many attacks must fail."""
    tasks = list(Task.objects.filter(contract_version=version))
    lanes = evaluator_lanes_for_tasks(tasks)
    return {
        "oracle": sum(oracle_candidate(lanes[t.pk]) is not None for t in tasks),
        "adversarial": sum(len(attack_candidates(lanes[t.pk])) for t in tasks),
    }


def _assert_healthy_and_published(version: ContractVersion) -> None:
    version.refresh_from_db()
    report = version.health_reports.get()
    findings = list(report.findings.values("check_name", "code", "task_label", "message"))
    assert (report.verdict, report.error) == ("healthy", ""), (version, findings)
    expected = _expected_checks(version)
    assert expected["oracle"] > 0, f"{version} has no task with a reference"
    assert report.counts["oracle"]["checked"] == expected["oracle"]
    assert report.counts["repeat"]["checked"] == expected["oracle"]
    assert report.counts["null"]["checked"] == version.task_count
    assert report.counts["adversarial"]["checked"] == expected["adversarial"] > 0
    assert report.counts["leak"]["checked"] == version.task_count
    assert version.state == VersionState.PUBLISHED


def test_every_reference_pack_comes_out_healthy(workers: WorkerPool, reference_packs: Path):
    bwrap_or_skip()
    for name in REFERENCE_PACK_NAMES:
        call_command("import_pack", str(reference_packs / name), stdout=io.StringIO())
    versions = list(ContractVersion.objects.filter(pack__pack_id__in=REFERENCE_PACK_NAMES))
    assert len(versions) == len(REFERENCE_PACK_NAMES)
    assert {v.state for v in versions} == {VersionState.DRAFT}
    workers.start()

    wait_for_reports(versions)

    for version in versions:
        _assert_healthy_and_published(version)


# Five health runs of 164 tasks: the oracle passing every task and the null failing every task
# are this report's own checks, so this test also stands for submit_run's oracle and null on
# the full set. The PostgreSQL pass checks the same pipeline on the reference packs above.
@pytest.mark.embedded_only
def test_the_full_humaneval_set_comes_out_healthy(workers: WorkerPool):
    bwrap_or_skip()
    call_command("import_humaneval", stdout=io.StringIO())
    version = ContractVersion.objects.get(pack__pack_id="humaneval")
    assert version.task_count == 164
    workers.start()

    wait_for_reports([version], timeout=900)

    _assert_healthy_and_published(version)
    assert version.health_reports.get().counts["oracle"]["checked"] == 164
