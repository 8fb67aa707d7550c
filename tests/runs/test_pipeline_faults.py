"""The pipeline with real worker processes: oracle/null runs, killed workers, concurrent
workers, duplicate messages, a restarted Redis broker, and the reaper's attempt cap."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.bundle import ParsedBundle, parse_candidate_objects
from runs.models import Evaluation, ResultStatus, Run, RunSource, TaskResult
from runs.pipeline import evaluation_dispatch, leases_reap, results_claim
from runs.services import (
    RunMetadata,
    reference_runs_request,
    run_submit_bundle,
    run_submit_reference,
)
from tests.components import require
from tests.conftest import EXAMPLES
from tests.runs.conftest import (
    FAST_PIPELINE_ENV,
    BrokerConfig,
    WorkerPool,
    bwrap_or_skip,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

SLEEPY_SECONDS = 2.5


def _import(folder: Path) -> ContractVersion:
    return pack_import_folder(folder=folder, source_name=folder.name).contract_version


def _sleepy_code_pack(root: Path, count: int) -> Path:
    """code_completion tasks whose correct candidates take a while inside the sandbox."""
    folder = root / "sleepy"
    folder.mkdir()
    (folder / "manifest.yaml").write_text(
        "id: sleepy\nversion: 1\ndefaults:\n  family: code_completion\n"
        "  environment:\n    timeout_seconds: 60\n"
    )
    rows = []
    for index in range(count):
        check = f"def check(candidate):\n    assert candidate(2, {index}) == {2 + index}\n\n"
        rows.append(
            {
                "id": f"sleepy/{index}",
                "input": {"prompt": f"def add_{index}(a, b):\n", "language": "python"},
                "eval": {
                    "tests": {"source": "inline", "code": check + f"check(add_{index})\n"},
                    "canonical_solution": f"def add_{index}(a, b):\n    return a + b\n",
                },
            }
        )
    (folder / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def _sleepy_candidates(count: int) -> ParsedBundle:
    objects = [
        {
            "task_id": f"sleepy/{index}",
            "candidate": {
                "kind": "code",
                "code": f"import time\n\ndef add_{index}(a, b):\n"
                f"    time.sleep({SLEEPY_SECONDS})\n    return a + b\n",
            },
        }
        for index in range(count)
    ]
    return ParsedBundle(lines=parse_candidate_objects(objects))


def _wait_done(evaluation: Evaluation, timeout: float) -> Evaluation:
    wait_for(
        lambda: Evaluation.objects.get(pk=evaluation.pk).is_done,
        timeout,
        f"evaluation {evaluation.pk} to finish",
    )
    return Evaluation.objects.get(pk=evaluation.pk)


def _statuses(evaluation: Evaluation) -> dict[str, str]:
    return dict(
        TaskResult.objects.filter(evaluation=evaluation).values_list("task__task_id", "status")
    )


def test_oracle_passes_and_null_fails_through_a_real_worker(workers: WorkerPool) -> None:
    bwrap_or_skip()
    workers.start()
    for name in ("arithmetic-mc", "capitals-short-answer", "python-functions", "terminal-files"):
        version = _import(EXAMPLES / name)
        _, oracle = run_submit_reference(
            contract_version=version,
            origin="oracle",
            metadata=RunMetadata(agent_name="oracle"),
            source=RunSource.COMMAND,
        )
        _, null = run_submit_reference(
            contract_version=version,
            origin="null",
            metadata=RunMetadata(agent_name="null"),
            source=RunSource.COMMAND,
        )
        oracle, null = _wait_done(oracle, 120), _wait_done(null, 120)
        assert set(_statuses(oracle).values()) == {"passed"}, (name, _statuses(oracle))
        assert set(_statuses(null).values()) == {"failed"}, (name, _statuses(null))
        assert oracle.score == 1.0 and null.score == 0.0
        assert oracle.ci_low < 1.0 == oracle.ci_high


def test_worker_killed_mid_verification_loses_nothing(workers: WorkerPool, tmp_path: Path) -> None:
    bwrap_or_skip()
    count = 6
    version = _import(_sleepy_code_pack(tmp_path, count))
    first = workers.start("doomed", env=FAST_PIPELINE_ENV)
    _, evaluation = run_submit_bundle(
        contract_version=version,
        bundle=_sleepy_candidates(count),
        metadata=RunMetadata(agent_name="sleepy"),
        source=RunSource.API,
    )
    wait_for(
        lambda: TaskResult.objects.filter(evaluation=evaluation, status="running").exists(),
        60,
        "a verification to start",
    )
    first.kill()
    running_when_killed = set(
        TaskResult.objects.filter(evaluation=evaluation, status="running").values_list(
            "pk", flat=True
        )
    )
    assert running_when_killed, "the worker was killed between verifications"
    workers.start("rescuer", env=FAST_PIPELINE_ENV)
    evaluation = _wait_done(evaluation, 180)
    results = list(TaskResult.objects.filter(evaluation=evaluation))
    assert len(results) == count
    assert {result.status for result in results} == {"passed"}
    assert evaluation.passed == count and evaluation.score == 1.0
    for result in results:
        if result.pk in running_when_killed:
            assert result.attempts == 2, "a killed verification is run once more"
        assert result.lease_token is None and result.finished_at is not None


def test_two_workers_score_every_task_exactly_once(workers: WorkerPool, tmp_path: Path) -> None:
    bwrap_or_skip()
    count = 8
    version = _import(_sleepy_code_pack(tmp_path, count))
    mc = _import(EXAMPLES / "arithmetic-mc")
    workers.start("a")
    workers.start("b")
    _, sandboxed = run_submit_bundle(
        contract_version=version,
        bundle=_sleepy_candidates(count),
        metadata=RunMetadata(agent_name="sleepy"),
        source=RunSource.API,
    )
    _, text = run_submit_reference(
        contract_version=mc, origin="oracle", metadata=RunMetadata("o"), source="command"
    )
    # Duplicated messages, as a broker may deliver them: both workers get every id twice.
    evaluation_dispatch(
        sandboxed.pk, result_ids=list(sandboxed.results.values_list("pk", flat=True))
    )
    sandboxed, text = _wait_done(sandboxed, 180), _wait_done(text, 60)
    for evaluation in (sandboxed, text):
        results = TaskResult.objects.filter(evaluation=evaluation)
        assert set(results.values_list("status", flat=True)) == {"passed"}
        assert set(results.values_list("attempts", flat=True)) == {1}, "a task was scored twice"
    workers_used = set(
        TaskResult.objects.filter(evaluation=sandboxed).values_list("worker", flat=True)
    )
    assert len(workers_used) >= 2, f"work was not shared: {workers_used}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_redis(port: int, folder: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: _redis_answers(port), 15, "redis-server to answer")
    return process


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def test_broker_restart_mid_run_still_completes(
    workers: WorkerPool, tmp_path: Path, isolated_data_dir: Path
) -> None:
    """A private Redis that keeps nothing on disk is stopped and restarted mid-run: the
    messages it held are gone, and the reaper sends them again."""
    bwrap_or_skip()
    if shutil.which("redis-server") is None:
        require("redis", "redis-server is not installed (CI's machine has it)")
    from securebench_site.celery import app
    from tests.runs.conftest import _reset_celery_pools

    port = _free_port()
    redis = _start_redis(port, tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = url, {"visibility_timeout": 3600}
    _reset_celery_pools(app)
    try:
        count = 8
        version = _import(_sleepy_code_pack(tmp_path, count))
        worker = workers.start(
            "w", env={**FAST_PIPELINE_ENV, "CELERY_BROKER_URL": url}, concurrency=1
        )
        _, evaluation = run_submit_bundle(
            contract_version=version,
            bundle=_sleepy_candidates(count),
            metadata=RunMetadata(agent_name="sleepy"),
            source=RunSource.API,
        )
        wait_for(
            lambda: TaskResult.objects.filter(evaluation=evaluation, status="passed").exists(),
            90,
            "the first verdict",
        )
        redis.terminate()
        redis.wait(timeout=15)
        # The broker stays down until the worker has noticed it lost the connection.
        wait_for(lambda: "Connection to broker lost" in worker.output(), 60, "the lost broker")
        redis = _start_redis(port, tmp_path)
        evaluation = _wait_done(evaluation, 240)
        results = TaskResult.objects.filter(evaluation=evaluation)
        assert set(results.values_list("status", flat=True)) == {"passed"}
        assert results.count() == count
    finally:
        redis.terminate()
        redis.wait(timeout=15)
        app.conf.broker_url, app.conf.broker_transport_options = saved
        _reset_celery_pools(app)


def test_reaper_requeues_expired_leases_then_gives_up(settings, broker) -> None:
    """Three claims whose workers all vanish: the result ends as error, retries_exhausted."""
    version = _import(EXAMPLES / "arithmetic-mc")
    _, evaluation = run_submit_reference(
        contract_version=version, origin="oracle", metadata=RunMetadata("o"), source="command"
    )
    target = evaluation.results.order_by("position").first()
    later = timezone.now()
    for attempt in range(1, settings.SECUREBENCH_MAX_ATTEMPTS + 1):
        claim = results_claim([target.pk], worker=f"ghost-{attempt}")
        assert [result.pk for result in claim.results] == [target.pk]
        assert claim.results[0].attempts == attempt
        later += timedelta(seconds=settings.SECUREBENCH_LEASE_SECONDS + 1)
        report = leases_reap(now=later)
        target.refresh_from_db()
        if attempt < settings.SECUREBENCH_MAX_ATTEMPTS:
            assert report.requeued == 1 and target.status == ResultStatus.QUEUED
        else:
            assert report.exhausted == 1
    assert target.status == ResultStatus.ERROR
    assert target.failure_reason == "retries_exhausted"
    # A worker that wakes up late with the old claim writes nothing.
    assert results_claim([target.pk], worker="late").results == []


def test_one_click_reference_runs_whose_fill_the_broker_lost_are_filled_by_the_reaper(
    workers: WorkerPool, broker: BrokerConfig
) -> None:
    """The button's two runs wait empty for a worker to build their candidates; when the
    broker loses that message (a Redis restart), the reaper sends it again."""
    from securebench_site.celery import app  # noqa: PLC0415

    version = _import(EXAMPLES / "arithmetic-mc")
    runs = reference_runs_request(version, source=RunSource.FORM)
    with app.connection_for_write() as connection:
        assert connection.default_channel.queue_purge("text") == 1  # the fill, lost
    workers.start(env=FAST_PIPELINE_ENV)  # re-sent 5 s after the runs were asked for

    def scored() -> bool:
        return Evaluation.objects.filter(run__in=runs, status="done").count() == 2

    wait_for(scored, 90, "both reference runs to be filled and scored")
    by_origin = {run.origin: run for run in Run.objects.filter(pk__in=[r.pk for r in runs])}
    oracle = by_origin["oracle"].evaluations.get()
    null = by_origin["null"].evaluations.get()
    assert set(_statuses(oracle).values()) == {"passed"}
    assert set(_statuses(null).values()) == {"failed"}
    assert by_origin["oracle"].candidate_count == version.tasks.count()
