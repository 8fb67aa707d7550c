"""repo_patch with the repository baked into the task's image (SWE-bench style), spec §4.5.

No public assets: on Docker the repository comes from the image at environment.workdir
(/testbed here) and is copied into the sandbox's writable work dir; if it has .git, HEAD must
equal base_commit. On bwrap there is no image to take it from: error, sandbox_unavailable.

A small image is built FROM the local sandbox image (nothing is pulled) and removed at the
end. Without Docker these tests skip with the reason, or fail when
SECUREBENCH_REQUIRE names docker.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.components import require
from tests.verifiers import test_repo_patch as repo_tests
from verifiers.families import repo_patch
from verifiers.sandbox import Sandbox, SandboxUnavailable, get_sandbox
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Reason

BASE_IMAGE = repo_tests.LOCAL_IMAGE
TESTBED = "/testbed"
LIB = repo_tests.LIB
FIXED_LIB = repo_tests.FIXED_LIB
OLD_TEST = repo_tests.OLD_TEST
NEW_TEST = repo_tests.NEW_TEST
COMMAND = repo_tests.COMMAND
REPO_FILES = {"mylib/__init__.py": LIB, "tests/test_old.py": OLD_TEST, "README.md": "tiny\n"}
# A fixed identity and date: the same tree always gives the same commit.
COMMIT_ENV = (
    "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid "
    "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid "
    "GIT_AUTHOR_DATE='2020-01-01T00:00:00+0000' GIT_COMMITTER_DATE='2020-01-01T00:00:00+0000'"
)
# Like SWE-bench's `pip install -e .`: the image's Python imports the package from /testbed.
SITE_PACKAGES = "/usr/local/lib/python3.11/dist-packages"
DOCKERFILE = f"""\
FROM {BASE_IMAGE}
COPY repo {TESTBED}
RUN cd {TESTBED} && git init -q && git add -A \\
 && {COMMIT_ENV} git -c core.hooksPath=/dev/null commit -qm base \\
 && git rev-parse HEAD > /securebench-test-head \
 && mkdir -p {SITE_PACKAGES} && echo {TESTBED} > {SITE_PACKAGES}/testbed-editable.pth
