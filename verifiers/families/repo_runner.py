"""Trusted in-sandbox driver for repo_patch (stdlib + git only; mounted read-only).

Runs as ``python3 -I /opt/securebench/runner/repo_runner.py`` inside ONE fresh sandbox with
its configuration as JSON on stdin; the repository is already in place (public assets, or
the image's own folder copied into the work dir). Phases: check HEAD == base_commit (when
it is a git repository; otherwise ``git init``), setup patch, baseline commit, candidate
patch (``git apply``, never ``--unsafe-paths``), list what really changed, restore test
files from the baseline, test patch, then the test command as an argument list. A pytest
command also gets a junit report and the verifier's guard: a test file the host wrote
(canary and honeypot, see repo_pytest_guard.py) planted next to the task's tests, and the
guard plugin loaded with ``-p`` from its read-only mount.

The host must be able to trust what this script reports although candidate code runs in
the same sandbox (inside the test command). So:

* the test command is a child whose stdin is /dev/null and whose stdout AND stderr go to
  this script's stderr: it never holds this script's stdout;
* this script makes itself non-dumpable first, so same-uid code cannot open
  /proc/<pid>/fd/1 or read its memory (the nonce it got on stdin stays private);
* after the child exits every other process of the sandbox is SIGKILLed, then exactly ONE
  frame (``SECUREBENCH-FRAME <json with the nonce>``) is written to stdout.

Older Python versions in pack images must be able to run this file: no match statements,
no runtime use of ``X | Y`` types.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any
from xml.etree import ElementTree

FRAME_PREFIX = "SECUREBENCH-FRAME "
MAX_JUNIT_BYTES = 8 * 1024 * 1024
MAX_CASES = 5000
GUARD_TESTS_ENV = "SECUREBENCH_GUARD_TESTS"  # repo_pytest_guard.TESTS_ENV
GIT_CONFIG = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=",
    "-c",
    "safe.directory=*",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "user.name=SecureBench",
    "-c",
    "user.email=securebench@example.invalid",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.symlinks=true",
]
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
}
_frame_written = False


# --- shared supervision helpers (terminal_runner imports these) ------------------------------


def make_undumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0): /proc/<self>/fd and /mem become closed to same-uid code."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - best effort; the nonce still guards the frame
        return False


def read_config() -> dict[str, Any]:
    data = sys.stdin.buffer.read()
    config = json.loads(data.decode("utf-8"))
    if not isinstance(config, dict) or not isinstance(config.get("nonce"), str):
        raise ValueError("configuration must be an object with a nonce")
    return config


def log(message: str) -> None:
    sys.stderr.write("securebench: " + message + "\n")
    sys.stderr.flush()


def write_frame(nonce: str, payload: dict[str, Any]) -> None:
    """The one trusted report. Written at most once, always as the last thing."""
    global _frame_written
    if _frame_written:
        return
    _frame_written = True
    body = dict(payload)
    body["nonce"] = nonce
    sys.stdout.write(FRAME_PREFIX + json.dumps(body, sort_keys=True) + "\n")
    sys.stdout.flush()


def _ancestors() -> set[int]:
    pids = {os.getpid()}
    pid = os.getpid()
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            break
        fields = stat[stat.rfind(")") + 2 :].split()
        parent = int(fields[1]) if len(fields) > 1 else 0
        if parent <= 0 or parent in pids:
            break
        pids.add(parent)
        pid = parent
    return pids


def kill_others(rounds: int = 20) -> int:
    """SIGKILL every process of this sandbox except us and our ancestors; returns how many."""
    keep = _ancestors()
    killed = 0
    for _ in range(rounds):
        found = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in keep:
                continue
            try:
                os.kill(int(entry), signal.SIGKILL)
                found += 1
            except (ProcessLookupError, PermissionError):
                continue
        killed += found
        if not found:
            break
        time.sleep(0.05)
    return killed


def run_child(argv: list[str], cwd: str, env: dict[str, str]) -> dict[str, Any]:
    """Run untrusted work: stdin /dev/null, stdout+stderr → our stderr, never our stdout."""
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(),
            stderr=sys.stderr.fileno(),
            close_fds=True,
            start_new_session=True,
        )
    except OSError as exc:
        return {"spawned": False, "spawn_error": f"{type(exc).__name__}: {exc}"}
    code = process.wait()
    killed = kill_others()
    return {
        "spawned": True,
        "exit_code": code,
        "killed_leftovers": killed,
        "seconds": round(time.monotonic() - started, 3),
    }


def read_junit(path: str) -> dict[str, Any]:
    """Per-testcase outcomes (classname, name, outcome) from the junit file."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
    except OSError as exc:
        return {"junit_error": f"no junit report: {exc}"}
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_JUNIT_BYTES + 1)
    if len(data) > MAX_JUNIT_BYTES:
        return {"junit_error": "junit report too large"}
    try:
        # Parsed inside the sandbox: a hostile document can only hurt the sandbox itself.
        root = ElementTree.fromstring(data)  # noqa: S314
    except ElementTree.ParseError as exc:
        return {"junit_error": f"junit report unreadable: {exc}"}
    cases = []
    for case in root.iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                break
            if child.tag == "skipped":
                outcome = "skipped"
        cases.append([case.get("classname", ""), case.get("name", ""), outcome])
        if len(cases) >= MAX_CASES:
            break
    return {"cases": cases}


