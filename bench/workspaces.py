"""Workload 8: live workspaces (issue 12), driven by the stock CUBE client against a fresh
`make run` per sandbox backend.

* `bash true` (this module on bubblewrap, `bench.workspaces_docker` on Docker): a
  `bash {"command": "true"}` step on terminal-files, each a client-measured round trip: the
  stock client's set-up, the web process, the actions queue, a worker, and one fresh sandbox
  that unpacks the episode's workspace, runs the command and hands the workspace back.
  Anchor: the same action through `verifiers.live.run_bash` in this process on the same
  backend (no site in between). Target on bubblewrap: p50 <= 100 ms; Docker is reported
  beside it.
* A 20-step repository episode on tiny-repo-patch: reset, look around, run the tests, fix
  the bug with `write_file`, run the tests again, `final_step`; the site's own step times
  (info.profiling.step_ms) summed, and the client's wall time beside them. Reported only.

Calls are paced under the site's per-run step rate (the pause is not timed).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cube.client import BenchmarkClient, TaskClient

from bench.common import Figure, at_most, django_setup, main, median, p95
from bench.episodes import (
    WARM_UP_CALLS,
    Latencies,
    make_pacer,
    open_episode_run,
    server_ms,
    text_of,
    timed_ms,
)
from bench.site import Site
from verifiers import live
from verifiers.sandbox import get_sandbox

WORKLOAD = "8 live workspaces"
TERMINAL_PACK = "terminal-files"  # examples/, imported by `make run`
REPO_PACK = "tiny-repo-patch"
BASH_CALLS, SMOKE_BASH_CALLS = 100, 5
BASH_TARGET_MS = 100.0
REPO_STEPS = 20
DOCKER_IMAGE_FALLBACK = "securebench-local/python:3.11"


def _first_task(bench: BenchmarkClient, pack_prefix: str) -> TaskClient:
    configs = bench.task_configs()
    config = next(c for c in configs if c["metadata"]["id"].startswith(pack_prefix))
    return bench.spawn(config)


def _check(output: dict[str, Any], what: str) -> str:
    shown = text_of(output["obs"])
    if output["error"] is not None or output["done"]:
        raise RuntimeError(f"{what} failed: {output}")
    return shown


# --- (a) bash true ------------------------------------------------------------------------


def bash_latencies(site: Site, calls: int) -> Latencies:
    _, url = open_episode_run(site, TERMINAL_PACK)
    bench = BenchmarkClient(url)
    task = _first_task(bench, f"{TERMINAL_PACK}/")
    task.reset()
    pacer = make_pacer()
    measured = Latencies()
    for index in range(WARM_UP_CALLS + calls):
        pacer.wait()
        elapsed, output = timed_ms(lambda: task.step("bash", {"command": "true"}))
        _check(output, "bash true")
        if index >= WARM_UP_CALLS:
            measured.client_ms.append(elapsed)
            measured.server_ms.append(server_ms(output) or 0.0)
    task.step("final_step")
    task.close()
    bench.shutdown()
    return measured


def bash_anchor_ms(backend: str, calls: int) -> list[float]:
    """`run_bash(…, "true")` in this process, on the same backend and the same task."""
    from packs.models import Task  # noqa: PLC0415 - Django app loading: after django_setup()
    from packs.selectors import evaluator_task_lanes  # noqa: PLC0415 - Django app loading: after django_setup()

    task = Task.objects.filter(contract_version__pack__pack_id=TERMINAL_PACK).first()
    if task is None:
        raise RuntimeError(f"{TERMINAL_PACK} is not imported")
    # What an episode's sandbox may be given: the sealed lanes are dropped here too.
    lanes = replace(evaluator_task_lanes(task), evaluation_inputs={}, hidden={})
    sandbox = get_sandbox(backend)
    measured = []
    with tempfile.TemporaryDirectory(prefix="securebench-bench-ws-") as folder:
        workspace = live.plan_live_workspace(lanes, backend, Path(folder), live.WorkspaceLimits())
        live.seed(sandbox, workspace, lanes)
        for index in range(WARM_UP_CALLS + calls):
            elapsed, outcome = timed_ms(lambda: live.run_bash(sandbox, workspace, "true", None))
            if not outcome.ok or outcome.exit_code != 0:
                raise RuntimeError(f"the anchor's bash true failed: {outcome}")
            if index >= WARM_UP_CALLS:
                measured.append(elapsed)
    return measured


def bash_figures(site: Site, backend: str, *, smoke: bool) -> list[Figure]:
    calls = SMOKE_BASH_CALLS if smoke else BASH_CALLS
    steps = bash_latencies(site, calls)
    anchor = bash_anchor_ms(backend, calls)
    ran_on = bash_backends()
    if ran_on != {backend}:
        raise RuntimeError(f"bash steps ran on {ran_on}, not {backend}")
    p50 = median(steps.client_ms)
    bwrap = backend == "bwrap"
    return [
        Figure(
            WORKLOAD,
            f"anchor: run_bash true in-process on {backend}, p50",
            median(anchor),
            "ms",
            note=f"{len(anchor)} calls; p95 {p95(anchor):.1f} ms",
        ),
        Figure(
            WORKLOAD,
            f"bash true step on {backend} ({TERMINAL_PACK}): p50 round trip",
            p50,
            "ms",
            target=f"<= {BASH_TARGET_MS:g} ms" if bwrap else "",
            met=None if smoke or not bwrap else at_most(p50, BASH_TARGET_MS),
            note=f"{len(steps.client_ms)} calls; p95 {p95(steps.client_ms):.1f} ms; "
            f"site-measured step median {median(steps.server_ms):.1f} ms",
        ),
        Figure(
            WORKLOAD,
            f"bash true step on {backend}: p50 - in-process p50",
            p50 - median(anchor),
            "ms",
            note="the site's share: stock client, HTTP, step rows, the actions queue, a worker",
            signed=True,
        ),
    ]


def bash_backends() -> set[str]:
    from episodes.models import Step  # noqa: PLC0415 - Django app loading: after django_setup()

    return set(Step.objects.filter(action="bash").values_list("sandbox_backend", flat=True))


# --- (b) a 20-step repository episode -----------------------------------------------------

# Tool paths are relative to the workspace (/workspace); the repository is /workspace/repo.
REPO = "repo"
STATS = f"{REPO}/src/calc/stats.py"
FIX_OLD = "    return items[middle]\n"


def _repo_script(task: TaskClient, source: str) -> list[tuple[str, dict[str, Any]]]:
    """Twenty steps an agent might take: look, test, fix, test again."""
    fixed = _fixed_median(source)
    looks: list[tuple[str, dict[str, Any]]] = [
        ("list_files", {}),
        ("list_files", {"path": f"{REPO}/src/calc"}),
        ("read_file", {"path": f"{REPO}/README.md"}),
        ("bash", {"command": f"cd {REPO} && git status --short && git log --oneline | head -3"}),
        ("bash", {"command": f"cd {REPO} && python3 -m pytest -q tests 2>&1 | tail -3"}),
        ("bash", {"command": f"grep -n 'def ' {STATS}"}),
        ("read_file", {"path": f"{REPO}/src/calc/__init__.py"}),
        ("bash", {"command": f"ls -la {REPO}/tests"}),
        ("read_file", {"path": STATS, "offset": 0, "limit": 4000}),
        ("write_file", {"path": STATS, "content": fixed}),
        ("bash", {"command": f"cd {REPO} && git diff --stat"}),
        ("bash", {"command": f"cd {REPO} && python3 -m pytest -q tests 2>&1 | tail -3"}),
    ]
    extra = REPO_STEPS - len(looks) - 1
    looks += [
        ("bash", {"command": f"echo check {n} && cd {REPO} && git status --short"})
        for n in range(extra)
    ]
    return looks


def _fixed_median(source: str) -> str:
    if FIX_OLD not in source:
        raise RuntimeError(f"{STATS} changed: the bench's fix no longer applies")
    fix = (
        "    if len(items) % 2:\n"
        "        return items[middle]\n"
        "    return (items[middle - 1] + items[middle]) / 2\n"
    )
    return source.replace(FIX_OLD, fix, 1)


def repo_episode_figures(site: Site) -> list[Figure]:
    _, url = open_episode_run(site, REPO_PACK)
    bench = BenchmarkClient(url)
    task = _first_task(bench, f"{REPO_PACK}/")
    started = time.perf_counter()
    reset_ms, _ = timed_ms(task.reset)
    source = _check(task.step("read_file", {"path": STATS}), "read_file")
    server_total = 0.0
    pacer = make_pacer()
    for name, arguments in _repo_script(task, _file_body(source)):
        pacer.wait()
        output = task.step(name, arguments)
        _check(output, name)
        server_total += server_ms(output) or 0.0
    final = task.step("final_step")
    server_total += server_ms(final) or 0.0
    status = final["info"].get("status")
    while status == "scoring":
        time.sleep(0.2)
        status = task.evaluate()["info"].get("status")
    wall = time.perf_counter() - started
    task.close()
    bench.shutdown()
    if status != "passed":
        raise RuntimeError(f"the scripted repository episode did not pass: {status}")
    return [
        Figure(
            WORKLOAD,
            f"{REPO_STEPS}-step repo episode ({REPO_PACK}, bwrap): site step time in all",
            server_total / 1000,
            "s",
            note=f"reset {reset_ms:.0f} ms round trip; client wall time {wall:.1f} s "
            "(pacing included); final_step waits for the verdict",
        )
    ]


def _file_body(shown: str) -> str:
    """read_file's text without the header line the site puts above the content."""
    marker = "\n"
    head, _, body = shown.partition(marker)
    return body if head.startswith(("File ", "---")) else shown


# --- the workload -------------------------------------------------------------------------


def site_env(backend: str) -> dict[str, str]:
    env = {"SECUREBENCH_SANDBOX": backend}
    if backend == "docker":
        env["SECUREBENCH_DEFAULT_IMAGE"] = (
            os.environ.get("SECUREBENCH_DEFAULT_IMAGE") or DOCKER_IMAGE_FALLBACK
        )
    return env


def run_on(backend: str, *, smoke: bool) -> list[Figure]:
    """One site on ``backend``; the in-process anchor uses the same backend and image."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per call otherwise
    env = site_env(backend)
    os.environ.update(env)
    with Site(env=env) as site:
        django_setup(site.data_dir)
        figures = bash_figures(site, backend, smoke=smoke)
        if backend == "bwrap":
            figures += repo_episode_figures(site)
    return figures


def run(*, smoke: bool) -> list[Figure]:
    # Docker's figures come from bench.workspaces_docker, a process of its own: Django is
    # set up once per process, against one site's database.
    return run_on("bwrap", smoke=smoke)


if __name__ == "__main__":
    sys.exit(main(run))
