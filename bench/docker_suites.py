"""Workload 13: the Docker sandbox suites' own time, with the container pool and without it.

Issue 16 asks that CI time not grow: the Docker tests should get faster with the pool. This
runs the suites CI runs on every OCI runtime (escapes, mounts, defences, gaming, lifecycle:
the Docker side, ``-k docker``) as CI runs them (``make test``'s pytest-xdist processes), in
one script run, alternating pool on (the default, ``SECUREBENCH_DOCKER_POOL`` unset) and off
(``SECUREBENCH_DOCKER_POOL=0``) so that a machine that slows down mid-run slows both sides.
The pool's own suite is left out: it sets the pool itself.

Figures: the median wall time of each side (``ROUNDS`` each), and pool on / pool off; once
in ``make test``'s two processes (a 2-core machine is then saturated) and once in one.
``--smoke`` runs one small suite once each way (a check that the script works).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.common import REPO_ROOT, Figure, main, median

WORKLOAD = "13 docker suites"
ROUNDS = 3
SUITES = (
    "tests/security/test_sandbox_escapes.py",
    "tests/security/test_sandbox_mounts.py",
    "tests/security/test_sandbox_defences.py",
    "tests/security/test_code_gaming.py",
    "tests/security/test_docker_lifecycle.py",
)
SMOKE_SUITES = ("tests/security/test_sandbox_mounts.py",)
TEST_PROCESSES = 2  # as `make test` runs them


def suite_seconds(suites: tuple[str, ...], *, pool: bool, processes: int) -> float:
    """Wall seconds of one pytest run of ``suites``' Docker tests; fails loudly if a test
    fails, since a figure of a broken suite would measure nothing."""
    env = {**os.environ}
    env.pop("SECUREBENCH_DOCKER_POOL", None)
    if not pool:
        env["SECUREBENCH_DOCKER_POOL"] = "0"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "docker"]
    if processes:
        command += ["-n", str(processes), "--dist", "loadfile"]
    command += suites
    started = time.perf_counter()
    finished = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if finished.returncode != 0:
        raise SystemExit(f"the suites failed (pool {pool}):\n{finished.stdout[-3000:]}")
    summary = finished.stdout.strip().splitlines()[-1]
    side = "on " if pool else "off"
    print(f"{processes or 1} process(es), pool {side}: {seconds:6.1f} s  ({summary})", flush=True)
    return seconds


def run(*, smoke: bool) -> list[Figure]:
    suites, rounds = (SMOKE_SUITES, 1) if smoke else (SUITES, ROUNDS)
    figures = []
    for processes in (TEST_PROCESSES, 0):
        figures += _pool_figures(suites, rounds, processes=processes, smoke=smoke)
    return figures


def _pool_figures(
    suites: tuple[str, ...], rounds: int, *, processes: int, smoke: bool
) -> list[Figure]:
    """Pool off and on, alternated, in ``processes`` pytest-xdist processes (0: one)."""
    walls: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for pool in (False, True):
            walls[pool].append(suite_seconds(suites, pool=pool, processes=processes))
    with_pool, without_pool = median(walls[True]), median(walls[False])
    how = f"{processes} test processes" if processes else "one test process"
    return [
        Figure(WORKLOAD, f"Docker suites, {how}, pool off (median)", without_pool, "s"),
        Figure(WORKLOAD, f"Docker suites, {how}, pool on (median)", with_pool, "s"),
        Figure(
            WORKLOAD,
            f"{how}: pool on / pool off",
            with_pool / without_pool,
            "x",
            target="< 1 x",
            met=None if smoke else with_pool < without_pool,
        ),
    ]


if __name__ == "__main__":
    main(run)