def is_pytest_command(argv: list[str]) -> bool:
    """``pytest ...``, ``py.test ...`` or ``<python> [-flags] -m pytest ...``."""
    if not argv:
        return False
    if os.path.basename(argv[0]) in ("pytest", "py.test"):
        return True
    return any(argv[i] == "-m" and argv[i + 1] == "pytest" for i in range(len(argv) - 1))


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key in ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
    }
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


# --- git ---------------------------------------------------------------------------------


class PhaseFailed(Exception):
    def __init__(self, phase: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.phase = phase
        self.details = details


def git(repo: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = child_env(GIT_ENV)
    return subprocess.run(
        ["git", *GIT_CONFIG, *args],
        cwd=repo,
        env=env,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        check=False,
    )


def git_ok(repo: str, phase: str, *args: str, stdin: bytes | None = None) -> bytes:
    result = git(repo, *args, stdin=stdin)
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace")[-2000:]
        raise PhaseFailed(phase, message.strip() or f"git {args[0]} failed")
    return result.stdout


def apply_patch(repo: str, phase: str, patch: str) -> None:
    if patch:
        git_ok(repo, phase, "apply", "--binary", "--whitespace=nowarn", "-", stdin=patch.encode())


def is_git_repo(repo: str) -> bool:
    return os.path.isdir(os.path.join(repo, ".git"))


def check_base_commit(repo: str, base_commit: str) -> dict[str, Any]:
    head = git_ok(repo, "base_commit", "rev-parse", "HEAD").decode().strip()
    if head != base_commit:
        raise PhaseFailed(
            "base_commit",
            f"repository HEAD {head} is not base_commit {base_commit}",
            image_commit=head,
            base_commit=base_commit,
        )
    return {"image_commit": head}


def commit_baseline(repo: str) -> None:
    git_ok(repo, "verifier_baseline", "add", "--all", "--force")
    git_ok(
        repo,
        "verifier_baseline",
        "commit",
        "--quiet",
        "--no-verify",
        "--allow-empty",
        "--no-gpg-sign",
        "-m",
        "securebench baseline",
    )


def changed_paths(repo: str) -> list[str]:
    """Tracked changes vs HEAD plus untracked AND ignored files (renames split in two)."""
    out = git_ok(
        repo,
        "candidate_paths",
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignored=matching",
        "--no-renames",
    )
    paths = []
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        if len(entry) > 3:
            paths.append(entry[3:])
    return sorted(set(paths))


def restore_from_baseline(repo: str, paths: list[str]) -> list[str]:
    """Put trusted baseline versions back (or remove files the baseline lacks)."""
    restored = []
    for path in paths:
        exists = git(repo, "cat-file", "-e", "HEAD:" + path).returncode == 0
        if exists:
            git_ok(repo, "restore_tests", "checkout", "HEAD", "--", path)
        else:
            target = os.path.join(repo, path)
            if os.path.lexists(target) and not os.path.isdir(target):
                os.unlink(target)
        restored.append(path)
    return restored


# --- phases ----------------------------------------------------------------------------------


def prepare(config: dict[str, Any]) -> dict[str, Any]:
    repo = config["repo_dir"]
    info: dict[str, Any] = {}
    # An empty folder: the image had nothing at its workdir (the sandbox made the folder).
    if not os.path.isdir(repo) or not os.listdir(repo):
        raise PhaseFailed("repository", f"no repository at {repo}")
    if is_git_repo(repo):
        info.update(check_base_commit(repo, config["base_commit"]))
        info["base_commit_checked"] = True
    else:
        git_ok(repo, "repository", "init", "--quiet")
        info["base_commit_checked"] = False
    apply_patch(repo, "setup_patch", config.get("setup_patch") or "")
    commit_baseline(repo)
    return info


def apply_candidate(config: dict[str, Any]) -> dict[str, Any]:
    repo = config["repo_dir"]
    apply_patch(repo, "candidate_patch", config["candidate_patch"])
    actual = changed_paths(repo)
    declared = set(config["declared_paths"])
    undeclared = [path for path in actual if path not in declared]
    if undeclared:
        raise PhaseFailed(
            "candidate_paths",
            "patch changed paths it did not declare: " + ", ".join(undeclared[:50]),
            actual_paths=actual[:1000],
            undeclared_paths=undeclared[:1000],
        )
    wanted = set(config.get("restore_paths") or [])
    restored = restore_from_baseline(repo, [path for path in actual if path in wanted])
    apply_patch(repo, "test_patch", config.get("test_patch") or "")
    return {"actual_paths": actual[:1000], "restored_paths": restored}


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _write_new(path: str, text: str) -> bool:
    """Create ``path`` (never through a link, never over a file); False if that fails."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def plant_guard(guard: dict[str, Any], repo: str) -> str:
    """Write the guard's test file into the first of the host's folders that is a real
    folder of the repository (the task's test folder: a forgery limited to the task's
    tests reaches it too), else into a fresh private folder. No candidate code has run
    yet, so the folders checked here are the folders written to."""
    root = os.path.realpath(repo)
    for folder in guard.get("dirs") or []:
        real = os.path.realpath(folder)
        if not _inside(real, root) or not os.path.isdir(real):
            continue
        path = os.path.join(real, guard["file"])
        if _write_new(path, guard["source"]):
            return path
    path = os.path.join(tempfile.mkdtemp(prefix="securebench-guard-"), guard["file"])
    if not _write_new(path, guard["source"]):
        raise RuntimeError("cannot write the guard's test file")
    return path


def guard_command(
    guard: dict[str, Any], path: str, command: list[str], env: dict[str, str]
) -> list[str]:
    """The pytest command with the guard plugin loaded; ``env`` gets its import path."""
    paths = [entry for entry in env.get("PYTHONPATH", "").split(":") if entry]
    env["PYTHONPATH"] = ":".join(paths + [guard["module_dir"]])
    env[GUARD_TESTS_ENV] = path
    return command + ["-p", guard["module"]]


def tests_command(
    config: dict[str, Any], report: dict[str, Any]
) -> tuple[list[str], dict[str, str], str | None]:
    """The command, its environment and (pytest) the junit path it will write."""
    env = child_env(config.get("test_env") or {})
    command = list(config["command"])
    if not is_pytest_command(command):
        return command, env, None
    guard = config.get("guard")
    if guard:
        report["guard_file"] = plant_guard(guard, config["repo_dir"])
        command = guard_command(guard, report["guard_file"], command, env)
        # The log's reader sees one failure in a passing run: say why, not which test.
        log("planted " + report["guard_file"] + ": two guard tests, one failing by design")
    # A structured report written by pytest, read after every process is dead: exiting 0
    # before the tests ran (A05) leaves no report and fails.
    junit = os.path.join(tempfile.mkdtemp(prefix="securebench-results-"), "junit.xml")
    return command + ["--junitxml", junit], env, junit


def main() -> int:
    undumpable = make_undumpable()
    config = read_config()
    nonce = config["nonce"]
    report: dict[str, Any] = {"undumpable": undumpable}
    try:
        report.update(prepare(config))
        report.update(apply_candidate(config))
        command, env, junit = tests_command(config, report)
    except PhaseFailed as exc:
        report.update(exc.details)
        write_frame(nonce, dict(report, phase=exc.phase, ok=False, message=str(exc)))
        return 0
    except Exception as exc:  # noqa: BLE001 - reported as our own fault
        log(traceback.format_exc())
        write_frame(nonce, dict(report, phase="internal", ok=False, message=repr(exc)))
        return 0
    log("running the test command")
    result = run_child(command, config["test_cwd"], env)
    report.update(result)
    if junit is not None:
        report["junit"] = read_junit(junit)
    write_frame(nonce, dict(report, phase="tests", ok=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
