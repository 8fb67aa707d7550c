"""Done when (issue 34, §3): a worker whose sandbox backend breaks mid-run leaves errored
results; the board shows the run incomplete and its score over the judged tasks only; after
the backend is repaired, "re-run errored" completes the run and its verdicts equal a clean
run's. Real worker processes, a real bwrap sandbox; the break is real too: the scratch
folder the worker's sandbox stages every verification in disappears, then comes back."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.bundle import ParsedBundle, parse_candidate_objects
from runs.models import Evaluation, ResultStatus, RunSource, TaskResult
from runs.services import RunMetadata, run_submit_bundle
from tests.conftest import make_user
from tests.runs.conftest import FAST_PIPELINE_ENV, WorkerPool, bwrap_or_skip, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

COUNT = 8
SLEEP_SECONDS = 0.6  # each verification takes a moment, so the break lands mid-run


def _pack(root: Path) -> ContractVersion:
    folder = root / "adders"
    folder.mkdir()
    (folder / "manifest.yaml").write_text(
        "id: adders\nversion: 1\ndefaults:\n  family: code_completion\n"
        "  environment:\n    timeout_seconds: 60\n"
    )
    rows = []
    for index in range(COUNT):
        check = f"def check(candidate):\n    assert candidate(2, {index}) == {2 + index}\n\n"
        rows.append(
            {
                "id": f"adders/{index}",
                "input": {"prompt": f"def add_{index}(a, b):\n", "language": "python"},
                "eval": {
                    "tests": {"source": "inline", "code": check + f"check(add_{index})\n"},
                    "canonical_solution": f"def add_{index}(a, b):\n    return a + b\n",
                },
            }
        )
    (folder / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return pack_import_folder(folder=folder, source_name="adders").contract_version


def _candidates() -> ParsedBundle:
    """Right on even tasks, wrong on odd ones: a clean run passes half."""
    objects = [
        {
            "task_id": f"adders/{index}",
            "candidate": {
                "kind": "code",
                "code": f"import time\n\ndef add_{index}(a, b):\n"
                f"    time.sleep({SLEEP_SECONDS})\n"
                f"    return a + b{' + 1' if index % 2 else ''}\n",
            },
        }
        for index in range(COUNT)
    ]
    return ParsedBundle(lines=parse_candidate_objects(objects))


def _done(evaluation: Evaluation, timeout: float = 180) -> Evaluation:
    wait_for(lambda: Evaluation.objects.get(pk=evaluation.pk).is_done, timeout, "the evaluation")
    return Evaluation.objects.get(pk=evaluation.pk)


def _verdicts(evaluation: Evaluation) -> dict[str, tuple[str, float]]:
    rows = TaskResult.objects.filter(evaluation=evaluation)
    return {
        task: (status, score)
        for task, status, score in rows.values_list("task__task_id", "status", "score")
    }


def _scratch() -> Path:
    # Sandboxed code runs as unprivileged uids that must reach the staging folders.
    folder = Path(tempfile.mkdtemp(prefix="securebench-rerun-tmp-"))
    folder.chmod(0o755)
    return folder


def test_a_broken_backend_leaves_errors_and_re_running_them_completes_the_run(
    workers: WorkerPool, tmp_path: Path
) -> None:
    bwrap_or_skip()
    version = _pack(tmp_path)
    scratch = _scratch()
    env = {**FAST_PIPELINE_ENV, "TMPDIR": str(scratch), "SECUREBENCH_MAX_ATTEMPTS": "1"}
    workers.start("w1", concurrency=1, env=env)
    owner = make_user("owner", "submitter")
    run, first = run_submit_bundle(
        contract_version=version,
        bundle=_candidates(),
        metadata=RunMetadata(agent_name="adder"),
        source=RunSource.API,
        user=owner,
    )
    finished = TaskResult.objects.filter(evaluation=first, status__in=["passed", "failed"])
    wait_for(lambda: finished.count() >= 2, 120, "two verdicts before the break")
    shutil.rmtree(scratch)  # the backend breaks mid-run
    first = _done(first)

    assert first.errored >= 1 and first.passed + first.failed >= 2
    judged = {t: v for t, v in _verdicts(first).items() if v[0] != ResultStatus.ERROR}
    assert first.score == pytest.approx(sum(s for _, s in judged.values()) / len(judged))
    client = Client()
    client.force_login(owner)
    board = client.get(reverse("runs:leaderboard", args=["adders", 1])).content.decode()
    assert 'data-testid="incomplete"' in board
    assert f"{len(judged)} of {COUNT} judged" in board

    scratch.mkdir(mode=0o755)  # repaired
    scratch.chmod(0o755)
    response = client.post(reverse("runs:rerun-errored", args=[run.pk]))
    assert response.status_code == 302
    rerun = _done(run.evaluations.get(number=2))
    carried = TaskResult.objects.filter(evaluation=rerun, carried_from__isnull=False)

    assert rerun.rerun_of_id == first.pk and rerun.errored == 0
    assert carried.count() == len(judged)
    _, clean = run_submit_bundle(
        contract_version=version,
        bundle=_candidates(),
        metadata=RunMetadata(agent_name="adder, clean"),
        source=RunSource.API,
    )
    clean = _done(clean)
    assert _verdicts(rerun) == _verdicts(clean)
    assert (rerun.passed, rerun.failed, rerun.score) == (COUNT // 2, COUNT // 2, 0.5)
    assert rerun.score == clean.score
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "carried over unchanged" in page and f"{COUNT} of {COUNT} tasks judged" in page
