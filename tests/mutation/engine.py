"""Applies one defence-removing edit to a scratch copy of the repository and runs its tests.

A mutant is killed only when the tests it names fail on the mutated copy (pytest exit code 1)
while the same tests pass on an unmutated copy (the baseline): a kill against a failing
baseline proves nothing. Collection errors, timeouts and other exit codes mark the mutant as
broken, never as killed, and a run in which every selected test skipped proves nothing either.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# Never copied into a scratch tree: environments, data, history and caches.
SKIPPED_NAMES = (".venv", "var", ".git", "__pycache__", ".pytest_cache", ".ruff_cache")
DEFAULT_IMAGE = "securebench-local/python:3.11"
DEFAULT_TIMEOUT_SECONDS = 900.0
_SUMMARY_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")
# "FAILED tests/x.py::name[param id] - message": the id may hold spaces, the message follows;
# captured log lines ("ERROR    django.request: ...") are not summary lines.
_FAILED_LINE = re.compile(r"^(FAILED|ERROR) (\S+\.py(?:::.+?)?)(?: - .*)?$", re.MULTILINE)

KILLED = "killed"
SURVIVED = "survived"
BROKEN = "broken"  # collection error, timeout, usage error: the tests could not judge it
UNPROVEN = "unproven"  # every selected test skipped: nothing was checked
STALE = "stale"  # the anchor text is not in the module exactly once
BASELINE_FAILED = "baseline failed"  # the tests fail without the mutation too


@dataclass(frozen=True)
class Mutant:
    """One defence removed: ``find`` (exactly once in ``module``) becomes ``replace``."""

    id: str
    module: str  # path relative to the repository root
    defence: str  # what the edit removes or weakens, in plain words
    find: str
    replace: str
    tests: tuple[str, ...]  # pytest arguments: files, node ids, "-k EXPR"
    fast: bool = False  # part of the subset CI runs
    # Only for a mutant no test can kill: "equivalent: why" (the report shows it).
    survivor_note: str = ""

    @property
    def test_args(self) -> list[str]:
        return pytest_args(self.tests)


def pytest_args(tests: tuple[str, ...]) -> list[str]:
    """Command-line arguments for a mutant's tests ("-k EXPR" becomes two arguments)."""
    args: list[str] = []
    for item in tests:
        args += item.split(" ", 1) if item.startswith("-k ") else [item]
    return args


@dataclass
class PytestRun:
    returncode: int | None  # None: killed at the timeout
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # "FAILED tests/...::name"
    tail: str = ""  # the end of pytest's output, for the report of a broken run


@dataclass
class Outcome:
    mutant: Mutant
    status: str
    run: PytestRun | None = None
    detail: str = ""

    @property
    def killer(self) -> str:
        return self.run.failures[0] if self.run and self.run.failures else ""


def anchor_count(mutant: Mutant, root: Path = REPO_ROOT) -> int:
    path = root / mutant.module
    if not path.is_file():
        return 0
    return path.read_text(encoding="utf-8").count(mutant.find)


def mutated_source(mutant: Mutant, root: Path = REPO_ROOT) -> str:
    text = (root / mutant.module).read_text(encoding="utf-8")
    if text.count(mutant.find) != 1:
        raise ValueError(f"{mutant.id}: anchor found {text.count(mutant.find)} times")
    return text.replace(mutant.find, mutant.replace, 1)


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {name for name in names if name in SKIPPED_NAMES or name.endswith(".pyc")}


def make_scratch_root(parent: Path | None) -> Path:
    """A folder for the scratch copies that other uids can traverse and read.

    bwrap resolves mount sources as the sandbox uid, so the mounted trusted files of a scratch
    copy (the code harness, the repo runner) must be readable by it, like the checkout's own.
    """
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
        parent.chmod(0o755)  # noqa: S103 - see above
    root = Path(tempfile.mkdtemp(prefix="securebench-mutation-", dir=parent))
    root.chmod(0o755)  # noqa: S103 - see above
    return root


def make_copy(destination: Path, mutant: Mutant | None = None, source: Path = REPO_ROOT) -> Path:
    """A copy of ``source`` (with ``mutant`` applied), world-readable."""
    shutil.copytree(source, destination, ignore=_ignore, symlinks=True)
    for folder, _dirs, files in os.walk(destination):
        os.chmod(folder, 0o755)  # noqa: S103 - the sandbox uid reads the mounted files
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)
    if mutant is not None:
        text = mutated_source(mutant, source)
        (destination / mutant.module).write_text(text, encoding="utf-8")
    return destination


def pytest_environment(scratch: Path) -> dict[str, str]:
    """The caller's environment, with Docker required (a missing engine fails, never skips)."""
    env = dict(os.environ)
    # Staged trusted files (harness, runners) of the mutated copies go away with the scratch.
    env["SECUREBENCH_TRUSTED_DIR"] = str(scratch / "trusted")
    env["SECUREBENCH_REQUIRE_DOCKER"] = "1"
    # A sandbox that is missing must fail the tests, never skip them into a "survivor".
    env.setdefault("SECUREBENCH_REQUIRE", "bwrap,docker")
    env.setdefault("SECUREBENCH_DEFAULT_IMAGE", DEFAULT_IMAGE)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)  # the scratch copy's own packages, never the checkout's
    return env


def run_tests(copy: Path, args: list[str], timeout: float) -> PytestRun:
    python = REPO_ROOT / ".venv" / "bin" / "python"
    command = [str(python if python.exists() else sys.executable), "-m", "pytest"]
    command += [*args, "-x", "-q", "-p", "no:cacheprovider"]
    started = time.monotonic()
    # A session of its own, so a timeout kills pytest with every worker it started.
    process = subprocess.Popen(
        command,
        cwd=copy,
        env=pytest_environment(copy.parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        returncode = None
    text = output.decode("utf-8", "replace")
    return PytestRun(
        returncode=returncode,
        seconds=time.monotonic() - started,
        counts=_counts(text),
        failures=[f"{kind} {node}" for kind, node in _FAILED_LINE.findall(text)],
        tail="\n".join(text.strip().splitlines()[-15:]),
    )


def _counts(output: str) -> dict[str, int]:
    lines = [line for line in output.strip().splitlines() if _SUMMARY_COUNT.search(line)]
    if not lines:
        return {}
    return {kind: int(number) for number, kind in _SUMMARY_COUNT.findall(lines[-1])}


def judge(mutant: Mutant, run: PytestRun) -> Outcome:
    if run.returncode is None:
        return Outcome(mutant, BROKEN, run, "timed out")
    if run.returncode == 1:
        return Outcome(mutant, KILLED, run)
    if run.returncode == 0:
        if run.counts.get("passed", 0) == 0:
            return Outcome(mutant, UNPROVEN, run, "every selected test skipped")
        return Outcome(mutant, SURVIVED, run)
    return Outcome(mutant, BROKEN, run, f"pytest exit code {run.returncode}")


def baseline_problem(run: PytestRun) -> str | None:
    """Why an unmutated run cannot serve as a baseline (None when it can)."""
    if run.returncode is None:
        return "timed out"
    if run.returncode != 0:
        return f"pytest exit code {run.returncode}: {'; '.join(run.failures[:3])}"
    if run.counts.get("passed", 0) == 0:
        return "every selected test skipped"
    return None
