"""Work for the operations tests: multiple-choice runs submitted to a broker no worker reads
(their results wait), and runs scored in this process (their results are finished)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import CandidateOrigin, Evaluation, ResultStatus, RunSource, TaskResult
from runs.pipeline import score_results
from runs.services import RunMetadata, run_submit_reference
from tests.conftest import mc_row

TASKS = 4


def quiz(make_pack: Callable[..., Path]) -> ContractVersion:
    rows = [mc_row(f"q{n}", "B") for n in range(TASKS)]
    return pack_import_folder(folder=make_pack({"id": "quiz", "version": 1}, rows)).contract_version


def submit(version: ContractVersion, origin: str = CandidateOrigin.ORACLE) -> Evaluation:
    _run, evaluation = run_submit_reference(
        contract_version=version,
        origin=origin,
        metadata=RunMetadata(agent_name=f"ops-{origin}"),
        source=RunSource.COMMAND,
    )
    return evaluation


def scored(version: ContractVersion, origin: str) -> Evaluation:
    """A run whose results this process scored (as a worker would)."""
    evaluation = submit(version, origin)
    queued = TaskResult.objects.filter(evaluation=evaluation, status=ResultStatus.QUEUED)
    score_results(list(queued.values_list("pk", flat=True)), worker="ops-test")
    return evaluation


def submitted_ago(evaluation: Evaluation, seconds: float) -> None:
    """As if the evaluation had been submitted that long ago (and nothing claimed since)."""
    Evaluation.objects.filter(pk=evaluation.pk).update(
        created_at=timezone.now() - timedelta(seconds=seconds)
    )
