"""Workload 11 (issue 15): HumanEval oracle throughput with one worker host against two.

The full HumanEval pack is imported into the site `make run` starts (bubblewrap sandboxes;
its Celery worker, 2 processes, is host "one"). Its oracle run is timed from submission
until its evaluation is done (median of 3); then a second worker host joins ("two": 2
processes, its own name, blob cache and scratch folder, sharing only the database and the
broker, as `make worker` on another machine would) and the same run is timed again.

Both hosts run on this one machine, so the ratio says what a second worker adds when it has
to share the same cores; a second machine brings its own.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import Figure, main, median
from bench.oracle_runs import code_version, start_worker, submit_oracle, wait_done
from bench.site import Site


def _second_host(site: Site, folder: Path) -> subprocess.Popen[bytes]:
    """Host "two": its own name, blob cache and scratch folder, as on another machine."""
    folder.chmod(0o755)  # sandbox uids traverse its scratch space
    env = {
        "SECUREBENCH_HOST_NAME": "host-two",
        "SECUREBENCH_BLOB_CACHE_DIR": str(folder / "cache"),
        "TMPDIR": str(folder),
    }
    return start_worker(site, hostname="two@%h", queues="text,sandbox", env=env)


def _hosts(evaluation_id: int) -> Counter[str]:
    from runs.models import TaskResult  # noqa: PLC0415 - Django app loading: after django_setup()

    workers = TaskResult.objects.filter(evaluation_id=evaluation_id).values_list(
        "worker", flat=True
    )
    return Counter(worker.rpartition(":")[0] for worker in workers)


def run(*, smoke: bool) -> list[Figure]:
    repetitions = 1 if smoke else 3
    with Site(env={"SECUREBENCH_SANDBOX": "bwrap"}) as site:
        version = code_version(site, smoke=smoke)
        tasks = version.task_count
        one = median([wait_done([submit_oracle(version, f"one-{n}")]) for n in range(repetitions)])
        folder = Path(tempfile.mkdtemp(prefix="securebench-host-two-"))
        second = _second_host(site, folder)
        try:
            time.sleep(3)  # the second host connects to the broker
            two, shares = [], Counter()
            for n in range(repetitions):
                evaluation = submit_oracle(version, f"two-{n}")
                two.append(wait_done([evaluation]))
                shares = _hosts(evaluation)
        finally:
            second.kill()
            second.wait()
    two_median = median(two)
    share_note = ", ".join(f"{host or '?'}: {count}" for host, count in sorted(shares.items()))
    return [
        Figure("11 worker hosts", f"oracle run, one host (2 processes, {tasks} tasks)", one, "s"),
        Figure(
            "11 worker hosts",
            "oracle run, two hosts (2 + 2 processes)",
            two_median,
            "s",
            note=f"results per host in the last run: {share_note}",
        ),
        Figure(
            "11 worker hosts",
            "one host / two hosts (throughput gained)",
            one / two_median,
            "x",
            target="report (same machine)",
            met=None,
        ),
    ]


if __name__ == "__main__":
    sys.exit(main(run))
