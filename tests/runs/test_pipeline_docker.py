"""Sandboxed verifications through a real Celery worker to Docker sandboxes.

The other pipeline tests run their workers on bubblewrap; here a worker picks Docker (and the
local image) from its environment, as a production worker does, and scores one right and one
wrong candidate of each sandboxed family from the repository's own example packs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.bundle import ParsedBundle, parse_candidate_objects
from runs.models import Evaluation, RunSource, TaskResult
from runs.services import RunMetadata, run_submit_bundle
from tests.conftest import EXAMPLES
from tests.runs.conftest import DockerRun, WorkerPool, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _first_row(pack: str) -> dict[str, Any]:
    with (EXAMPLES / pack / "tasks.jsonl").open() as rows:
        return json.loads(rows.readline())


def _candidates(pack: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The pack's first task with its reference answer and with a wrong answer that still
    runs (the verdict must come from the checker inside the container, not from parsing)."""
    row = _first_row(pack)
    if pack == "python-functions":
        right = {"kind": "code", "code": row["eval"]["canonical_solution"]}
        wrong = {"kind": "code", "code": "def chunked(items, size):\n    return [items]\n"}
    elif pack == "terminal-files":
        state = row["eval"]["expected_state"]
        right = {"kind": "workspace", "files": {state["path"]: state["content"]}}
        wrong = {"kind": "workspace", "files": {state["path"]: "date,errors,warnings\n"}}
    else:
        gold = row["eval"]["gold_patch"]
        fix = "+    return (items[middle - 1] + items[middle]) / 2\n"
        assert fix in gold, "the example's gold patch changed"
        right = {"kind": "patch", "patch": gold}
        wrong = {"kind": "patch", "patch": gold.replace(fix, fix.replace("/ 2", "/ 3"))}
    return row["id"], right, wrong


def _submit(version: ContractVersion, task_id: str, candidate: dict[str, Any]) -> Evaluation:
    bundle = ParsedBundle(
        lines=parse_candidate_objects([{"task_id": task_id, "candidate": candidate}])
    )
    _, evaluation = run_submit_bundle(
        contract_version=version,
        bundle=bundle,
        metadata=RunMetadata(agent_name="docker-pipeline"),
        source=RunSource.API,
    )
    return evaluation


def test_sandboxed_families_score_through_a_worker_on_docker(
    docker_run: DockerRun, workers: WorkerPool
) -> None:
    # docker_run first: its cleanup then runs after the workers are stopped.
    workers.start(env=docker_run.worker_env)
    submitted: list[tuple[Evaluation, str, str]] = []
    for pack in ("python-functions", "terminal-files", "tiny-repo-patch"):
        folder: Path = EXAMPLES / pack
        version = pack_import_folder(folder=folder, source_name=pack).contract_version
        task_id, right, wrong = _candidates(pack)
        submitted.append((_submit(version, task_id, right), task_id, "passed"))
        submitted.append((_submit(version, task_id, wrong), task_id, "failed"))

    wait_for(
        lambda: all(Evaluation.objects.get(pk=e.pk).is_done for e, _, _ in submitted),
        300,
        "the Docker verifications to finish",
    )
    for evaluation, task_id, expected in submitted:
        result = TaskResult.objects.get(evaluation=evaluation, task__task_id=task_id)
        outcome = (result.status, result.failure_reason, result.stderr[-500:])
        assert result.status == expected, outcome
        assert result.failure_reason == ("" if expected == "passed" else "tests_failed"), outcome
        assert result.sandbox_backend == "docker", outcome
        assert result.sandbox_image == docker_run.image, outcome
    # Every container was removed when its verification ended, except the idle ones the
    # worker's pool keeps for the next verifications, which nothing ran in: a warm shutdown
    # removes those, so then none is left.
    for worker in workers.started:
        worker.shut_down()
    assert docker_run.containers() == []
