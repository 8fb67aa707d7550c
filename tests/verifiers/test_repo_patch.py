"""repo_patch verification in real sandboxes (bwrap and Docker), spec §4.5.

The ``sandbox`` fixture runs every test on each available backend; a missing backend is a
skip with its reason, or a failure when SECUREBENCH_REQUIRE names it (tests/components.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.components import require
from verifiers.families import repo_patch
from verifiers.sandbox import Sandbox, SandboxUnavailable, get_sandbox
from verifiers.task import Candidate, TaskFile, TaskLanes
from verifiers.verdict import Reason

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOCAL_IMAGE = "securebench-local/python:3.11"
SCRATCH_PREFIXES = ("securebench-repo-", "securebench-terminal-")

# --- backends --------------------------------------------------------------------------------


def open_backend(name: str, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    if name == "docker":
        image = os.environ.get("SECUREBENCH_DEFAULT_IMAGE") or LOCAL_IMAGE
        monkeypatch.setenv("SECUREBENCH_DEFAULT_IMAGE", image)
        try:
            sandbox = get_sandbox("docker")
            sandbox.client.images.get(image)  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - any reason Docker is not usable here
            require("docker", f"Docker backend unavailable ({image}): {exc}")
        return sandbox
    try:
        return get_sandbox("bwrap")
    except SandboxUnavailable as exc:
        require("bwrap", f"bwrap backend unavailable: {exc}")


@pytest.fixture(params=["bwrap", "docker"])
def sandbox(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Sandbox]:
    backend = open_backend(request.param, monkeypatch)
    tmp_path_factory.getbasetemp()  # pytest's own temp root is fixed before we move ours
    # A private system temp dir for this test (other runs may share /tmp): the verifier's
    # scratch folders must all be gone from it afterwards. Traversable by sandbox uids.
    private = Path(tempfile.mkdtemp(prefix="sb-verifier-test-"))
    private.chmod(0o711)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    try:
        yield backend
        left = [n for n in os.listdir(private) if n.startswith(SCRATCH_PREFIXES)]
        assert not left, f"verifier left scratch folders behind: {left}"
    finally:
        monkeypatch.undo()
        shutil.rmtree(private, ignore_errors=True)


# --- a tiny repository built in the test -----------------------------------------------------

LIB = "def add(a, b):\n    return a - b\n"
FIXED_LIB = "def add(a, b):\n    return a + b\n"
OLD_TEST = "from mylib import add\n\n\ndef test_add_zero():\n    assert add(2, 0) == 2\n"
NEW_TEST = "from mylib import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
COMMAND = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
GIT = [
    "git",
    "-c",
    "user.name=t",
    "-c",
    "user.email=t@example.invalid",
    "-c",
    "core.hooksPath=/dev/null",
]


def git(root: Path, *args: str) -> str:
    result = subprocess.run([*GIT, *args], cwd=root, capture_output=True, text=True, check=True)
    return result.stdout


def diff_of(root: Path, changes: dict[str, str | None]) -> str:
    """A ``git diff`` of ``changes`` (None deletes) against a scratch copy of ``root``."""
    work = root.parent / f"{root.name}-diff"
    shutil.copytree(root, work, symlinks=True)
    if not (work / ".git").exists():
        git(work, "init", "-q")
        git(work, "add", "-A")
        git(work, "commit", "-qm", "base")
    for path, content in changes.items():
        target = work / path
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    git(work, "add", "-A")
    text = git(work, "diff", "--cached", "--binary")
    shutil.rmtree(work)
    return text


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A git repository (public asset ``proj``) and its HEAD."""
    root = tmp_path / "proj"
    files = {"mylib/__init__.py": LIB, "tests/test_old.py": OLD_TEST, "README.md": "tiny\n"}
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


