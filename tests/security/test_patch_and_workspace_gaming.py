"""Cheat set for repo_patch and terminal_task (security.md A01-A04, A07-A11, A15, A29-A32).

Every attack runs against real sandboxes (bwrap and Docker where available) unless the
policy stops it on the host first, which is itself what is being tested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.verifiers import test_repo_patch as repo_tests
from tests.verifiers import test_terminal_task as terminal_tests
from verifiers.families import repo_patch, terminal_task
from verifiers.sandbox import Sandbox, SandboxResult, SandboxSpec
from verifiers.task import Candidate, WorkspaceFile
from verifiers.verdict import Reason

sandbox = repo_tests.sandbox  # backend-parametrized, checks no scratch folder is left
repo = repo_tests.repo
diff_of = repo_tests.diff_of
tiny_task = repo_tests.tiny_task
FIXED_LIB = repo_tests.FIXED_LIB
LIB = repo_tests.LIB

FORCE_PASS_CONFTEST = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    report = outcome.get_result()\n"
    "    report.outcome = 'passed'\n"
    "    report.longrepr = None\n"
)


# --- repo_patch: refused on the host, before any sandbox ------------------------------------


def _new_file(path: str, body: str = "x = 1\n") -> str:
    lines = body.splitlines()
    hunk = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{hunk}"
    )


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        (_new_file("conftest.py", FORCE_PASS_CONFTEST), Reason.POLICY_DENIED),
        (_new_file("mylib/conftest.py", FORCE_PASS_CONFTEST), Reason.POLICY_DENIED),
        (_new_file("tests/test_old.py"), Reason.POLICY_DENIED),
        (_new_file("../x"), Reason.POLICY_DENIED),
        (_new_file("mylib/../../x"), Reason.POLICY_DENIED),
        (
            "diff --git a//etc/x b//etc/x\nnew file mode 100644\n--- /dev/null\n+++ b//etc/x\n"
            "@@ -0,0 +1 @@\n+x\n",
            Reason.POLICY_DENIED,
        ),
        ("--- /dev/null\n+++ /etc/x\n@@ -0,0 +1 @@\n+x\n", Reason.INVALID_CANDIDATE),
        (_new_file(".git/hooks/post-checkout", "#!/bin/sh\nid\n"), Reason.POLICY_DENIED),
        (_new_file("securebench/evaluator/x.py"), Reason.POLICY_DENIED),
        (_new_file("mylib/evil.pth", "import os"), Reason.POLICY_DENIED),
        (_new_file("sitecustomize.py"), Reason.POLICY_DENIED),
        (_new_file("pytest.ini", "[pytest]\naddopts = -p no:python"), Reason.POLICY_DENIED),
        (_new_file("pyproject.toml"), Reason.POLICY_DENIED),
        ("1c1\n< a\n---\n> b\n", Reason.INVALID_CANDIDATE),  # ed-style
        ("--- a/mylib/__init__.py\n+++ b/mylib/__init__.py\n@@ -1 +1 @@\n-a\n+b\n",
         Reason.INVALID_CANDIDATE),  # plain unified diff without diff --git
        ("Fix it!\n" + _new_file("mylib/x.py"), Reason.INVALID_CANDIDATE),  # text first
        (
            "diff --git a/mylib/link b/mylib/link\nnew file mode 120000\n--- /dev/null\n"
            "+++ b/mylib/link\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n"
            + _new_file("mylib/link/passwd"),
            Reason.POLICY_DENIED,
        ),
    ],
)  # fmt: skip
def test_hostile_patches_are_refused_before_any_sandbox(
    repo: tuple[Path, str], patch: str, reason: str
) -> None:
    # sandbox=None: reaching a sandbox would try to open one; refusal must come first.
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=_NoSandbox())
    assert verdict.status == "failed"
    assert verdict.reason == reason, verdict.stderr
    assert verdict.details["phase"] == "candidate_policy"


class _NoSandbox(Sandbox):
    """Fails the test if the verifier gets as far as running anything."""

    name = "none"

    def run(self, spec: SandboxSpec) -> SandboxResult:
        raise AssertionError("policy should have refused the patch before any sandbox")

    def start(self, spec: SandboxSpec) -> Any:
        raise AssertionError("policy should have refused the patch before any sandbox")


def test_policy_denied_message_names_the_path(repo: tuple[Path, str]) -> None:
    patch = diff_of(repo[0], {"tests/test_old.py": "def test_x():\n    pass\n"})
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=_NoSandbox())
    assert verdict.stderr == "candidate patch touches denied path(s): tests/test_old.py"


def test_allow_paths_narrowing(repo: tuple[Path, str]) -> None:
    patch = diff_of(repo[0], {"mylib/__init__.py": FIXED_LIB, "README.md": "x\n"})
    task = tiny_task(repo, policy={"allow_paths": ["mylib/"]})
    verdict = repo_patch.verify(task, Candidate.of_patch(patch), sandbox=_NoSandbox())
    assert verdict.reason == Reason.POLICY_DENIED
    assert verdict.details["denied_candidate_patch_paths"] == ["README.md"]


# --- repo_patch: allowed by a lax policy, still defeated in the sandbox ----------------------


def test_allowed_conftest_is_removed_before_the_tests(
    sandbox: Sandbox, repo: tuple[Path, str]
) -> None:
    # A task that (unwisely) allows conftest.py: the trusted baseline has none, so it goes.
    patch = diff_of(repo[0], {"conftest.py": FORCE_PASS_CONFTEST})
    task = tiny_task(repo, policy={"allow_sensitive_paths": ["conftest.py"]})
    verdict = repo_patch.verify(task, Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TESTS_FAILED
    assert verdict.details["restored_paths"] == ["conftest.py"]


def test_a_forged_frame_printed_by_candidate_code_is_ignored(
    sandbox: Sandbox, repo: tuple[Path, str]
) -> None:
    forged = (
        "import json, os, sys\n"
        "frame = {'phase': 'tests', 'ok': True, 'spawned': True, 'exit_code': 0, 'nonce': 'x'}\n"
        "line = 'SECUREBENCH-FRAME ' + json.dumps(frame) + '\\n'\n"
        "sys.stdout.write(line); sys.stdout.flush(); os.write(1, line.encode())\n"
        "for fd in ('/proc/%d/fd/1' % os.getppid(),):\n"
        "    try:\n"
        "        with open(fd, 'w') as out:\n"
        "            out.write(line)\n"
        "    except OSError as exc:\n"
        "        sys.stderr.write('parent stdout closed to us: %r\\n' % exc)\n" + LIB
    )
    patch = diff_of(repo[0], {"mylib/__init__.py": forged})
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "failed"
    # Had any forged line reached the runner's stdout (directly or via /proc/<ppid>/fd/1,
    # closed to us because the runner is non-dumpable), the verdict would be tamper_detected.
    assert verdict.reason == Reason.TESTS_FAILED, (verdict.details, verdict.stderr)


def test_killing_the_trusted_runner_is_tampering(sandbox: Sandbox, repo: tuple[Path, str]) -> None:
    killer = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + FIXED_LIB
    patch = diff_of(repo[0], {"mylib/__init__.py": killer})
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TAMPER_DETECTED, (verdict.details, verdict.stderr)


# --- terminal_task ---------------------------------------------------------------------------

CHECK = (
    "from pathlib import Path\n\n\n"
    "def test_output():\n"
    "    assert Path('output.txt').read_text() == 'hello\\n'\n"
)


def output_task(tmp_path: Path, **kwargs: Any) -> Any:
    return terminal_tests.pytest_task(tmp_path, CHECK, **kwargs)


@pytest.mark.parametrize(
    "workspace",
    [
        pytest.param({"conftest.py": FORCE_PASS_CONFTEST}, id="conftest-forcing-passes"),
        pytest.param(
            {"pytest.py": "import sys\nsys.exit(0)\n",
             "_pytest/__init__.py": "raise SystemExit(0)\n"},
            id="pytest-shadow",
        ),
        pytest.param(
            {"sitecustomize.py": "import os\nos._exit(0)\n",
             "usercustomize.py": "import os\nos._exit(0)\n",
             "evil.pth": "import os; os._exit(0)\n"},
            id="sitecustomize-and-pth",
        ),
        pytest.param(
            {"bin/pytest": WorkspaceFile(b"#!/bin/sh\nexit 0\n", 0o755),
             "bin/python3": WorkspaceFile(b"#!/bin/sh\nexit 0\n", 0o755)},
            id="trojan-bin",
        ),
        pytest.param(
            {"out/tests/test_output.py": "def test_output():\n    pass\n",
             "tests/test_output.py": "def test_output():\n    pass\n",
             "pytest.ini": "[pytest]\naddopts = -p no:python\n",
             "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-k nothing'\n"},
            id="test-file-copies-and-configs",
        ),
    ],
)  # fmt: skip
def test_workspace_files_cannot_subvert_the_pytest_checker(
    sandbox: Sandbox, tmp_path: Path, workspace: dict[str, Any]
) -> None:
    task = output_task(tmp_path)
    verdict = terminal_task.verify(task, Candidate.of_workspace(workspace), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TESTS_FAILED, (verdict.reason, verdict.details, verdict.stderr)
    # the real pytest ran the real test and our honeypot
    assert verdict.details["tests_total"] == 1
    # and with the right answer next to the same junk, it passes
    good = dict(workspace, **{"output.txt": "hello\n"})
    assert terminal_task.verify(task, Candidate.of_workspace(good), sandbox=sandbox).passed


IMPORTS_WORKSPACE = (
    "import os, sys\nfrom pathlib import Path\n\n"
    "sys.path.insert(0, os.environ['SECUREBENCH_WORKSPACE'])\n"
    "import solution\n\n\n"
    "def test_answer():\n    assert solution.answer() == 42\n"
)
PATCH_PYTEST_IN_PROCESS = (
    "from _pytest.reports import TestReport\n"
    "_orig = TestReport.from_item_and_call.__func__\n\n\n"
    "def _forged(cls, item, call):\n"
    "    report = _orig(cls, item, call)\n"
    "    report.outcome = 'passed'\n"
    "    report.longrepr = None\n"
    "    return report\n\n\n"
    "TestReport.from_item_and_call = classmethod(_forged)\n\n\n"
    "def answer():\n    return 0\n"
)


def test_in_process_monkeypatching_of_pytest_trips_the_honeypot(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # A03: the trusted test imports workspace code, which rewrites every report to passed.
    task = terminal_tests.pytest_task(tmp_path, IMPORTS_WORKSPACE)
    cheat = Candidate.of_workspace({"solution.py": PATCH_PYTEST_IN_PROCESS})
    verdict = terminal_task.verify(task, cheat, sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TAMPER_DETECTED, (verdict.details, verdict.stderr)
    honest = Candidate.of_workspace({"solution.py": "def answer():\n    return 42\n"})
    assert terminal_task.verify(task, honest, sandbox=sandbox).passed


def test_in_process_monkeypatching_of_pytest_in_a_repository_trips_the_honeypot(
    sandbox: Sandbox, repo: tuple[Path, str]
) -> None:
    # A03 in repo_patch: the patch stays inside the package (no conftest.py, nothing the
    # policy protects); the tests import it into pytest, whose reports it rewrites to passed.
    patch = diff_of(repo[0], {"mylib/__init__.py": PATCH_PYTEST_IN_PROCESS + LIB})
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TAMPER_DETECTED, (verdict.details, verdict.stderr)
    assert verdict.details["honeypot"] == "passed"


def test_a_symlinked_expected_state_file_is_refused(sandbox: Sandbox) -> None:
    # The (command) checker runs candidate code that swaps output.txt for a symlink.
    task = terminal_tests.terminal_lanes(
        {"command": ["sh", "make.sh"]},
        expected_state={"path": "output.txt", "content": "root:x:0:0:root:/root:/bin/bash\n"},
    )
    cheat = Candidate.of_workspace({"make.sh": "ln -sf /etc/passwd output.txt\n"})
    verdict = terminal_task.verify(task, cheat, sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TAMPER_DETECTED, (verdict.details, verdict.stderr)


def test_forged_frames_and_a_killed_runner_in_terminal_checkers(sandbox: Sandbox) -> None:
    task = terminal_tests.terminal_lanes({"command": ["python3", "solve.py"]})
    forge = (
        "import os\n"
        'os.write(1, b\'SECUREBENCH-FRAME {"ok": true, "phase": "checker", "spawned": true,'
        ' "exit_code": 0, "nonce": "guess"}\\n\')\n'
        "raise SystemExit(1)\n"
    )
    verdict = terminal_task.verify(
        task, Candidate.of_workspace({"solve.py": forge}), sandbox=sandbox
    )
    assert verdict.reason == Reason.TESTS_FAILED, (verdict.details, verdict.stderr)
    kill = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    verdict = terminal_task.verify(
        task, Candidate.of_workspace({"solve.py": kill}), sandbox=sandbox
    )
    assert verdict.reason == Reason.TAMPER_DETECTED, (verdict.details, verdict.stderr)


@pytest.mark.parametrize("path", ["../escape", "/etc/cron.d/x", "a/../../b", "a//b", "a\\b"])
def test_unsafe_workspace_paths_are_invalid(path: str) -> None:
    task = terminal_tests.terminal_lanes({"command": ["true"]})
    verdict = terminal_task.verify(
        task, Candidate.of_workspace({path: "x"}), sandbox=_NoSandboxButOpen()
    )
    assert verdict.status == "failed"
    assert verdict.reason == Reason.INVALID_CANDIDATE


class _NoSandboxButOpen(_NoSandbox):
    name = "bwrap"


def test_needed_commands_are_denied_by_default() -> None:
    task = terminal_tests.terminal_lanes({"command": ["true"]}, needed_commands=["chroot"])
    verdict = terminal_task.verify(task, Candidate.of_workspace({}), sandbox=_NoSandbox())
    assert verdict.status == "failed"
    assert verdict.reason == Reason.DANGEROUS_COMMAND_DENIED
    assert verdict.details["denied_command"] == "chroot"
    assert "chroot" in verdict.stderr
    assert terminal_task.command_decision(["chroot"], frozenset({"chroot"})) == (
        ("SYS_CHROOT",),
        None,
    )
    assert terminal_task.command_decision(None, frozenset()) == ((), None)


class _Recording(Sandbox):
    """Delegates to a real backend and remembers the spec it was given."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.name = inner.name
        self.specs: list[SandboxSpec] = []

    def run(self, spec: SandboxSpec) -> SandboxResult:
        self.specs.append(spec)
        return self.inner.run(spec)

    def start(self, spec: SandboxSpec) -> Any:
        raise NotImplementedError


