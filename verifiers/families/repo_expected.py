"""The tests a repo_patch task names, which the candidate must make pass, each by itself.

Reading "nothing failed" off the junit report is not enough: the candidate's code runs in
the pytest process, and an unfixed bug can hide behind a hidden test that ends skipped
(``pytest.skip`` at import when the importer is a file the public repository did not have),
xfailed, or deselected by a plugin, none of which is a failure. So the tests the task itself
names must each be reported, and reported passed:

- every test function or class the trusted test patch adds or changes (a ``def test…`` or
  ``class Test…`` on an added line, or the function a changed hunk sits in, as git names it
  in the hunk header), in the test modules it touches;
- every node id the task's command names (``tests/test_x.py::test_y``).

A test the task names that ends skipped is the candidate's failure even where the skip is
the repository's own: such a task cannot be passed by anyone, and its oracle health check
says so to its author.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

ADDED_TEST = re.compile(r"^\+\s*(?:async\s+def|def|class)\s+((?:test|Test)\w*)")
HUNK_CONTEXT_TEST = re.compile(r"^@@ [^@]* @@.*?\b(?:def|class)\s+((?:test|Test)\w*)")
NEW_FILE = re.compile(r"^\+\+\+ (?:b/)?(.+?)\s*$")


@dataclass(frozen=True)
class ExpectedTest:
    module: str  # the test module's stem ("test_new"), as junit class names hold it
    name: str  # a test function, or a test class all of whose reported tests count
    shown: str  # how a verdict names it: "tests/test_new.py::test_add"


def expected_tests(test_patch: str, command: list[str]) -> list[ExpectedTest]:
    found: list[ExpectedTest] = []
    for expected in [*_from_patch(test_patch), *_from_command(command)]:
        if expected not in found:
            found.append(expected)
    return found


def _is_test_module(path: str) -> bool:
    name = posixpath.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _expected(path: str, name: str) -> ExpectedTest:
    stem = posixpath.basename(path)[: -len(".py")]
    return ExpectedTest(module=stem, name=name, shown=f"{path}::{name}")


def _from_patch(text: str) -> list[ExpectedTest]:
    found: list[ExpectedTest] = []
    path: str | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            path = None
            continue
        if line.startswith("+++ "):
            target = NEW_FILE.match(line)
            name = target.group(1) if target else ""
            path = name if name != "/dev/null" and _is_test_module(name) else None
            continue
        if path is None:
            continue
        match = ADDED_TEST.match(line) or HUNK_CONTEXT_TEST.match(line)
        if match:
            found.append(_expected(path, match.group(1)))
    return found


def _from_command(command: list[str]) -> list[ExpectedTest]:
    found: list[ExpectedTest] = []
    for word in command:
        path, _, rest = word.partition("::")
        if rest and _is_test_module(path):
            name = rest.split("::")[-1].split("[")[0]
            found.append(_expected(path, name))
    return found


def unmet(expected: list[ExpectedTest], cases: list[list[Any]]) -> list[str]:
    """Each named test not reported passed, with what it was reported as."""
    problems: list[str] = []
    for test in expected:
        outcomes = {str(case[2]) for case in cases if _reports(case, test)}
        if not outcomes:
            problems.append(f"{test.shown} (not run)")
        elif outcomes != {"passed"}:
            problems.append(f"{test.shown} ({', '.join(sorted(outcomes - {'passed'}))})")
    return problems


def _reports(case: list[Any], test: ExpectedTest) -> bool:
    """A junit case of this test: its module among the class name's parts, and the test as
    its name (parameters aside) or as its class."""
    parts = str(case[0]).split(".")
    if test.module not in parts:
        return False
    return str(case[1]).split("[")[0] == test.name or test.name in parts[parts.index(test.module) :]


__all__ = ["ExpectedTest", "expected_tests", "unmet"]
