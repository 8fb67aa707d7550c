"""terminal_task: change a workspace until a trusted checker passes (spec §3.6, §4.6)."""

from __future__ import annotations

import ast
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
    any_value,
    is_non_empty_string,
    json_object,
    non_empty_string,
    non_empty_string_or_string_array,
    one_of,
    positive_number,
    strict_object,
    string_or_object,
)
from verifiers.lanes import EVALUATION_INPUTS, HIDDEN
from verifiers.sandbox import get_sandbox
from verifiers.sandbox.base import (
    REPO_LIMITS,
    Mount,
    Sandbox,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.sandbox.standins import (
    PYLIB_DIR,
    Standins,
    image_standins,
    merge_mounts,
    pylib_mounts,
)
from verifiers.scratch_files import (
    DEFAULT_WORKDIR,
    UnsafeWorkspace,
    add_missing_files,
    assets_by_access,
    layout_assets,
    layout_task_files,
    open_up,
    read_only_asset_mounts,
    remove_path,
    unsafe_relative_path,
    write_candidate_workspace,
)
from verifiers.task import Candidate, TaskFile, TaskLanes
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
from verifiers.verdict import Reason, Verdict, error, failed, passed

# Commands a checker may ask extra sandbox rights for (spec §4.6.3).
DANGEROUS_COMMANDS = ("chroot",)
CHECKER_SOURCES = ("pytest", "script")

COMMAND_CHECKER = strict_object(
    {
        "command": Field(non_empty_string_or_string_array, required=True),
        "workdir": Field(non_empty_string),
        "timeout_seconds": Field(positive_number),
    }
)

# The recommended form: trusted checker files under the eval root, never in the workspace.
FILE_CHECKER = strict_object(
    {
        "source": Field(one_of(*CHECKER_SOURCES), required=True),
        "path": Field(non_empty_string, required=True),
        "timeout_seconds": Field(positive_number),
    }
)


def checker(value: Any, path: str) -> list[FieldProblem]:
    # Both historical forms exist in real packs; the presence of `command` picks the form.
    if not isinstance(value, dict):
        return [(path, "must be an object")]
    if "command" in value:
        return COMMAND_CHECKER(value, path)
    if "source" in value or "path" in value:
        return FILE_CHECKER(value, path)
    return [
        (
            path,
            "must be a command checker {command, workdir?, timeout_seconds?} or a"
            " trusted-file checker {source: pytest|script, path, timeout_seconds?}",
        )
    ]


def needed_commands(value: Any, path: str) -> list[FieldProblem]:
    if not isinstance(value, list):
        return [(path, "must be a list of known dangerous command names")]
    problems: list[FieldProblem] = []
    for index, item in enumerate(value):
        item_path = f"{path}[{index}]"
        if not is_non_empty_string(item):
            problems.append((item_path, "must be a non-empty dangerous command name"))
        elif item not in DANGEROUS_COMMANDS:
            problems.append((item_path, "must be one of: " + ", ".join(DANGEROUS_COMMANDS)))
    return problems


def checker_file_path(value: Any) -> str | None:
    """The eval-root path a trusted-file checker runs, so its files travel with it."""
    if (
        isinstance(value, dict)
        and "command" not in value
        and value.get("source") in CHECKER_SOURCES
    ):
        path = value.get("path")
        return path if is_non_empty_string(path) else None
    return None


SPEC = FamilySpec(
    name="terminal_task",
    active=True,
    candidate_kind="workspace",
    eval_lanes={
        "checker": EVALUATION_INPUTS,
        "needed_commands": EVALUATION_INPUTS,
        "run_tests": EVALUATION_INPUTS,
        "test_files": EVALUATION_INPUTS,
        "expected_state": HIDDEN,
    },
    input_fields={
        "instructions": Field(non_empty_string, required=True),
        "context": Field(string_or_object),
    },
    eval_fields={
        "checker": Field(checker, required=True),
        "run_tests": Field(json_object),
        "test_files": Field(json_object),
        # Documentation only: no verifier reads it, so any value is fine.
        "expected_state": Field(any_value),
        "needed_commands": Field(needed_commands, nullable=True),
    },
    eval_file_paths={"checker": checker_file_path},
)


# --- verification ----------------------------------------------------------------------------

DEFAULT_TIMEOUT = 300.0
MAX_WALL_SECONDS = 1800.0
EVALUATOR_DIR = "/opt/securebench/evaluator"
RUNNER = f"{RUNNER_DIR}/terminal_runner.py"
CHECKER_STARTED = b"securebench: running the checker"
# Site policy vocabulary (spec §4.6.3): dangerous command → the one capability it gets.
COMMAND_CAPABILITIES = {"chroot": "SYS_CHROOT"}
MAX_TRUSTED_TEST_BYTES = 2 * 1024 * 1024
_FRAME_KEYS = ("phase", "message", "exit_code", "spawn_error", "junit_error", "killed_leftovers")


class TaskError(ValueError):
    """The task cannot be verified as written (→ error, task_misconfigured)."""


@dataclass(frozen=True)
class Honeypot:
    """A planted must-fail test: if it is reported anything but failed, results were forged."""

    folder: str  # mount target
    module: str  # file stem
    function: str

    @classmethod
    def new(cls) -> Honeypot:
        tag = secrets.token_hex(6)
        return cls(f"/opt/securebench/h{tag}", f"test_{tag}_a", f"test_{tag}_b")

    @property
    def classname(self) -> str:
        return f"{self.folder.rsplit('/', 1)[-1]}.{self.module}"

    def source(self) -> str:
        return f"def {self.function}():\n    raise AssertionError('must fail')\n"


@dataclass(frozen=True)
class CheckerPlan:
    mode: str  # "pytest" | "script" | "command"
    target: str | None  # evaluator path of a file checker
    command: str | list[str] | None
    cwd: str


def command_decision(
    needed: Any, allowed_commands: frozenset[str]
) -> tuple[tuple[str, ...], Verdict | None]:
    """Capabilities to grant, or a failed verdict (spec §4.6.3; denied unless allowed)."""
    names = list(dict.fromkeys(needed or []))
    unknown = [name for name in names if name not in COMMAND_CAPABILITIES]
    if unknown:
        raise TaskError("unknown needed_commands: " + ", ".join(map(str, unknown)))
    denied = [name for name in names if name not in allowed_commands]
    if denied:
        message = (
            f"Verifier sandbox denied dangerous command allowance '{denied[0]}': dangerous"
            " verifier commands are disabled by site policy"
        )
        details = {
            "verifier": "terminal_task",
            "phase": "dangerous_commands",
            "denied_command": denied[0],
            "denied_commands": denied,
            "needed_commands": names,
            "allowed_commands": sorted(allowed_commands),
            "exit_code": None,
        }
        return (), failed(Reason.DANGEROUS_COMMAND_DENIED, details=details, stderr=message)
    return tuple(COMMAND_CAPABILITIES[name] for name in names), None


def plan_checker(checker: Any, workdir: str) -> CheckerPlan:
    if not isinstance(checker, dict):
        raise TaskError("checker must be an object")
    if "command" in checker:
        command = checker["command"]
        ok = (isinstance(command, str) and command.strip()) or (
            isinstance(command, list) and command and all(isinstance(c, str) for c in command)
        )
        if not ok:
            raise TaskError("checker.command must be a string or an argument list")
        cwd = checker.get("workdir") or workdir
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise TaskError("checker.workdir must be an absolute path")
        return CheckerPlan("command", None, command, posixpath.normpath(cwd))
    source, path = checker.get("source"), checker.get("path")
    if source not in CHECKER_SOURCES:
        raise TaskError("checker.source must be 'pytest' or 'script'")
    if unsafe_relative_path(path):
        raise TaskError("checker.path must be a safe relative path under the eval root")
    return CheckerPlan(str(source), f"{EVALUATOR_DIR}/{path}", None, workdir)


def timeout_seconds(task: TaskLanes, checker: dict[str, Any]) -> float:
    for value in (checker.get("timeout_seconds"), task.environment.get("timeout_seconds")):
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return DEFAULT_TIMEOUT


def eval_files(task: TaskLanes) -> list[TaskFile]:
    seen: dict[str, TaskFile] = {}
    for name in ("checker", "run_tests", "test_files"):
        for item in task.files.get(name, ()):
            seen.setdefault(item.path, item)
    return list(seen.values())


def _is_test_module(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def expected_tests(files: list[TaskFile], checker_path: str) -> set[tuple[str, str]]:
    """(junit classname, test name) pytest must report for the trusted files, read with ast.

    Module-level ``test*`` functions and ``test*`` methods of ``Test*`` classes; a test
    that pytest reports under parameters counts once per base name.
    """
    expected: set[tuple[str, str]] = set()
    root = checker_path.strip("/")
    for item in files:
        if not (item.path == root or item.path.startswith(root + "/")):
            continue
        if not _is_test_module(item.path.rsplit("/", 1)[-1]):
            continue
        if item.source.stat().st_size > MAX_TRUSTED_TEST_BYTES:
            continue
        try:
            module = ast.parse(item.source.read_bytes())
        except (SyntaxError, ValueError):
            continue
        dotted = "evaluator." + item.path[: -len(".py")].replace("/", ".")
        for node in module.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test"):
                    expected.add((dotted, node.name))
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for child in node.body:
                    is_function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                    if is_function and child.name.startswith("test"):
                        expected.add((f"{dotted}.{node.name}", child.name))
    return expected


def json_equal(left: Any, right: Any) -> bool:
    """Equality with exact JSON types (True is not 1, 1 is not 1.0)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    return bool(left == right)


def expected_state_path(task: TaskLanes) -> str | None:
    state = task.hidden.get("expected_state")
    if not isinstance(state, dict) or "path" not in state:
        return None
    path = state["path"]
    if unsafe_relative_path(path):
        raise TaskError("expected_state.path must be a safe relative path")
    return str(path)


def check_expected_state(task: TaskLanes, result: SandboxResult) -> tuple[str | None, str]:
    """(failure reason or None, note) comparing the collected file with expected_state."""
    state = task.hidden["expected_state"]
    path = state["path"]
    if path in result.refused:
        return Reason.TAMPER_DETECTED, f"{path} is not a regular file (symlink?)"
    if path not in result.collected:
        return Reason.WRONG_ANSWER, f"{path} is missing"
    data = result.collected[path]
    if "content" in state:
        expected = state["content"]
        expected_bytes = expected.encode("utf-8") if isinstance(expected, str) else None
        ok = data == expected_bytes
        return (None, "content matches") if ok else (Reason.WRONG_ANSWER, "content differs")
    if "json" in state:
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return Reason.WRONG_ANSWER, f"{path} is not valid JSON"
        if json_equal(value, state["json"]):
            return None, "JSON matches"
        return Reason.WRONG_ANSWER, "JSON differs"
    return None, "expected_state has no content/json to compare"


def prepare_workspace(task: TaskLanes, candidate: Candidate, root: Path, plan: CheckerPlan) -> None:
    write_candidate_workspace(root, candidate.files)
    read_only, writable = assets_by_access(task)
    # Read-only public assets cannot have changed in the agent phase: restore the trusted copy.
    for mount in read_only_asset_mounts(read_only):
        remove_path(root, mount)
    layout_assets(root, read_only, task.files.get("assets", ()))
    # Writable assets may have been edited by the agent: supply only what the candidate's
    # workspace left out (a bundle of changed files only still gets the rest of the assets).
    with tempfile.TemporaryDirectory(prefix="securebench-assets-") as staging:
        layout_assets(Path(staging), writable, task.files.get("assets", ()))
        add_missing_files(Path(staging), root)
    if plan.mode == "command":
        # Command checkers of older packs reach their files inside the workspace.
        for name in ("run_tests", "test_files"):
            ref = task.evaluation_inputs.get(name)
            if isinstance(ref, dict) and isinstance(ref.get("path"), str):
                mount = ref.get("mount") or f"securebench/evaluation_inputs/{ref['path']}"
                remove_path(root, mount.strip("/"))
                layout_task_files(root, task.files.get(name, ()), ref["path"], mount)


def prepare_trusted(task: TaskLanes, evaluator: Path, honeypot: Path, pot: Honeypot) -> None:
    layout_task_files(evaluator, eval_files(task))
    (honeypot / f"{pot.module}.py").write_text(pot.source(), encoding="utf-8")
    for folder in (evaluator, honeypot):
        open_up(folder)


def runner_config(
    plan: CheckerPlan, workdir: str, pot: Honeypot, nonce: str, standins: Standins
) -> dict[str, Any]:
    env = {
        # bwrap: `python`, `pytest` and the site's pytest standing in for the image's.
        **standins.env,
        "SECUREBENCH_WORKSPACE": workdir,
        "SECUREBENCH_EVALUATOR": EVALUATOR_DIR,
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONNOUSERSITE": "1",
    }
    config: dict[str, Any] = {
        "nonce": nonce,
        "mode": plan.mode,
        "workdir": workdir,
        "cwd": plan.cwd,
        "target": plan.target,
        "command": plan.command,
    }
    if plan.mode == "script" and plan.target:
        env["TEST_DIR"] = posixpath.join(posixpath.dirname(plan.target), "tests")
    if plan.mode == "pytest" and plan.target:
        config["pytest"] = {
            "pylib": PYLIB_DIR,
            "rootdir": "/opt/securebench",
            "confcutdir": EVALUATOR_DIR,
            "targets": [plan.target, f"{pot.folder}/{pot.module}.py"],
        }
    config["env"] = env
    return config


def verify(
    task: TaskLanes,
    candidate: Candidate,
    *,
    sandbox: Sandbox | None = None,
    allowed_commands: frozenset[str] = frozenset(),
) -> Verdict:
    """Run the trusted checker on a copy of the candidate's workspace (spec §4.6)."""
    details: dict[str, Any] = {"verifier": "terminal_task"}
    checker = task.evaluation_inputs.get("checker")
    workdir = task.environment.get("workdir") or DEFAULT_WORKDIR
    try:
        capabilities, denial = command_decision(
            task.evaluation_inputs.get("needed_commands"), allowed_commands
        )
        if denial is not None:
            return denial
        if not isinstance(workdir, str) or not workdir.startswith("/"):
            raise TaskError("environment.workdir must be an absolute path")
        plan = plan_checker(checker, posixpath.normpath(workdir))
        state_path = expected_state_path(task)
    except TaskError as exc:
        return error(Reason.TASK_MISCONFIGURED, details=details, stderr=str(exc))
    if candidate.kind != "workspace":
        return failed(Reason.INVALID_CANDIDATE, details=details, stderr="not a workspace")
    details.update({"checker_source": plan.mode, "capabilities": list(capabilities)})
    try:
        sandbox = sandbox or get_sandbox()
        standins = image_standins(sandbox.name, task.environment.get("image"))
    except SandboxUnavailable as exc:
        return error(Reason.SANDBOX_UNAVAILABLE, details=details, stderr=str(exc))
    pot = Honeypot.new()
    nonce = new_nonce()
    with tempfile.TemporaryDirectory(prefix="securebench-terminal-") as scratch:
        # Traversable (not listable) by the sandbox uid, so its read-only mounts resolve.
        Path(scratch).chmod(0o711)
        root, evaluator, honeypot = (Path(scratch) / name for name in ("ws", "eval", "hp"))
        for folder in (root, evaluator, honeypot):
            folder.mkdir()
        try:
            prepare_workspace(task, candidate, root, plan)
        except UnsafeWorkspace as exc:
            return failed(Reason.INVALID_CANDIDATE, details=details, stderr=str(exc))
        prepare_trusted(task, evaluator, honeypot, pot)
        if plan.target and not _has_files(evaluator, plan.target):
            return error(
                Reason.TASK_MISCONFIGURED, details=details, stderr="checker.path has no files"
            )
        mounts = merge_mounts(
            (
                Mount(evaluator, EVALUATOR_DIR),
                Mount(honeypot, pot.folder),
                *runner_mounts(),
                *(pylib_mounts() if plan.mode == "pytest" else ()),
            ),
            standins.mounts,
        )
        spec = SandboxSpec(
            command=["python3", "-I", RUNNER],
            image=task.environment.get("image"),
            workdir=posixpath.normpath(workdir),
            work_files=root,
            mounts=mounts,
            limits=REPO_LIMITS.with_wall(min(timeout_seconds(task, checker), MAX_WALL_SECONDS)),
            capabilities=capabilities,
            collect=(state_path,) if state_path else (),
            stdin=json.dumps(runner_config(plan, workdir, pot, nonce, standins)).encode(),
        )
        result = sandbox.run(spec)
        details.update(notes_details(result, standins))
        expected = (
            expected_tests(eval_files(task), checker["path"]) if plan.mode == "pytest" else set()
        )
    return decide(task, result, nonce, pot, expected, details)


def _has_files(evaluator: Path, target: str) -> bool:
    relative = target[len(EVALUATOR_DIR) + 1 :]
    path = evaluator.joinpath(*relative.split("/"))
    return path.is_file() or (path.is_dir() and any(path.rglob("*")))


def pytest_outcome(
    frame: dict[str, Any], pot: Honeypot, expected: set[tuple[str, str]]
) -> tuple[str | None, dict[str, Any]]:
    """(failure reason or None, details) from the junit cases, exit code and honeypot."""
    cases = [case for case in frame.get("cases") or [] if isinstance(case, list) and len(case) == 3]
    if "junit_error" in frame or not cases:
        return Reason.TESTS_FAILED, {"junit_error": frame.get("junit_error", "no test cases")}
    pots = [c for c in cases if c[0] == pot.classname and c[1].split("[")[0] == pot.function]
    if len(pots) != 1 or pots[0][2] != "failed":
        return Reason.TAMPER_DETECTED, {"honeypot": pots[0][2] if pots else "missing"}
    real = [c for c in cases if c not in pots]
    summary = {
        "tests_passed": sum(1 for c in real if c[2] == "passed"),
        "tests_total": len(real),
    }
    if frame.get("exit_code") == 0:  # the honeypot failed, yet pytest said all passed
        return Reason.TAMPER_DETECTED, {**summary, "honeypot": "exit code 0"}
    reported = {(c[0], c[1].split("[")[0]) for c in real}
    missing = sorted(f"{cls}::{name}" for cls, name in expected - reported)
    not_passed = [f"{c[0]}::{c[1]}" for c in real if c[2] != "passed"]
    if missing or not_passed or not real or frame.get("exit_code") != 1:
        return Reason.TESTS_FAILED, {**summary, "missing_tests": missing[:50]}
    return None, summary


def decide(
    task: TaskLanes,
    result: SandboxResult,
    nonce: str,
    pot: Honeypot,
    expected: set[tuple[str, str]],
    details: dict[str, Any],
) -> Verdict:
    fields = sandbox_fields(result, log_secrets(task))
    details = {**details, "sandbox_exit_code": result.exit_code}
    if reason := limit_reason(result):
        return failed(reason, details={**details, "phase": "sandbox"}, **fields)
    frame, problem = read_frame(result.stdout, nonce)
    if frame is None:
        details.update(phase="frame", frame_problem=problem)
        if problem == "forged" or CHECKER_STARTED in result.stderr:
            return failed(Reason.TAMPER_DETECTED, details=details, **fields)
        return error(Reason.INFRASTRUCTURE, details=details, **fields)
    details.update({key: frame[key] for key in _FRAME_KEYS if key in frame})
    if not frame.get("ok"):
        if frame.get("phase") == "checker_folder":
            return failed(Reason.TESTS_FAILED, details=details, **fields)
        return error(Reason.INFRASTRUCTURE, details=details, **fields)
    if not frame.get("spawned"):
        return error(Reason.TASK_MISCONFIGURED, details=details, **fields)
    if frame.get("mode") == "pytest":
        reason, more = pytest_outcome(frame, pot, expected)
        details.update(more)
        if reason is not None:
            return failed(reason, details=details, **fields)
    elif frame.get("exit_code") != 0:
        return failed(Reason.TESTS_FAILED, details=details, **fields)
    if (
        isinstance(task.hidden.get("expected_state"), dict)
        and "path" in task.hidden["expected_state"]
    ):
        reason, note = check_expected_state(task, result)
        details["expected_state"] = note
        if reason is not None:
            return failed(reason, details=details, **fields)
    return passed(details=details, **fields)
