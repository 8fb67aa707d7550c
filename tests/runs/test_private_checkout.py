"""A checkout in a private folder (``/root`` and ``mktemp -d`` folders are 0700) still runs
sandboxed verifications: the trusted files a sandbox mounts are staged where its uid can read
them. Runs the copy's own code in a separate interpreter, as ``make test`` from such a clone
would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runs.conftest import REPO_ROOT, bwrap_or_skip
from verifiers.sandbox.standins import PYTEST_MODULES

pytestmark = pytest.mark.database_independent

# What a clone holds: the repository without its venv, data, history and caches.
NOT_IN_A_CLONE = (".venv", "var", ".git", "__pycache__", ".pytest_cache", ".ruff_cache")

# Verifies one oracle candidate per pack with bubblewrap and prints where its code came from.
SCRIPT = """
import json, sys
from pathlib import Path

import pytest, verifiers
from packs.compiler import compile_pack, compiled_task_lanes
from verifiers.oracle import oracle_candidate
from verifiers.sandbox import get_sandbox
from verifiers.scoring import VerifierSettings, verify

settings = VerifierSettings(sandbox=get_sandbox("bwrap"))
report = {"code": [verifiers.__file__, pytest.__file__], "verdicts": {}}
for name in sys.argv[1:]:
    pack = compile_pack(Path("examples") / name)
    lanes = compiled_task_lanes(pack.tasks[0], pack.files)
    verdict = verify(lanes, oracle_candidate(lanes), settings)
    report["verdicts"][lanes.task_id] = [verdict.status, verdict.reason, verdict.stderr[-600:]]
print(json.dumps(report))
"""


@pytest.fixture
def private_clone(tmp_path: Path) -> Path:
    """The repository copied into a 0700 folder, with the venv's pytest packages copied
    beside it (a clone's venv lives inside the clone, as unreachable as the code)."""
    clone = tmp_path / "checkout"
    shutil.copytree(REPO_ROOT, clone, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE))
    site = clone / ".venv-site"
    site.mkdir()
    for name in PYTEST_MODULES:
        module = __import__(name)
        origin = Path(module.__file__)
        source = origin.parent if origin.name == "__init__.py" else origin
        copy = shutil.copytree if source.is_dir() else shutil.copyfile
        copy(source, site / source.name)
    clone.chmod(0o700)
    tmp_path.chmod(0o700)
    return clone


@pytest.fixture
def trusted_dir() -> Iterator[Path]:
    """A staging folder of this test's own, so the copy's files are staged afresh."""
    parent = Path(tempfile.mkdtemp(prefix="securebench-trusted-test-", dir="/tmp"))  # noqa: S108
    parent.chmod(0o755)
    yield parent / "trusted"
    for folder, _, _ in os.walk(parent):
        os.chmod(folder, 0o700)  # noqa: PTH101 - staged copies are read-only
    shutil.rmtree(parent, ignore_errors=True)


def test_a_checkout_in_a_private_folder_runs_bwrap_verifications(
    private_clone: Path, trusted_dir: Path
) -> None:
    bwrap_or_skip()
    if os.geteuid() != 0:
        pytest.skip("only root runs sandboxes as other uids; otherwise the sandbox is us")
    env = {
        **os.environ,
        "PYTHONPATH": f"{private_clone}{os.pathsep}{private_clone / '.venv-site'}",
        "SECUREBENCH_TRUSTED_DIR": str(trusted_dir),
        "SECUREBENCH_SANDBOX": "bwrap",
    }
    packs = ["tiny-repo-patch", "terminal-files", "python-functions"]
    completed = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", SCRIPT, *packs],
        cwd=private_clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    # The verifiers and pytest that ran are the private copies, not this checkout's.
    assert all(Path(path).is_relative_to(private_clone) for path in report["code"]), report
    verdicts = report["verdicts"]
    assert sorted(task_id.split("/")[0] for task_id in verdicts) == sorted(packs)
    assert {status for status, _, _ in verdicts.values()} == {"passed"}, verdicts
    # What the sandboxes mounted: read-only copies nobody but us can change.
    staged = [path for path in trusted_dir.rglob("*") if path.is_file()]
    assert {path.name for path in staged} >= {"repo_runner.py", "code_harness.py"}
    assert all(path.stat().st_mode & 0o222 == 0 for path in staged)


def test_a_staging_folder_someone_else_could_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another local user who plants the staging folder (or makes it writable) would choose
    the runner every sandbox executes as trusted: no verification runs from it."""
    from verifiers.sandbox import SandboxUnavailable  # noqa: PLC0415
    from verifiers.sandbox.trusted_files import staged  # noqa: PLC0415

    source = tmp_path / "runner.py"
    source.write_text("print('trusted')\n")
    planted = tmp_path / "planted"
    planted.mkdir()
    monkeypatch.setenv("SECUREBENCH_TRUSTED_DIR", str(planted))
    planted.chmod(0o777)
    with pytest.raises(SandboxUnavailable, match="not a folder only we can write"):
        staged(source)
    if os.geteuid() == 0:  # only root can hand a folder to another uid
        planted.chmod(0o755)
        os.chown(planted, 65534, 65534)
        with pytest.raises(SandboxUnavailable, match="not a folder only we can write"):
            staged(source)


def test_an_edited_trusted_file_is_staged_again_never_rewritten(
    tmp_path: Path, trusted_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifiers.sandbox import trusted_files  # noqa: PLC0415

    monkeypatch.setenv("SECUREBENCH_TRUSTED_DIR", str(trusted_dir))
    monkeypatch.setattr(trusted_files, "_digests", {})  # this process's cache starts empty
    source = tmp_path / "runner.py"
    source.write_text("VERSION = 1\n")
    first = trusted_files.staged(source)
    assert first.read_text() == "VERSION = 1\n" and first.stat().st_mode & 0o222 == 0
    source.write_text("VERSION = 2\n")
    monkeypatch.setattr(trusted_files, "_digests", {})  # a new worker process
    second = trusted_files.staged(source)
    assert second != first and second.read_text() == "VERSION = 2\n"
    assert first.read_text() == "VERSION = 1\n"
    # A copy removed behind our back (a /tmp cleaner) comes back on the next use.
    for folder, _, _ in os.walk(second.parent):
        os.chmod(folder, 0o700)  # noqa: PTH101
    shutil.rmtree(second.parent)
    assert trusted_files.staged(source).read_text() == "VERSION = 2\n"