"""


def require_docker(reason: str) -> None:
    require("docker", reason)


def build_context() -> io.BytesIO:
    """Dockerfile + repo/ as an in-memory tar (regular files, mode 0644, owned by root)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in {
            "Dockerfile": DOCKERFILE,
            **{f"repo/{p}": t for p, t in REPO_FILES.items()},
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1577836800
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


@dataclass(frozen=True)
class RepoImage:
    tag: str
    head: str
    client: Any

    def run(self, *argv: str) -> str:
        """A throwaway container of the test image (no network), its stdout."""
        output = self.client.containers.run(
            self.tag, list(argv), remove=True, network_mode="none", entrypoint=[]
        )
        return output.decode().strip()


@pytest.fixture(scope="module")
def repo_image() -> Iterator[RepoImage]:
    try:
        sandbox = get_sandbox("docker")
        client = sandbox.client  # type: ignore[attr-defined]
        client.images.get(BASE_IMAGE)
    except Exception as exc:  # noqa: BLE001 - any reason Docker is not usable here
        require_docker(f"Docker backend unavailable ({BASE_IMAGE}): {exc}")
    tag = f"securebench-test/repo-image:{secrets.token_hex(6)}"
    try:
        client.images.build(
            fileobj=build_context(),
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",
        )
    except Exception as exc:  # noqa: BLE001 - e.g. a build failure: say why
        pytest.fail(f"cannot build the test image from {BASE_IMAGE}: {exc}")
    try:
        image = RepoImage(tag, "", client)
        head = image.run("cat", "/securebench-test-head")
        assert len(head) == 40, head
        assert image.run("git", "-C", TESTBED, "rev-parse", "HEAD") == head
        yield RepoImage(tag, head, client)
    finally:
        client.images.remove(tag, force=True)


@pytest.fixture
def docker_sandbox(repo_image: RepoImage, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    # The test tag exists locally, so it resolves as itself; no default image may stand in.
    monkeypatch.delenv("SECUREBENCH_IMAGE_ALIASES", raising=False)
    monkeypatch.delenv("SECUREBENCH_DEFAULT_IMAGE", raising=False)
    yield from private_tempdir(get_sandbox("docker"), monkeypatch)


def private_tempdir(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """The verifier's scratch folders must all be gone afterwards."""
    private = Path(tempfile.mkdtemp(prefix="sb-verifier-test-"))
    private.chmod(0o711)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    try:
        yield sandbox
        left = [n for n in os.listdir(private) if n.startswith(repo_tests.SCRATCH_PREFIXES)]
        assert not left, f"verifier left scratch folders behind: {left}"
    finally:
        monkeypatch.undo()
        shutil.rmtree(private, ignore_errors=True)


# --- the task ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def host_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same files on the host, only to write patches against."""
    root = tmp_path_factory.mktemp("image-repo") / "testbed"
    for path, content in REPO_FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    return root


def image_task(host_repo: Path, image: str, base_commit: str, **tests: Any) -> TaskLanes:
    test_patch = repo_tests.diff_of(host_repo, {"tests/test_new.py": NEW_TEST})
    return TaskLanes(
        task_id="t/image-repo",
        family="repo_patch",
        public={"repo": "mylib", "base_commit": base_commit, "instructions": "fix add()"},
        evaluation_inputs={
            "tests": {
                "source": "command",
                "command": COMMAND,
                "workdir": TESTBED,
                "test_patch": {"source": "inline", "patch": test_patch},
                **tests,
            }
        },
        hidden={"gold_patch": gold_patch(host_repo)},
        environment={"image": image, "workdir": TESTBED, "timeout_seconds": 120},
        files={},
    )


def gold_patch(host_repo: Path) -> str:
    return repo_tests.diff_of(host_repo, {"mylib/__init__.py": FIXED_LIB})


def verify(task: TaskLanes, patch: str, sandbox: Sandbox) -> Any:
    return repo_patch.verify(task, Candidate.of_patch(patch), sandbox=sandbox)


# --- Docker: the repository comes from the image ---------------------------------------------


def test_the_gold_patch_passes(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    verdict = verify(task, task.hidden["gold_patch"], docker_sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
    assert verdict.details["base_commit_checked"] is True
    assert verdict.details["image_commit"] == repo_image.head
    assert verdict.details["actual_candidate_patch_paths"] == ["mylib/__init__.py"]
    assert verdict.sandbox_backend == "docker"
    assert verdict.sandbox_image == repo_image.tag
    assert verdict.details["tests_passed"] == 2


def test_an_empty_patch_fails(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    verdict = verify(task, "", docker_sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.MISSING_CANDIDATE


def test_a_wrong_base_commit_is_reported(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    task = image_task(host_repo, repo_image.tag, "0" * 40)
    verdict = verify(task, gold_patch(host_repo), docker_sandbox)
    assert verdict.status == "failed", (verdict.reason, verdict.details, verdict.stderr)
    assert verdict.reason == Reason.BASE_COMMIT_MISMATCH
    assert verdict.details["image_commit"] == repo_image.head
    assert verdict.details["base_commit"] == "0" * 40


def test_a_conftest_is_denied(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    conftest = "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n    items.clear()\n"
    patch = repo_tests.diff_of(host_repo, {"conftest.py": conftest, "mylib/__init__.py": FIXED_LIB})
    verdict = verify(task, patch, docker_sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.POLICY_DENIED


def test_a_patch_that_does_not_fix_fails_the_tests(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    patch = repo_tests.diff_of(host_repo, {"README.md": "tiny, now documented\n"})
    verdict = verify(task, patch, docker_sandbox)
    assert verdict.status == "failed", (verdict.reason, verdict.details, verdict.stderr)
    assert verdict.reason == Reason.TESTS_FAILED
    assert verdict.details["actual_candidate_patch_paths"] == ["README.md"]


def test_the_image_repository_is_never_modified(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    first = verify(task, gold_patch(host_repo), docker_sandbox)
    assert first.status == "passed", (first.reason, first.details, first.stderr)
    # The same gold patch applies again only to the pristine tree; HEAD is still base_commit.
    second = verify(task, gold_patch(host_repo), docker_sandbox)
    assert second.status == "passed", (second.reason, second.details, second.stderr)
    assert second.details["image_commit"] == repo_image.head
    # and a no-fix patch after a passing run still fails: nothing of the fix carried over
    noop = repo_tests.diff_of(host_repo, {"README.md": "again\n"})
    assert verify(task, noop, docker_sandbox).reason == Reason.TESTS_FAILED
    # The image itself: same HEAD, clean tree, no verifier baseline commit, no test_new.py.
    assert repo_image.run("git", "-C", TESTBED, "rev-parse", "HEAD") == repo_image.head
    assert repo_image.run("git", "-C", TESTBED, "status", "--porcelain", "--ignored") == ""
    assert repo_image.run("git", "-C", TESTBED, "rev-list", "--count", "HEAD") == "1"
    assert repo_image.run("cat", f"{TESTBED}/mylib/__init__.py") == LIB.strip()


def test_the_repository_is_verified_where_the_image_installed_it(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    # SWE-bench style: the `pytest` script, not `python -m pytest`, so the current folder is
    # not on sys.path and `import mylib` goes through the image's editable install to
    # /testbed. The patched tree must be the one at /testbed, or the fix is never tested.
    command = ["pytest", "-q", "-p", "no:cacheprovider", "tests"]
    task = image_task(host_repo, repo_image.tag, repo_image.head, command=command)
    verdict = verify(task, gold_patch(host_repo), docker_sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
    noop = repo_tests.diff_of(host_repo, {"README.md": "tiny, now documented\n"})
    assert verify(task, noop, docker_sandbox).reason == Reason.TESTS_FAILED


def test_a_login_shell_does_not_read_the_candidates_profile(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    # SWE-bench commands are `bash -lc '...'`; HOME must not be the repository, where the
    # patch could plant a .profile that exits 0 before the tests run.
    command = ["bash", "-lc", "pytest -q -p no:cacheprovider tests"]
    task = image_task(host_repo, repo_image.tag, repo_image.head, command=command)
    profile = "exit 0\n"
    patch = repo_tests.diff_of(host_repo, {".profile": profile, ".bash_profile": profile})
    verdict = verify(task, patch, docker_sandbox)
    assert verdict.status == "failed", (verdict.reason, verdict.details, verdict.stderr)
    assert verdict.reason == Reason.TESTS_FAILED
    assert verify(task, gold_patch(host_repo), docker_sandbox).status == "passed"


def test_an_image_without_the_repository_is_misconfigured(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    task = image_task(host_repo, repo_image.tag, repo_image.head)
    task.environment["workdir"] = "/no-such-repo"
    task.evaluation_inputs["tests"]["workdir"] = "/no-such-repo"
    verdict = verify(task, gold_patch(host_repo), docker_sandbox)
    assert verdict.status == "error", (verdict.reason, verdict.details, verdict.stderr)
    assert verdict.reason == Reason.TASK_MISCONFIGURED
    assert verdict.details["phase"] == "repository"


def test_tests_workdir_below_the_image_repository(
    docker_sandbox: Sandbox, repo_image: RepoImage, host_repo: Path
) -> None:
    # tests.workdir may be a folder inside environment.workdir; the command runs there.
    task = image_task(
        host_repo,
        repo_image.tag,
        repo_image.head,
        workdir=f"{TESTBED}/tests",
        command=["pytest", "-q", "-p", "no:cacheprovider", "."],
    )
    verdict = verify(task, gold_patch(host_repo), docker_sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)


# --- bwrap: there is no image to take the repository from ----------------------------------


@pytest.fixture
def bwrap_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    try:
        bwrap = get_sandbox("bwrap")
    except SandboxUnavailable as exc:
        require("bwrap", f"bwrap backend unavailable: {exc}")
    yield from private_tempdir(bwrap, monkeypatch)


def test_bwrap_cannot_verify_an_image_repository(bwrap_sandbox: Sandbox, host_repo: Path) -> None:
    # The same task; bwrap needs no image, so this runs without Docker too.
    task = image_task(host_repo, "securebench-test/repo-image:none", "0" * 40)
    verdict = verify(task, gold_patch(host_repo), bwrap_sandbox)
    assert verdict.status == "error"
    assert verdict.reason == Reason.SANDBOX_UNAVAILABLE
    assert "baked into the task's image" in verdict.stderr
    assert "Docker" in verdict.stderr
