"""Helpers of the pack health tests: tiny packs stored as drafts, and the checks run in this
process (text families only: their verdicts need no sandbox)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pack_health import services
from pack_health.models import HealthReport
from packs.models import ContractVersion, PublishPolicy, VersionState
from packs.services import pack_import_folder
from runs.models import ResultStatus, TaskResult
from runs.pipeline import score_results
from tests.conftest import mc_row

LEAKED = "the seventh harbour lighthouse keeper"


def store_draft(
    make_pack: Callable[..., Path],
    manifest: dict[str, Any],
    rows: list[dict[str, Any]],
    *,
    policy: str = PublishPolicy.AUTO,
    files: dict[str, str] | None = None,
) -> ContractVersion:
    """A stored version, made a draft explicitly (whatever packs.services creates)."""
    version = pack_import_folder(folder=make_pack(manifest, rows, files)).contract_version
    ContractVersion.objects.filter(pk=version.pk).update(state=VersionState.DRAFT)
    version.pack.__class__.objects.filter(pk=version.pack_id).update(publish_policy=policy)
    version.refresh_from_db()
    version.pack.refresh_from_db()
    return version


def clean_mc_rows() -> list[dict[str, Any]]:
    return [mc_row("q1", "B"), mc_row("q2", "C"), mc_row("q3", "A")]


def leaky_rows() -> list[dict[str, Any]]:
    """A short-answer task whose accepted answer is printed in its own question."""
    return [
        mc_row("q1", "B"),
        {
            "id": "leaky",
            "family": "short_answer",
            "input": {"question": f"Who is {LEAKED}? Answer with the phrase itself."},
            "eval": {"accepted_answers": [LEAKED]},
        },
    ]


def check_inline(version: ContractVersion) -> HealthReport:
    """Request, start, score every health run in this process, and finish the report."""
    report = services.health_request(version)
    services.health_start(report.pk)
    queued = TaskResult.objects.filter(
        evaluation__run__health_run__report=report, status=ResultStatus.QUEUED
    ).values_list("pk", flat=True)
    score_results(list(queued), worker="health-test")
    services.health_finish_if_done(report.pk)
    report.refresh_from_db()
    return report