def asset_files(root: Path, prefix: str) -> tuple[TaskFile, ...]:
    return tuple(
        TaskFile(f"{prefix}/{p.relative_to(root).as_posix()}", p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    )


def repo_task(
    root: Path,
    base_commit: str,
    *,
    policy: dict[str, Any] | None = None,
    test_patch: str | None = None,
    setup_patch: str | None = None,
    command: list[str] | None = None,
) -> TaskLanes:
    tests: dict[str, Any] = {
        "source": "command",
        "command": command or COMMAND,
        "workdir": "/workspace/repo",
        "timeout_seconds": 60,
    }
    if test_patch is not None:
        tests["test_patch"] = {"source": "inline", "patch": test_patch}
    if setup_patch is not None:
        tests["setup_patch"] = setup_patch
    evaluation_inputs: dict[str, Any] = {"tests": tests}
    if policy is not None:
        evaluation_inputs["candidate_policy"] = policy
    return TaskLanes(
        task_id="t/tiny",
        family="repo_patch",
        public={
            "repo": "proj",
            "base_commit": base_commit,
            "instructions": "fix add()",
            "assets": [{"path": "proj", "mount": "repo"}],
        },
        evaluation_inputs=evaluation_inputs,
        hidden={},
        environment={"image": "python:3.12-slim", "workdir": "/workspace/repo"},
        files={"assets": asset_files(root, "proj")},
    )


def tiny_task(repo: tuple[Path, str], **kwargs: Any) -> TaskLanes:
    root, head = repo
    kwargs.setdefault("test_patch", diff_of(root, {"tests/test_new.py": NEW_TEST}))
    return repo_task(root, kwargs.pop("base_commit", head), **kwargs)


def gold(repo: tuple[Path, str]) -> Candidate:
    return Candidate.of_patch(diff_of(repo[0], {"mylib/__init__.py": FIXED_LIB}))


# --- tests -----------------------------------------------------------------------------------


def test_the_gold_patch_passes(sandbox: Sandbox, repo: tuple[Path, str]) -> None:
    verdict = repo_patch.verify(tiny_task(repo), gold(repo), sandbox=sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
    assert verdict.details["base_commit_checked"] is True
    assert verdict.details["actual_candidate_patch_paths"] == ["mylib/__init__.py"]
    assert verdict.sandbox_backend == sandbox.name


def test_an_empty_patch_fails_before_any_sandbox(repo: tuple[Path, str]) -> None:
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(""), sandbox=None)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.MISSING_CANDIDATE


def test_a_patch_that_does_not_fix_fails_the_tests(
    sandbox: Sandbox, repo: tuple[Path, str]
) -> None:
    patch = diff_of(repo[0], {"README.md": "tiny, now documented\n"})
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TESTS_FAILED


def test_a_wrong_base_commit_is_reported(sandbox: Sandbox, repo: tuple[Path, str]) -> None:
    task = tiny_task(repo, base_commit="0" * 40)
    verdict = repo_patch.verify(task, gold(repo), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.BASE_COMMIT_MISMATCH
    assert verdict.details["image_commit"] == repo[1]


def test_a_patch_that_does_not_apply(sandbox: Sandbox, repo: tuple[Path, str]) -> None:
    patch = gold(repo).text.replace("return a - b", "return a * b")
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.reason == Reason.PATCH_DOES_NOT_APPLY


def test_a_repository_without_git_gets_a_baseline(sandbox: Sandbox, tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "mylib").mkdir(parents=True)
    (root / "mylib/__init__.py").write_text(LIB)
    (root / "tests").mkdir()
    (root / "tests/test_old.py").write_text(OLD_TEST)
    test_patch = diff_of(root, {"tests/test_new.py": NEW_TEST})
    task = repo_task(root, "not-a-commit", test_patch=test_patch)
    patch = diff_of(root, {"mylib/__init__.py": FIXED_LIB})
    verdict = repo_patch.verify(task, Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "passed", (verdict.details, verdict.stderr)
    assert verdict.details["base_commit_checked"] is False


def test_a_setup_patch_is_applied_before_the_baseline(
    sandbox: Sandbox, repo: tuple[Path, str]
) -> None:
    setup = diff_of(repo[0], {"README.md": "set up\n"})
    task = tiny_task(repo, setup_patch=setup)
    verdict = repo_patch.verify(task, gold(repo), sandbox=sandbox)
    assert verdict.status == "passed", (verdict.details, verdict.stderr)
    # the setup change is part of the baseline, not of the candidate's changes
    assert verdict.details["actual_candidate_patch_paths"] == ["mylib/__init__.py"]


def test_allowed_test_edits_are_restored_from_the_trusted_copy(
    sandbox: Sandbox, repo: tuple[Path, str]
) -> None:
    # The task lets the candidate touch tests/, but the trusted copy wins before the run.
    weakened = "def test_add_zero():\n    assert True\n"
    patch = diff_of(repo[0], {"tests/test_old.py": weakened, "tests/test_new.py": weakened})
    task = tiny_task(repo, policy={"allow_sensitive_paths": ["tests/"]})
    verdict = repo_patch.verify(task, Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TESTS_FAILED
    assert sorted(verdict.details["restored_paths"]) == ["tests/test_new.py", "tests/test_old.py"]


def example_rows() -> list[dict[str, Any]]:
    lines = (EXAMPLES / "tiny-repo-patch" / "tasks.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def example_task(row: dict[str, Any]) -> TaskLanes:
    assets = EXAMPLES / "tiny-repo-patch" / "assets"
    files = tuple(
        TaskFile(p.relative_to(assets).as_posix(), p)
        for p in sorted(assets.rglob("*"))
        if p.is_file()
    )
    return TaskLanes(
        task_id=row["id"],
        family="repo_patch",
        public={**row["input"], "assets": row["assets"]},
        evaluation_inputs={k: row["eval"][k] for k in ("tests", "candidate_policy")},
        hidden={"gold_patch": row["eval"]["gold_patch"]},
        environment=row["environment"],
        files={"assets": files},
    )


@pytest.mark.parametrize("index", range(3))
def test_example_pack_gold_patches_pass_and_null_fails(sandbox: Sandbox, index: int) -> None:
    row = example_rows()[index]
    task = example_task(row)
    verdict = repo_patch.verify(
        task, Candidate.of_patch(row["eval"]["gold_patch"]), sandbox=sandbox
    )
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
    # a patch outside allow_paths (src/) is refused before any sandbox
    readme = (
        "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
        "@@ -1 +1 @@\n-# calc\n+# calc!\n"
    )
    refused = repo_patch.verify(task, Candidate.of_patch(readme), sandbox=sandbox)
    assert refused.reason == Reason.POLICY_DENIED
    # and the gold patch is the real fix: the unfixed tree fails the hidden test
    noop = row["eval"]["gold_patch"].replace("\n+", "\n+# ", 1)
    assert repo_patch.verify(task, Candidate.of_patch(noop), sandbox=sandbox).status == "failed"


# --- a Python image's commands on both backends (host stand-ins on bwrap) --------------------

# `pytest` (unlike `python -m pytest`) leaves the working folder off sys.path: a rootdir
# conftest puts the repository there, as real repositories do.
ROOT_CONFTEST = "# the repository's root on sys.path for `pytest`\n"
IMAGE_COMMANDS = {
    "python -m pytest": ["python", "-m", "pytest", "-q", "tests"],
    "pytest": ["pytest", "-q", "tests"],
}


@pytest.mark.parametrize("command", IMAGE_COMMANDS.values(), ids=IMAGE_COMMANDS.keys())
def test_a_python_images_test_commands_work_on_both_backends(
    sandbox: Sandbox, repo: tuple[Path, str], command: list[str]
) -> None:
    root = repo[0]
    test_patch = diff_of(root, {"tests/test_new.py": NEW_TEST, "conftest.py": ROOT_CONFTEST})
    task = tiny_task(repo, command=command, test_patch=test_patch)
    fixed = repo_patch.verify(task, gold(repo), sandbox=sandbox)
    assert fixed.status == "passed", (fixed.reason, fixed.details, fixed.stderr)
    unfixed = diff_of(root, {"README.md": "tiny, now documented\n"})
    broken = repo_patch.verify(task, Candidate.of_patch(unfixed), sandbox=sandbox)
    assert (broken.status, broken.reason) == ("failed", Reason.TESTS_FAILED), broken.stderr
    for verdict in (fixed, broken):
        standins = [n for n in verdict.details["notes"] if "stood in" in n]
        if sandbox.name == "bwrap":  # the result says the image did not run, and what did
            assert len(standins) == 1, verdict.details["notes"]
            assert standins[0].startswith("image python:3.12-slim not used (bwrap): ")
            for tool in ("python → host Python 3.", "pytest ", "git ", "patch "):
                assert tool in standins[0]
            assert verdict.details["sandbox_standins"] == standins
        else:  # Docker runs the image itself
            assert standins == [] and "sandbox_standins" not in verdict.details
