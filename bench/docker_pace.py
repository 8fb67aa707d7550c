"""Workload 12: the Docker backend at pace, per OCI runtime, against its own floor.

For each runtime the engine offers (the default ``runc``, ``crun``, gVisor's ``runsc``), in
one script run and on one engine:

* floor: ``docker run --rm --network none IMAGE python3 -c pass`` from the CLI (median of
  ``FLOOR_RUNS``);
* one code verification at a time (a HumanEval oracle candidate through the verifier core,
  two containers each): p50 over ``SINGLE_RUNS`` after a warm-up, with the container pool,
  and for the default runtime without it too. Target: p50 <= 1.5x the floor;
* HumanEval-164 through the verifier core at 2 and 4 verifications in flight; the best is
  compared with 164 x the floor. Target: <= 0.5x;
* a live workspace's ``bash true`` step (``verifiers.live.run_bash`` in-process, on the
  terminal-files example's task): p50 over ``STEP_RUNS``. Target: <= 1.5x the floor;
* the pool's hit rate over the runtime's verifications and steps.

A runtime the engine lists but cannot run here is reported with the engine's reason.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.code_scoring import humaneval_tasks, score_pack
from bench.common import REPO_ROOT, Figure, at_most, django_setup, docker_sandbox, main, median
from packs.compiler import compile_pack, compiled_task_lanes
from verifiers import live
from verifiers.sandbox import SandboxUnavailable
from verifiers.sandbox.docker import DEFAULT_LOCAL_IMAGE, docker_client
from verifiers.sandbox.docker_pool import drain_process_pool, process_pool
from verifiers.scoring import VerifierSettings, verify

WORKLOAD = "12 docker at pace"
FLOOR_RUNS = 20
SINGLE_RUNS = 30
STEP_RUNS = 30
WARM_UP = 4
SPACED_GAP = 1.0
PACK_THREADS = (2, 4)
SMOKE_TASKS = 4
TERMINAL_PACK = REPO_ROOT / "examples" / "terminal-files"


def _image() -> str:
    return os.environ.get("SECUREBENCH_DEFAULT_IMAGE") or DEFAULT_LOCAL_IMAGE


def floor_seconds(runtime: str | None, runs: int) -> list[float]:
    """The bare `docker run` the issue names, from the CLI, as a user would type it."""
    command = ["docker", "run", "--rm", "--network", "none"]
    command += ["--runtime", runtime] if runtime else []
    command += [_image(), "python3", "-c", "pass"]
    subprocess.run(command, check=True, capture_output=True)  # warm-up
    measured = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        measured.append(time.perf_counter() - started)
    return measured


def _timed(fn: Callable[[], Any], runs: int, *, gap: float = 0.0) -> list[float]:
    for _ in range(min(WARM_UP, runs)):
        fn()
    measured = []
    for _ in range(runs):
        time.sleep(gap)
        started = time.perf_counter()
        fn()
        measured.append(time.perf_counter() - started)
    return measured


def single_verifications(
    sandbox: Any, work: list[tuple[Any, Any]], runs: int, *, gap: float = 0.0
) -> list[float]:
    settings = VerifierSettings(sandbox=sandbox)
    items = iter(work * (1 + (runs + WARM_UP) // len(work)))

    def one() -> None:
        task, candidate = next(items)
        verdict = verify(task, candidate, settings)
        if verdict.status != "passed":
            raise RuntimeError(f"{task.task_id}: {verdict.status} {verdict.reason}")

    return _timed(one, runs, gap=gap)


def bash_steps(sandbox: Any, runs: int) -> list[float]:
    pack = compile_pack(TERMINAL_PACK)
    lanes = compiled_task_lanes(pack.tasks[0], pack.files)
    lanes = replace(lanes, evaluation_inputs={}, hidden={})  # what an episode may be given
    with tempfile.TemporaryDirectory(prefix="securebench-bench-pace-") as folder:
        workspace = live.plan_live_workspace(lanes, "docker", Path(folder), live.WorkspaceLimits())
        live.seed(sandbox, workspace, lanes)

        def step() -> None:
            outcome = live.run_bash(sandbox, workspace, "true", None)
            if not outcome.ok or outcome.exit_code != 0:
                raise RuntimeError(f"bash true failed: {outcome}")

        return _timed(step, runs)


def _pool_counts() -> tuple[int, int]:
    pool = process_pool()
    return (pool.hits, pool.misses) if pool is not None else (0, 0)


def _use_runtime(runtime: str | None, pool: bool) -> None:
    drain_process_pool()  # containers of another runtime must not be handed out
    if runtime:
        os.environ["SECUREBENCH_DOCKER_RUNTIME"] = runtime
    else:
        os.environ.pop("SECUREBENCH_DOCKER_RUNTIME", None)
    os.environ["SECUREBENCH_DOCKER_POOL"] = "4" if pool else "0"


def _ratio(name: str, ratio: float, limit: float, *, smoke: bool) -> Figure:
    """A ratio against the floor with its target (smoke mode times nothing: never judged)."""
    return Figure(
        WORKLOAD,
        name,
        ratio,
        "x",
        target=f"<= {limit:g}x",
        met=None if smoke else at_most(ratio, limit),
    )


def runtime_figures(runtime: str | None, work: list[tuple[Any, Any]], *, smoke: bool) -> list:
    name = runtime or "runc (default)"
    floor_runs, single_runs = (3, 2) if smoke else (FLOOR_RUNS, SINGLE_RUNS)
    gap = 0.1 if smoke else SPACED_GAP
    try:
        floor = median(floor_seconds(runtime, floor_runs))
    except subprocess.CalledProcessError as exc:
        reason = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[:1]
        print(f"{name}: not usable on this engine: {reason}")
        return [Figure(WORKLOAD, f"{name}: not usable here", 0, "", note=" ".join(reason)[:90])]
    _use_runtime(runtime, pool=True)
    sandbox = docker_sandbox("docker_pace")
    hits0, misses0 = _pool_counts()
    # One at a time on a worker that is otherwise idle (its pool refilled in the gap): the
    # latency a verification sees. Back to back, the pool's filler races the verifications
    # for the engine, and the figure is the engine's throughput instead.
    single = median(single_verifications(sandbox, work, single_runs, gap=gap))
    hits1, misses1 = _pool_counts()
    spaced_rate = 100 * (hits1 - hits0) / max(1, hits1 - hits0 + misses1 - misses0)
    back_to_back = median(single_verifications(sandbox, work, single_runs))
    figures = [
        Figure(WORKLOAD, f"{name}: floor, bare docker run python3 -c pass", floor * 1000, "ms"),
        Figure(
            WORKLOAD,
            f"{name}: one code verification, p50, {gap:g} s apart",
            single * 1000,
            "ms",
            note=f"pool hits {spaced_rate:.0f} %",
        ),
        Figure(
            WORKLOAD, f"{name}: one code verification, p50, back to back", back_to_back * 1000, "ms"
        ),
        _ratio(f"{name}: one verification / floor", single / floor, 1.5, smoke=smoke),
    ]
    in_flight = PACK_THREADS[:1] if smoke else PACK_THREADS
    walls = {threads: score_pack(sandbox, work, threads)[0] for threads in in_flight}
    best_threads = min(walls, key=lambda threads: walls[threads])
    pack_ratio = walls[best_threads] / (len(work) * floor)
    figures += [
        Figure(
            WORKLOAD,
            f"{name}: HumanEval {len(work)}, best of {in_flight} in flight",
            walls[best_threads],
            "s",
            note=", ".join(f"{t} in flight: {w:.1f} s" for t, w in walls.items()),
        ),
        _ratio(f"{name}: pack / ({len(work)} x floor)", pack_ratio, 0.5, smoke=smoke),
    ]
    step = median(bash_steps(sandbox, 2 if smoke else STEP_RUNS))
    figures += [
        Figure(WORKLOAD, f"{name}: live bash true step, p50", step * 1000, "ms"),
        _ratio(f"{name}: bash step / floor", step / floor, 1.5, smoke=smoke),
    ]
    hits, misses = _pool_counts()
    taken = (hits - hits0) + (misses - misses0)
    figures.append(
        Figure(WORKLOAD, f"{name}: pool hit rate", 100 * (hits - hits0) / max(1, taken), "%")
    )
    if runtime is None:
        _use_runtime(None, pool=False)
        unpooled = median(single_verifications(sandbox, work, single_runs, gap=gap))
        figures.append(
            Figure(
                WORKLOAD, f"{name}: one verification without the pool, p50", unpooled * 1000, "ms"
            )
        )
    return figures


def offered_runtimes() -> list[str | None]:
    known = set((docker_client().info().get("Runtimes") or {}).keys())
    return [None, *(runtime for runtime in ("crun", "runsc") if runtime in known)]


def run(*, smoke: bool) -> list[Figure]:
    django_setup()
    work = humaneval_tasks(SMOKE_TASKS if smoke else None)
    try:
        runtimes = offered_runtimes()
    except SandboxUnavailable as exc:
        print(f"Docker rows skipped: {exc}")
        return []
    figures: list[Figure] = []
    for runtime in runtimes[:1] if smoke else runtimes:
        figures += runtime_figures(runtime, work, smoke=smoke)
    return figures


if __name__ == "__main__":
    main(run)
