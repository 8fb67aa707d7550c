"""repo_patch live workspaces (issue 12): the repository at its base commit, edited by an agent,
diffed against the PRISTINE repository in a fresh sandbox, on bwrap and Docker.

The candidate patch must be the agent's real change against base_commit whatever the agent
did to its own ``.git`` (committed, rewritten, deleted): the diff never reads it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.verifiers import test_repo_patch as repo_tests
from tests.verifiers.test_repo_patch import FIXED_LIB, NEW_TEST, diff_of, open_backend, repo_task
from tests.verifiers.test_repo_patch_image import (  # noqa: F401 - fixtures
    RepoImage,
    host_repo,
    image_task,
    repo_image,
)
from verifiers.families import repo_patch
from verifiers.live import (
    WorkspaceLimits,
    WorkspaceUnsupported,
    destroy,
    plan_live_workspace,
    repo_diff,
    run_bash,
    seed,
    write_file,
)
from verifiers.sandbox import Sandbox, get_sandbox
from verifiers.task import Candidate, TaskLanes

pytestmark = pytest.mark.database_independent

OLD_TEST = repo_tests.OLD_TEST
AGENT_GIT = "git -c user.name=agent -c user.email=agent@example.invalid"


@pytest.fixture(params=["bwrap", "docker"])
def sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return open_backend(request.param, monkeypatch)


@pytest.fixture
def folder() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="sb-live-test-"))
    root.chmod(0o711)
    try:
        yield root / "episode"
    finally:
        destroy(root / "episode")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "proj"
    files = {
        "mylib/__init__.py": repo_tests.LIB,
        "tests/test_old.py": OLD_TEST,
        "README.md": "tiny\n",
    }
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    repo_tests.git(root, "init", "-q")
    repo_tests.git(root, "add", "-A")
    repo_tests.git(root, "commit", "-qm", "base")
    return root, repo_tests.git(root, "rev-parse", "HEAD").strip()


def task_of(repo: tuple[Path, str]) -> TaskLanes:
    root, head = repo
    return repo_task(root, head, test_patch=diff_of(root, {"tests/test_new.py": NEW_TEST}))


def start(sandbox: Sandbox, folder: Path, task: TaskLanes):
    ws = plan_live_workspace(task, sandbox.name, folder, WorkspaceLimits())
    first = seed(sandbox, ws, task)
    assert first.ok, first
    return ws


def test_the_repository_starts_at_its_base_commit(
    sandbox: Sandbox, folder: Path, repo: tuple[Path, str]
) -> None:
    ws = start(sandbox, folder, task_of(repo))
    assert (ws.workdir, ws.repo_path, ws.from_image) == ("/workspace", "repo", False)
    head = run_bash(sandbox, ws, "cd repo && git rev-parse HEAD && git status --short", 30)
    assert head.stdout == repo[1] + "\n", head.text
    assert repo_diff(sandbox, ws, task_of(repo)) == ("", [])


def test_the_diff_is_the_agents_change_and_the_verifier_passes_it(
    sandbox: Sandbox, folder: Path, repo: tuple[Path, str]
) -> None:
    task = task_of(repo)
    ws = start(sandbox, folder, task)
    assert write_file(sandbox, ws, "repo/mylib/__init__.py", FIXED_LIB).ok
    tests = run_bash(sandbox, ws, "cd repo && python -m pytest -q -p no:cacheprovider tests", 60)
    assert tests.exit_code == 0, tests.text
    patch, paths = repo_diff(sandbox, ws, task)
    assert patch == diff_of(repo[0], {"mylib/__init__.py": FIXED_LIB})
    assert paths == ["mylib/__init__.py"]
    verdict = repo_patch.verify(task, Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)


def test_a_tampered_agent_git_does_not_change_the_diff(
    sandbox: Sandbox, folder: Path, repo: tuple[Path, str]
) -> None:
    """The agent commits its change, then throws its history away for a new one whose HEAD
    holds everything: against the agent's .git the diff would be empty."""
    task = task_of(repo)
    ws = start(sandbox, folder, task)
    tamper = run_bash(
        sandbox,
        ws,
        f"cd repo && printf '{FIXED_LIB}' > mylib/__init__.py && rm README.md"
        " && echo new > added.txt && mkdir -p sub && echo x > sub/.gitignore"
        f" && {AGENT_GIT} commit -qam fix && rm -rf .git && git init -q"
        f" && {AGENT_GIT} add -A && {AGENT_GIT} commit -qm everything"
        " && git status --short | wc -l && mkdir -p nested/.git && echo junk > nested/.git/HEAD",
        60,
    )
    assert tamper.ok and tamper.stdout == "0\n", tamper.text
    patch, paths = repo_diff(sandbox, ws, task)
    expected = diff_of(
        repo[0],
        {
            "mylib/__init__.py": FIXED_LIB,
            "README.md": None,
            "added.txt": "new\n",
            "sub/.gitignore": "x\n",
        },
    )
    assert patch == expected
    assert paths == ["README.md", "added.txt", "mylib/__init__.py", "sub/.gitignore"]


