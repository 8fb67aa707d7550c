"""Two worker "hosts" on this machine that share no disk with the web process or each other:
each has its own data folder, blob cache and scratch space, and reaches the site only
through PostgreSQL, Redis and an S3-compatible bucket, as separate machines would. (They
share the machine's sandbox-uid locks, as two processes of one kernel must; separate
machines have separate uids.)

They score the full HumanEval set's oracle and null runs and a terminal pack with files;
both take work; one is killed mid-run and the other finishes with nothing lost; a cached blob
corrupted on a host's disk is fetched again, never used.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from packs.blobs import file_digest
from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import Evaluation, RunSource, TaskResult
from runs.services import RunMetadata, run_submit_reference
from tests.components import require
from tests.conftest import EXAMPLES
from tests.runs.conftest import (
    FAST_PIPELINE_ENV,
    WorkerPool,
    bwrap_or_skip,
    wait_for,
)
from tests.storage.s3_server import BucketPair, S3Server, new_buckets

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def host_folders() -> Iterator[dict[str, Path]]:
    # Outside pytest's private temp root: sandbox uids must traverse a host's scratch space.
    folders = {}
    for name in ("host-a", "host-b"):
        folder = Path(tempfile.mkdtemp(prefix=f"securebench-{name}-"))
        folder.chmod(0o755)
        folders[name] = folder
    yield folders
    for folder in folders.values():
        shutil.rmtree(folder, ignore_errors=True)


def host_env(name: str, folder: Path, buckets: BucketPair) -> dict[str, str]:
    (folder / "tmp").mkdir(mode=0o755, exist_ok=True)
    return {
        **FAST_PIPELINE_ENV,
        "SECUREBENCH_HOST_NAME": name,
        **buckets.env,
        "SECUREBENCH_DATA_DIR": str(folder / "data"),
        "TMPDIR": str(folder / "tmp"),
    }


def workers_of(evaluations: list[Evaluation]) -> list[str]:
    return list(
        TaskResult.objects.filter(evaluation__in=evaluations)
        .exclude(worker="")
        .values_list("worker", flat=True)
    )


def by_host(names: list[str], host: str) -> int:
    return sum(1 for name in names if name.startswith(f"{host}:"))


def running_on(evaluations: list[Evaluation], host: str) -> set[int]:
    running = TaskResult.objects.filter(
        evaluation__in=evaluations, status="running", worker__startswith=f"{host}:"
    )
    return set(running.values_list("pk", flat=True))


def reference_run(version: ContractVersion, origin: str) -> Evaluation:
    _, evaluation = run_submit_reference(
        contract_version=version,
        origin=origin,
        metadata=RunMetadata(agent_name=f"{origin}-agent"),
        source=RunSource.COMMAND,
    )
    return evaluation


def statuses(evaluation: Evaluation) -> set[str]:
    return set(TaskResult.objects.filter(evaluation=evaluation).values_list("status", flat=True))


def wait_done(evaluations: list[Evaluation], timeout: float) -> None:
    pks = [evaluation.pk for evaluation in evaluations]
    wait_for(
        lambda: all(e.is_done for e in Evaluation.objects.filter(pk__in=pks)),
        timeout,
        "every evaluation to finish",
    )


def test_two_hosts_sharing_no_disk_score_everything_and_survive_losing_one(
    workers: WorkerPool,
    s3_server: S3Server,
    settings,
    monkeypatch: pytest.MonkeyPatch,
    host_folders: dict[str, Path],
    isolated_data_dir: Path,
) -> None:
    if connection.vendor != "postgresql" or workers.env["CELERY_BROKER_URL"].startswith("file"):
        require(
            "postgresql",
            "worker hosts share only a database server, a broker and a bucket: this test "
            "runs in the PostgreSQL + Redis pass",
        )
    bwrap_or_skip()
    buckets = new_buckets(s3_server)
    settings.STORAGES = {**settings.STORAGES, **buckets.storages()}
    for name, value in buckets.server.credentials_env.items():
        monkeypatch.setenv(name, value)
    call_command("import_humaneval", stdout=io.StringIO())
    humaneval = ContractVersion.objects.get(pack__pack_id="humaneval")
    terminal = pack_import_folder(folder=EXAMPLES / "terminal-files").contract_version
    assert buckets.server.keys(buckets.sealed), "the terminal pack's hidden files are in the bucket"
    assert not (isolated_data_dir / "pack-files").exists()

    host_a = workers.start("host-a", env=host_env("host-a", host_folders["host-a"], buckets))
    workers.start("host-b", env=host_env("host-b", host_folders["host-b"], buckets))
    evaluations = [
        reference_run(humaneval, "oracle"),
        reference_run(terminal, "oracle"),
        reference_run(humaneval, "null"),
    ]
    # Both hosts have finished work before one of them is lost mid-run.
    wait_for(
        lambda: (
            by_host(workers_of(evaluations), "host-a") >= 3
            and by_host(workers_of(evaluations), "host-b") >= 3
        ),
        300,
        "both hosts to take work",
    )
    # Lost mid-verification: killed while it holds a lease.
    wait_for(lambda: running_on(evaluations, "host-a"), 120, "host-a to be verifying")
    host_a.kill()
    in_flight = running_on(evaluations, "host-a")

    wait_done(evaluations, 600)

    oracle, terminal_oracle, null = (Evaluation.objects.get(pk=e.pk) for e in evaluations)
    assert statuses(oracle) == {"passed"} and oracle.passed == 164
    assert statuses(terminal_oracle) == {"passed"}
    assert statuses(null) == {"failed"} and null.total == 164
    # What host-a held when it died was verified again by host-b (the lease expired). (A
    # verification may end between the look and the kill; tests/runs checks the strict case.)
    for result in TaskResult.objects.filter(pk__in=in_flight):
        assert result.attempts == 2 and result.finished_at is not None
        assert result.worker.startswith("host-b:")
    assert by_host(workers_of(evaluations), "host-a") >= 3
    assert by_host(workers_of(evaluations), "host-b") >= 3

    # The survivor's cache holds the terminal pack's files, each named by its digest. Corrupt
    # every one on its disk: the next run fetches them again and still passes.
    cache_b = host_folders["host-b"] / "data" / "cache" / "blobs"
    rerun = reference_run(terminal, "oracle")
    wait_done([rerun], 300)
    assert statuses(rerun) == {"passed"}
    cached = [path for path in cache_b.glob("*/*") if not path.name.startswith(".")]
    assert cached and all(file_digest(path) == path.name for path in cached)
    for path in cached:
        path.write_bytes(b"#!/bin/sh\nexit 0  # planted on the host's disk\n")
    again = reference_run(terminal, "oracle")
    wait_done([again], 300)
    # A planted test file is not Python: used, it would fail the oracle.
    assert statuses(again) == {"passed"}
    assert all(file_digest(path) == path.name for path in cached)
