"""repo_patch: a git patch against a repository baked into the image (spec §3.5, §4.5)."""

from __future__ import annotations

import json
import posixpath
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.families.base import (
    FamilySpec,
    Field,
    FieldProblem,
    equals,
    is_non_empty_string,
    non_empty_string,
    non_negative_number,
    strict_object,
    string,
    string_array,
    string_list,
)
from verifiers.families.repo_expected import ExpectedTest, expected_tests, unmet
from verifiers.families.repo_runner import is_pytest_command
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN
from verifiers.patch_policy import (
    PATH_MISMATCH,
    CandidatePolicy,
    PolicyDecision,
    check_paths,
    evaluate,
    is_test_path,
    trusted_patch_paths,
)
from verifiers.sandbox import get_sandbox
from verifiers.sandbox.base import (
    REPO_LIMITS,
    Mount,
    Sandbox,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.sandbox.docker import ImageWorkdirSpec
from verifiers.sandbox.standins import Standins, image_standins, merge_mounts
from verifiers.sandbox.trusted_files import staged
from verifiers.scratch_files import WORKSPACE_ROOT, layout_assets
from verifiers.task import Candidate, TaskLanes
from verifiers.trusted_runner import (
    RUNNER_DIR,
    limit_reason,
    log_secrets,
    new_nonce,
    notes_details,
    read_frame,
    runner_mounts,
    sandbox_fields,
)
from verifiers.verdict import (
    ERROR,
    FAILED,
    Reason,
    Verdict,
    error,
    failed,
    passed,
)

_INLINE_PATCH = strict_object(
    {
        "source": Field(equals("inline"), required=True),
        "patch": Field(non_empty_string, required=True),
    }
)


def patch(value: Any, path: str) -> list[FieldProblem]:
    """A non-empty patch string, or {source: inline, patch: <non-empty>}."""
    if is_non_empty_string(value):
        return []
    if isinstance(value, dict):
        return _INLINE_PATCH(value, path)
    return [(path, "must be a non-empty string or an object {source: inline, patch: ...}")]


TESTS = strict_object(
    {
        "source": Field(equals("command"), required=True),
        "command": Field(string_array, required=True),
        "workdir": Field(non_empty_string),
        "timeout_seconds": Field(non_negative_number),
        "setup_patch": Field(patch),
        "test_patch": Field(patch),
    }
)

CANDIDATE_POLICY = strict_object(
    {
        "allow_paths": Field(string_list),
        "allow_sensitive_paths": Field(string_list),
        "patch_preserved_paths": Field(string_list),
    }
)

SPEC = FamilySpec(
    name="repo_patch",
    active=True,
    candidate_kind="patch",
    eval_lanes={
        "tests": EVALUATION_INPUTS,
        "candidate_policy": EVALUATION_INPUTS,
        "gold_patch": HIDDEN,
    },
    input_fields={
        "repo": Field(non_empty_string, required=True),
        "base_commit": Field(non_empty_string, required=True),
        "instructions": Field(non_empty_string, required=True),
        "hints": Field(non_empty_string),
    },
    eval_fields={
        "tests": Field(TESTS, required=True),
        "candidate_policy": Field(CANDIDATE_POLICY),
        "gold_patch": Field(string),
    },
)


# --- verification ----------------------------------------------------------------------------

# HOME for the runner and the test command: never the repository, where a candidate's
# patch could plant .profile/.bashrc for a `bash -lc` test command.
SANDBOX_HOME = "/tmp"  # noqa: S108 - the sandbox's own private tmpfs
DEFAULT_TIMEOUT = 300.0
SETUP_GRACE = 60.0  # copying, git and patching before the tests start
RUNNER = f"{RUNNER_DIR}/repo_runner.py"
TEST_COMMAND_STARTED = b"securebench: running the test command"

# Phase reported by the trusted runner → (status, reason) when it stopped there.
PHASE_VERDICTS: dict[str, tuple[str, str]] = {
    "repository": (ERROR, Reason.TASK_MISCONFIGURED),
    "base_commit": (FAILED, Reason.BASE_COMMIT_MISMATCH),
    "setup_patch": (ERROR, Reason.TASK_MISCONFIGURED),
    "verifier_baseline": (ERROR, Reason.INFRASTRUCTURE),
    "candidate_patch": (FAILED, Reason.PATCH_DOES_NOT_APPLY),
    "candidate_paths": (FAILED, Reason.POLICY_DENIED),
    "restore_tests": (ERROR, Reason.INFRASTRUCTURE),
    "test_patch": (FAILED, Reason.PATCH_DOES_NOT_APPLY),
    "internal": (ERROR, Reason.INFRASTRUCTURE),
}


@dataclass(frozen=True)
class RepoPlan:
    """Where the repository comes from and where it lives inside the sandbox."""

    workdir: str  # the sandbox's writable folder
    repo_dir: str  # the repository inside it
    test_cwd: str
    # Docker: the work dir IS environment.workdir, seeded from the image's own folder there
    # (the repository stays at the path the image's installs point to); False for assets.
    from_image: bool
    work_files: Path | None


class TaskError(ValueError):
    """The task cannot be verified as written (→ error, task_misconfigured)."""


# --- the guard: planted tests that show whether pytest's report can be believed ---------------

GUARD_DIR = "/opt/securebench/guard"  # the plugin's read-only mount (and import path)
GUARD_PLUGIN = Path(__file__).with_name("repo_pytest_guard.py")
MAX_GUARD_DIRS = 20


@dataclass(frozen=True)
class Guard:
    """A must-pass canary and a must-fail honeypot, named afresh for each verification.

    The tests import the candidate's code into the pytest process, where it can rewrite the
    outcomes pytest reports (security.md A03). The runner plants these two tests next to the
    task's tests and loads the guard plugin (repo_pytest_guard.py) under a module name no
    repository file can take, so they run in the same session, last, whatever ``-k``/``-m``
    select. A honeypot reported as anything but failed, a canary as anything but passed, a
    missing one, or exit status 0 beside a failed honeypot means the report was forged.
    Code that singles the two out by reading their source can still evade this: it stops
    forgeries made blind, which is every one recorded so far.
    """

    tag: str
    canary: str
    honeypot: str

    @classmethod
    def new(cls) -> Guard:
        names: set[str] = set()
        while len(names) < 2:
            names.add(f"test_{secrets.token_hex(6)}")
        # unittest runs a class's tests in name order: the canary first, so that a `-x` run
        # stopped by the honeypot has run everything else.
        canary, honeypot = sorted(names)
        return cls(secrets.token_hex(6), canary, honeypot)

    @property
    def module(self) -> str:
        return f"sbguard_{self.tag}"

    @property
    def file(self) -> str:
        return f"test_{self.tag}.py"

    @property
    def case_class(self) -> str:
        return f"Case{self.tag}"

    def source(self) -> str:
        # A unittest case: collected whatever python_classes/python_functions a repository
        # configures. Both tests look alike; only the compared values differ.
        value = int(self.tag[:4], 16)
        return (
            "import unittest\n\n\n"
            f"class {self.case_class}(unittest.TestCase):\n"
            f"    def {self.canary}(self):\n"
            f"        self.check({value}, {value})\n\n"
            f"    def {self.honeypot}(self):\n"
            f"        self.check({value}, {value + 1})\n\n"
            "    def check(self, value, expected):\n"
            "        if value != expected:\n"
            '            raise AssertionError("%d != %d" % (value, expected))\n'
        )

    def mount(self) -> Mount:
        return Mount(staged(GUARD_PLUGIN), f"{GUARD_DIR}/{self.module}.py")

    def config(self, dirs: list[str]) -> dict[str, Any]:
        return {
            "module": self.module,
            "module_dir": GUARD_DIR,
            "file": self.file,
            "source": self.source(),
            "dirs": dirs,
        }

    def owns(self, case: list[Any]) -> bool:
        """A report case of the planted file: its tests, or its collection error."""
        return self.file[: -len(".py")] in f"{case[0]}.{case[1]}".split(".")


def _is_test_module(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def guard_dirs(command: list[str], test_patch: str, plan: RepoPlan) -> list[str]:
    """Where the runner may plant the guard's tests, best first: the folders of the test
    patch's test modules, then of the paths the command names, its working folder, the
    repository. The runner takes the first that really is a folder of the repository."""
    found = [
        posixpath.join(plan.repo_dir, posixpath.dirname(path))
        for path in trusted_patch_paths(test_patch)
        if _is_test_module(posixpath.basename(path))
    ]
    for word in command[1:]:
        word = word.split("::", 1)[0]
        if word and not word.startswith("-"):
            path = posixpath.join(plan.test_cwd, word)
            found.append(posixpath.dirname(path) if path.endswith(".py") else path)
    found += [plan.test_cwd, plan.repo_dir]
    return [posixpath.normpath(path) for path in dict.fromkeys(found)][:MAX_GUARD_DIRS]


def inline_patch(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("patch")
    return value if isinstance(value, str) else ""


def _absolute(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise TaskError(f"{name} must be an absolute path")
    path = posixpath.normpath(value)
    if any(part == ".." for part in path.split("/")):
        raise TaskError(f"{name} must not contain '..'")
    return path


def _below(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` ('' when equal), None when outside."""
    if path == root:
        return ""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def timeout_seconds(task: TaskLanes, tests: dict[str, Any]) -> float:
    for value in (tests.get("timeout_seconds"), task.environment.get("timeout_seconds")):
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return DEFAULT_TIMEOUT


def plan_repository(
    task: TaskLanes, tests: dict[str, Any], backend: str, scratch: Path
) -> RepoPlan:
    env_workdir = task.environment.get("workdir")
    repo_dir = _absolute(tests.get("workdir") or env_workdir, "tests.workdir/environment.workdir")
    image_repo = _absolute(env_workdir or repo_dir, "environment.workdir")
    assets = task.files.get("assets", ())
    inside = _below(repo_dir, WORKSPACE_ROOT)
    if assets and inside is not None:
        placed = layout_assets(scratch, task.public.get("assets"), assets)
        if any(_below(path, inside) is not None or inside == "" for path in placed):
            return RepoPlan(WORKSPACE_ROOT, repo_dir, repo_dir, False, scratch)
    if backend != "docker":
        raise SandboxUnavailable(
            "the repository is baked into the task's image; verifying it needs Docker"
        )
    return RepoPlan(image_repo, image_repo, repo_dir, True, None)


def runner_config(
    task: TaskLanes,
    tests: dict[str, Any],
    plan: RepoPlan,
    decision: PolicyDecision,
    policy: CandidatePolicy,
    nonce: str,
    standins: Standins,
    guard: Guard | None = None,
) -> dict[str, Any]:
    restore = [
        path
        for path in decision.applied_paths
        if is_test_path(path) or path in policy.protected_paths
    ]
    config = {
        "nonce": nonce,
        "repo_dir": plan.repo_dir,
        "test_cwd": plan.test_cwd,
        "base_commit": str(task.public.get("base_commit", "")),
        "setup_patch": inline_patch(tests.get("setup_patch")),
        "candidate_patch": decision.patch,
        "declared_paths": list(decision.applied_paths),
        "restore_paths": restore,
        "test_patch": inline_patch(tests.get("test_patch")),
        "command": list(tests["command"]),
        # bwrap: `python`, `pytest` and the site's pytest standing in for the image's.
        "test_env": dict(standins.env),
    }
    if guard is not None:
        test_patch = inline_patch(tests.get("test_patch"))
        config["guard"] = guard.config(guard_dirs(list(tests["command"]), test_patch, plan))
    return config


def verify(task: TaskLanes, candidate: Candidate, *, sandbox: Sandbox | None = None) -> Verdict:
    """Policy on the host first, then one sandbox: repo, patches, tests (spec §4.5)."""
    tests = task.evaluation_inputs.get("tests")
    if not isinstance(tests, dict) or not _is_argv(tests.get("command")):
        return error(Reason.TASK_MISCONFIGURED, stderr="repo_patch task has no tests.command")
    test_patch = inline_patch(tests.get("test_patch"))
    policy = CandidatePolicy.from_value(
        task.evaluation_inputs.get("candidate_policy"),
        protected_paths=trusted_patch_paths(test_patch),
    )
    decision = evaluate(candidate.text if candidate.kind == "patch" else "", policy)
    details: dict[str, Any] = {"verifier": "repo_patch", **decision.details()}
    if not decision.allowed:
        details["phase"] = "candidate_policy"
        reason = decision.reason or Reason.POLICY_DENIED
        return failed(reason, details=details, stderr=decision.message)
    try:
        sandbox = sandbox or get_sandbox()
    except SandboxUnavailable as exc:
        return error(Reason.SANDBOX_UNAVAILABLE, details=details, stderr=str(exc))
    wall = timeout_seconds(task, tests) + SETUP_GRACE
    nonce = new_nonce()
    guard = Guard.new() if is_pytest_command(tests["command"]) else None
    with tempfile.TemporaryDirectory(prefix="securebench-repo-") as scratch:
        try:
            plan = plan_repository(task, tests, sandbox.name, Path(scratch))
            standins = image_standins(sandbox.name, task.environment.get("image"))
        except TaskError as exc:
            return error(Reason.TASK_MISCONFIGURED, details=details, stderr=str(exc))
        except SandboxUnavailable as exc:
            return error(Reason.SANDBOX_UNAVAILABLE, details=details, stderr=str(exc))
        config = runner_config(task, tests, plan, decision, policy, nonce, standins, guard)
        guard_mounts = (guard.mount(),) if guard is not None else ()
        spec_type = ImageWorkdirSpec if plan.from_image else SandboxSpec
        spec = spec_type(
            command=["python3", "-I", RUNNER],
            image=task.environment.get("image"),
            workdir=plan.workdir,
            work_files=plan.work_files,
            mounts=merge_mounts(runner_mounts(), guard_mounts, standins.mounts),
            env={"HOME": SANDBOX_HOME},
            limits=REPO_LIMITS.with_wall(min(wall, MAX_WALL_SECONDS)),
            stdin=json.dumps(config).encode("utf-8"),
        )
        result = sandbox.run(spec)
    details.update(notes_details(result, standins))
    expected = expected_tests(test_patch, list(tests["command"]))
    return decide(result, nonce, policy, details, log_secrets(task), guard, expected)


MAX_WALL_SECONDS = 1800.0


def _is_argv(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def decide(
    result: SandboxResult,
    nonce: str,
    policy: CandidatePolicy,
    details: dict[str, Any],
    scrub: list[str],
    guard: Guard | None = None,
    expected: list[ExpectedTest] | None = None,
) -> Verdict:
    """The verdict from the sandbox run: limits, then the runner's one trusted frame."""
    fields = sandbox_fields(result, scrub)
    details = {**details, "sandbox_exit_code": result.exit_code}
    if reason := limit_reason(result):
        return failed(reason, details={**details, "phase": "sandbox"}, **fields)
    frame, problem = read_frame(result.stdout, nonce)
    if frame is None:
        started = TEST_COMMAND_STARTED in result.stderr
        details = {**details, "phase": "frame", "frame_problem": problem}
        if problem == "forged" or started:
            return failed(Reason.TAMPER_DETECTED, details=details, **fields)
        return error(Reason.INFRASTRUCTURE, details=details, **fields)
    details.update(_frame_details(frame))
    phase = str(frame.get("phase"))
    if not frame.get("ok"):
        status, reason = PHASE_VERDICTS.get(phase, (ERROR, Reason.INFRASTRUCTURE))
        if phase == "candidate_paths":
            details["policy_code"] = PATH_MISMATCH
        verdict = failed if status == FAILED else error
        return verdict(reason, details=details, **fields)
    if not frame.get("spawned"):
        return error(Reason.TASK_MISCONFIGURED, details=details, **fields)
    actual = check_paths(frame.get("actual_paths") or [], policy)
    if not actual.allowed:
        details["denied_candidate_patch_paths"] = list(actual.denied_paths)
        return failed(Reason.POLICY_DENIED, details=details, **fields)
    if "junit" in frame:
        if guard is None or not frame.get("guard_file"):
            # Every pytest command runs guarded; a report without the guard proves nothing.
            return error(Reason.INFRASTRUCTURE, details=details, **fields)
        reason, more = pytest_outcome(frame, guard, expected)
        details.update(more)
        if reason is not None:
            return failed(reason, details=details, **fields)
        return passed(details=details, **fields)
    if frame.get("exit_code") != 0:
        return failed(Reason.TESTS_FAILED, details=details, **fields)
    return passed(details=details, **fields)


def junit_problem(junit: Any) -> str | None:
    """Why a pytest run's junit report cannot be read (None if it can)."""
    if not isinstance(junit, dict) or "junit_error" in junit:
        return str(junit.get("junit_error") if isinstance(junit, dict) else "no report")
    return None


def _outcome(cases: list[list[Any]], name: str) -> str:
    """One planted test's reported outcome: missing, its outcome, or inconsistent."""
    outcomes = {str(case[2]) for case in cases if str(case[1]).split("[")[0] == name}
    if not outcomes:
        return "missing"
    return outcomes.pop() if len(outcomes) == 1 else "inconsistent"


def pytest_outcome(
    frame: dict[str, Any], guard: Guard, expected: list[ExpectedTest] | None = None
) -> tuple[str | None, dict[str, Any]]:
    """(failure reason or None, details) from the junit cases, the guard's and the status;
    each of the ``expected`` tests (the task's own, repo_expected) must be reported passed.

    Order matters: a forged honeypot is tampering whatever else failed; a real failure is
    a plain test failure even where it stopped the run before the guard's tests (``-x``);
    a guard test missing, a canary not passed or status 0 beside a failed honeypot (which
    pytest itself turns into status 1) are tampering too."""
    junit = frame.get("junit")
    if problem := junit_problem(junit):
        return Reason.TESTS_FAILED, {"junit_problem": problem}
    cases = [c for c in junit.get("cases") or [] if isinstance(c, list) and len(c) == 3]
    planted = [case for case in cases if guard.owns(case)]
    real = [case for case in cases if not guard.owns(case)]
    summary: dict[str, Any] = {
        "honeypot": _outcome(planted, guard.honeypot),
        "canary": _outcome(planted, guard.canary),
        "tests_passed": sum(1 for case in real if case[2] == "passed"),
        "tests_total": len(real),
    }
    if summary["honeypot"] not in ("failed", "missing"):
        return Reason.TAMPER_DETECTED, summary
    failing = [f"{case[0]}::{case[1]}" for case in real if case[2] == "failed"]
    if failing:
        problem = "failed: " + ", ".join(failing[:20])
        return Reason.TESTS_FAILED, {**summary, "junit_problem": problem}
    if summary["honeypot"] == "missing" or summary["canary"] != "passed":
        return Reason.TAMPER_DETECTED, summary
    status = frame.get("exit_code")
    if status == 0:
        return Reason.TAMPER_DETECTED, {**summary, "exit_code_problem": "0 beside a failed test"}
    if status != 1:
        return Reason.TESTS_FAILED, {**summary, "junit_problem": f"pytest exit status {status}"}
    if missed := unmet(expected or [], real):
        problem = "the task's tests did not pass: " + ", ".join(missed[:20])
        return Reason.TESTS_FAILED, {**summary, "junit_problem": problem}
    if not summary["tests_passed"]:
        return Reason.TESTS_FAILED, {**summary, "junit_problem": "no test passed"}
    return None, summary


_FRAME_KEYS = (
    "phase",
    "message",
    "exit_code",
    "spawn_error",
    "base_commit_checked",
    "image_commit",
    "base_commit",
    "actual_paths",
    "undeclared_paths",
    "restored_paths",
    "killed_leftovers",
    "undumpable",
    "guard_file",
)


def _frame_details(frame: dict[str, Any]) -> dict[str, Any]:
    out = {key: frame[key] for key in _FRAME_KEYS if key in frame}
    if "actual_paths" in out:
        out["actual_candidate_patch_paths"] = out.pop("actual_paths")
    return out
