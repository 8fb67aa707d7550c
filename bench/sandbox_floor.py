"""Workload 4: the sandbox floor, i.e. what one sandboxed run costs beyond the program.

Each backend runs ``python3 -c pass`` (a fresh sandbox every time, through
``Sandbox.run``); the anchor is the same command spawned bare on the host in this script
run. Reported: medians, the overhead over the bare spawn, and the ratio. The Docker rows
are skipped with a printed reason when no engine answers.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

from bench.common import Figure, docker_sandbox, main, median, p95, repeat
from verifiers.sandbox import SandboxSpec, SandboxUnavailable
from verifiers.sandbox.bwrap import BwrapSandbox

WORKLOAD = "4 sandbox floor"
COMMAND = ["python3", "-c", "pass"]
BARE_PYTHON = "/usr/bin/python3"  # the interpreter the bwrap backend binds from /usr
FULL_RUNS = 40
SMOKE_RUNS = 3


def _bare() -> None:
    subprocess.run([BARE_PYTHON, *COMMAND[1:]], check=True)


def _sandboxed(sandbox: Any) -> Callable[[], None]:
    spec = SandboxSpec(command=COMMAND)

    def once() -> None:
        result = sandbox.run(spec)
        if result.exit_code != 0:
            raise RuntimeError(f"{sandbox.name}: {COMMAND} failed: {result}")

    return once


def _figures(name: str, runs: list[float], bare: float) -> list[Figure]:
    value = median(runs)
    return [
        Figure(WORKLOAD, f"{name}: python3 -c pass, median", value * 1000, "ms"),
        Figure(WORKLOAD, f"{name}: python3 -c pass, p95", p95(runs) * 1000, "ms"),
        Figure(
            WORKLOAD,
            f"{name}: overhead over the bare spawn",
            (value - bare) * 1000,
            "ms",
            signed=True,
        ),
        Figure(WORKLOAD, f"{name} / bare spawn", value / bare, "x"),
    ]


def run(*, smoke: bool) -> list[Figure]:
    runs = SMOKE_RUNS if smoke else FULL_RUNS
    _bare()  # warm the page cache before the anchor
    bare_runs = repeat(_bare, runs)
    bare = median(bare_runs)
    figures = [Figure(WORKLOAD, "bare: python3 -c pass, median", bare * 1000, "ms")]

    bwrap = _sandboxed(BwrapSandbox())
    bwrap()
    figures += _figures("bwrap", repeat(bwrap, runs), bare)

    try:
        docker = _sandboxed(docker_sandbox("sandbox_floor"))
    except SandboxUnavailable as exc:
        print(f"Docker rows skipped: {exc}")
        return figures
    docker()
    figures += _figures("docker", repeat(docker, max(3, runs // 4)), bare)
    return figures


if __name__ == "__main__":
    main(run)
