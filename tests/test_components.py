"""A missing component fails a run that requires it, naming it, and is a visible skip
otherwise (tests/components.py). Each case runs pytest in a child process, with the reference
packs "removed" by pointing SECUREBENCH_REFERENCE_PACKS at an empty folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.components import COMPONENTS, REFERENCE_PACK_NAMES, REPO_ROOT

# A module whose every test needs the reference packs (and whose own packs need nothing).
NEEDS_REFERENCE_PACKS = "tests/compiler/test_reference_packs.py"


def pytest_child(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SECUREBENCH_REQUIRE")}
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args]
    return subprocess.run(
        command, cwd=REPO_ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=300
    )


def test_a_required_missing_component_stops_the_run_at_once_naming_it(tmp_path: Path) -> None:
    env = {"SECUREBENCH_REQUIRE": "reference-packs", "SECUREBENCH_REFERENCE_PACKS": str(tmp_path)}

    child = pytest_child(NEEDS_REFERENCE_PACKS, env=env)

    assert child.returncode == pytest.ExitCode.TESTS_FAILED, child.stdout + child.stderr
    assert "required component reference-packs is missing" in child.stdout + child.stderr
    assert " passed" not in child.stdout  # stopped before any test ran


def test_without_the_switch_the_same_tests_skip_and_say_why(tmp_path: Path) -> None:
    child = pytest_child(NEEDS_REFERENCE_PACKS, env={"SECUREBENCH_REFERENCE_PACKS": str(tmp_path)})

    assert child.returncode == pytest.ExitCode.OK, child.stdout + child.stderr
    assert f"reference-packs missing: reference packs not found at {tmp_path}" in child.stdout
    assert " skipped" in child.stdout


def test_a_test_that_finds_its_required_component_missing_fails(tmp_path: Path) -> None:
    # The start-of-run probe passes (a folder with the packs' task files), and a test then
    # finds the component missing after all: it must fail, not skip.
    for name in REFERENCE_PACK_NAMES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "tasks.jsonl").write_text("")
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "from tests.components import require\n\n\n"
        "def test_needs_it():\n"
        "    require('reference-packs', 'gone since the run started')\n"
    )
    env = {"SECUREBENCH_REQUIRE": "reference-packs", "SECUREBENCH_REFERENCE_PACKS": str(tmp_path)}

    required = pytest_child(str(probe), f"--rootdir={REPO_ROOT}", env=env)
    env.pop("SECUREBENCH_REQUIRE")
    optional = pytest_child(str(probe), f"--rootdir={REPO_ROOT}", env=env)

    assert required.returncode == pytest.ExitCode.TESTS_FAILED, required.stdout
    assert "reference-packs missing: gone since the run started (required:" in required.stdout
    assert optional.returncode == pytest.ExitCode.OK, optional.stdout
    assert "SKIPPED [1]" in optional.stdout and "gone since the run started" in optional.stdout


def test_an_unknown_component_name_is_refused() -> None:
    child = pytest_child(NEEDS_REFERENCE_PACKS, env={"SECUREBENCH_REQUIRE": "bwrap,chromeum"})

    assert child.returncode == pytest.ExitCode.USAGE_ERROR
    assert "unknown components ['chromeum']" in child.stderr
    assert all(name in child.stderr for name in COMPONENTS)