def test_an_edited_test_file_is_named_among_the_changed_paths(
    sandbox: Sandbox, folder: Path, repo: tuple[Path, str]
) -> None:
    task = task_of(repo)
    ws = start(sandbox, folder, task)
    edit = "from mylib import add\n\n\ndef test_add_zero():\n    assert True\n"
    assert write_file(sandbox, ws, "repo/tests/test_old.py", edit).ok
    _, paths = repo_diff(sandbox, ws, task)
    assert paths == ["tests/test_old.py"]


def test_a_repository_without_git_is_diffed_against_its_first_files(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    root = tmp_path / "plain"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (root / "keep.txt").write_text("same\n")
    task = repo_task(root, "0" * 40)
    ws = start(sandbox, folder, task)
    assert write_file(sandbox, ws, "repo/pkg/mod.py", "VALUE = 2\n").ok
    patch, paths = repo_diff(sandbox, ws, task)
    assert paths == ["pkg/mod.py"]
    assert "-VALUE = 1\n+VALUE = 2\n" in patch and "keep.txt" not in patch


def test_a_repository_baked_into_the_image_needs_docker(
    repo_image: RepoImage,  # noqa: F811 - the fixture imported above
    host_repo: Path,  # noqa: F811
) -> None:
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    with pytest.raises(WorkspaceUnsupported, match="Docker"):
        plan_live_workspace(task, "bwrap", Path("/nonexistent"), WorkspaceLimits())


def test_a_repository_from_the_image_on_docker(
    repo_image: RepoImage,  # noqa: F811 - the fixture imported above
    host_repo: Path,  # noqa: F811
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SECUREBENCH_IMAGE_ALIASES", raising=False)
    monkeypatch.delenv("SECUREBENCH_DEFAULT_IMAGE", raising=False)
    sandbox = get_sandbox("docker")
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    ws = plan_live_workspace(task, "docker", folder, WorkspaceLimits())
    assert (ws.workdir, ws.repo_path, ws.from_image) == ("/testbed", "", True)
    first = seed(sandbox, ws, task)
    assert "mylib/__init__.py" in first.text and ".git/" in first.text, first.text
    head = run_bash(sandbox, ws, "git rev-parse HEAD && pwd", 30)
    assert head.stdout == f"{repo_image.head}\n/testbed\n", head.text
    assert write_file(sandbox, ws, "mylib/__init__.py", FIXED_LIB).ok
    run_bash(sandbox, ws, f"{AGENT_GIT} commit -qam fix && rm -rf .git", 30)
    patch, paths = repo_diff(sandbox, ws, task)
    assert paths == ["mylib/__init__.py"]
    assert patch == task.hidden["gold_patch"]
    verdict = repo_patch.verify(task, Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
