"""Trusted in-sandbox driver for terminal_task checkers (stdlib only; mounted read-only).

Runs as ``python3 -I /opt/securebench/runner/terminal_runner.py`` with its configuration as
JSON on stdin, and starts the checker as a child (see repo_runner for why the child never
holds our stdout and why we are non-dumpable). Checker forms:

* ``pytest``: the child is this same file in ``--pytest-child`` mode under ``python3 -I``:
  it drops every workspace path from ``sys.path`` (isolated mode already ignores cwd,
  PYTHONPATH and user site), imports the image's pytest (else the read-only pylib mount)
  and runs it with plugin autoloading off, no cache provider, ``-c /dev/null``, rootdir and
  confcutdir at the trusted tree, plus a planted must-fail honeypot; results go to a junit
  file outside the workspace, read here only after every other process is killed;
* ``script``: ``bash <target>`` with ``TEST_DIR``;
* ``command``: the task's argument list (a string runs under ``sh -c``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from typing import Any

if __package__:  # imported on the host as verifiers.families.terminal_runner
    from verifiers.families.repo_runner import (
        child_env,
        log,
        make_undumpable,
        read_config,
        read_junit,
        run_child,
        write_frame,
    )
else:  # run inside the sandbox next to repo_runner.py (``-I`` leaves our folder off sys.path)
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    from repo_runner import (  # type: ignore[no-redef]
        child_env,
        log,
        make_undumpable,
        read_config,
        read_junit,
        run_child,
        write_frame,
    )

PYTEST_CHILD = "--pytest-child"


def pytest_child(argv: list[str]) -> int:
    """``terminal_runner.py --pytest-child <workdir> <pylib> -- <pytest args>``."""
    workdir, pylib = os.path.realpath(argv[0]), argv[1]
    args = argv[3:]
    cwd = os.path.realpath(os.getcwd())
    here = os.path.dirname(os.path.realpath(__file__))

    def candidate_owned(entry: str) -> bool:
        real = os.path.realpath(entry or ".")
        return (
            entry in ("", ".")
            or real in (cwd, here, workdir)
            or real.startswith(workdir.rstrip("/") + "/")
        )

    sys.path[:] = [entry for entry in sys.path if not candidate_owned(entry)]
    try:
        import pytest
    except ImportError:
        sys.path.append(pylib)
        import pytest
    return int(pytest.main(args))


def pytest_argv(config: dict[str, Any], junit: str) -> list[str]:
    pytest = config["pytest"]
    return [
        sys.executable,
        "-I",
        os.path.realpath(__file__),
        PYTEST_CHILD,
        config["workdir"],
        pytest["pylib"],
        "--",
        "-p",
        "no:cacheprovider",
        "-c",
        "/dev/null",
        "--rootdir",
        pytest["rootdir"],
        "--confcutdir",
        pytest["confcutdir"],
        "-q",
        "-rA",
        "--tb=short",
        "-o",
        "junit_family=xunit2",
        "--junitxml",
        junit,
        *pytest["targets"],
    ]


def checker_argv(config: dict[str, Any]) -> list[str]:
    if config["mode"] == "script":
        return ["bash", config["target"]]
    command = config["command"]
    return ["sh", "-c", command] if isinstance(command, str) else list(command)


def main() -> int:
    undumpable = make_undumpable()
    config = read_config()
    nonce = config["nonce"]
    report: dict[str, Any] = {"undumpable": undumpable, "mode": config["mode"]}
    cwd = config["cwd"]
    try:
        os.makedirs(cwd, exist_ok=True)
    except OSError as exc:
        # Inside the workspace, something of the candidate's stands where the checker's
        # folder goes (a file named like it): the candidate's failure, not ours.
        inside = (cwd + "/").startswith(config["workdir"].rstrip("/") + "/")
        message = f"the checker's folder {cwd} cannot be made: {exc.strerror}"
        phase = "checker_folder" if inside else "internal"
        write_frame(nonce, dict(report, phase=phase, ok=False, message=message))
        return 0
    try:
        env = child_env(config.get("env") or {})
        log("running the checker")
        if config["mode"] == "pytest":
            results = tempfile.mkdtemp(prefix="securebench-results-")
            junit = os.path.join(results, "junit.xml")
            report.update(run_child(pytest_argv(config, junit), cwd, env))
            report.update(read_junit(junit))
        else:
            report.update(run_child(checker_argv(config), cwd, env))
    except Exception as exc:  # noqa: BLE001 - reported as our own fault
        log(traceback.format_exc())
        write_frame(nonce, dict(report, phase="internal", ok=False, message=repr(exc)))
        return 0
    write_frame(nonce, dict(report, phase="checker", ok=True))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == PYTEST_CHILD:
        sys.exit(pytest_child(sys.argv[2:]))
    sys.exit(main())