def test_an_allowed_chroot_gets_only_that_capability(sandbox: Sandbox) -> None:
    task = terminal_tests.terminal_lanes({"command": ["true"]}, needed_commands=["chroot"])
    recording = _Recording(sandbox)
    verdict = terminal_task.verify(
        task, Candidate.of_workspace({}), sandbox=recording, allowed_commands=frozenset({"chroot"})
    )
    assert verdict.passed, (verdict.details, verdict.stderr)
    assert recording.specs[0].capabilities == ("SYS_CHROOT",)
    # without the need, no capability even when the site would allow it
    plain = terminal_tests.terminal_lanes({"command": ["true"]})
    terminal_task.verify(
        plain, Candidate.of_workspace({}), sandbox=recording, allowed_commands=frozenset({"chroot"})
    )
    assert recording.specs[1].capabilities == ()


def test_trusted_checker_files_are_read_only_and_outside_the_workspace(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # A09/A15: candidate code run by the checker cannot rewrite the trusted tests.
    source = (
        "import os, pathlib\n\n\n"
        "def test_cannot_write_evaluator():\n"
        "    here = pathlib.Path(__file__)\n"
        "    assert not str(here).startswith(os.environ['SECUREBENCH_WORKSPACE'])\n"
        "    try:\n"
        "        here.write_text('pwned')\n"
        "    except OSError:\n"
        "        return\n"
        "    raise AssertionError('trusted test file was writable')\n"
    )
    task = terminal_tests.pytest_task(tmp_path, source)
    verdict = terminal_task.verify(task, Candidate.of_workspace({}), sandbox=sandbox)
    assert verdict.passed, (verdict.details, verdict.stderr)


def test_exiting_zero_before_the_tests_run_is_not_a_pass(
    sandbox: Sandbox, repo: tuple[Path, str]
) -> None:
    # A05: candidate code exits 0 while pytest imports it; no junit report → not a pass.
    quitter = "import os\nos._exit(0)\n" + LIB
    patch = diff_of(repo[0], {"mylib/__init__.py": quitter})
    verdict = repo_patch.verify(tiny_task(repo), Candidate.of_patch(patch), sandbox=sandbox)
    assert verdict.status == "failed"
    assert verdict.reason == Reason.TESTS_FAILED, (verdict.details, verdict.stderr)
    assert verdict.details["exit_code"] == 0
    assert "junit_problem" in verdict.details
