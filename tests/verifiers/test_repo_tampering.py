"""Forged pytest outcomes in repo_patch: the guard's canary and honeypot (security.md A02-A05,
A08) on both backends.

The tests import the candidate's package into the pytest process, so a patch that stays
inside the allowed paths can still rewrite what pytest reports. Each forgery below must come
out ``tamper_detected``; the real fix, next to the same planted tests, must still pass, also
under the task's own ``-k`` and ``-x``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.verifiers import test_repo_patch as repo_tests
from tests.verifiers.test_repo_patch import (
    FIXED_LIB,
    IMAGE_COMMANDS,
    LIB,
    NEW_TEST,
    ROOT_CONFTEST,
    diff_of,
    gold,
    tiny_task,
)
from verifiers.adversarial import FORCED_OUTCOME
from verifiers.families import repo_patch
from verifiers.sandbox import Sandbox
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Reason, Verdict

sandbox = repo_tests.sandbox  # backend-parametrized, checks no scratch folder is left
repo = repo_tests.repo  # a tiny git repository whose add() subtracts

Repo = tuple[Path, str]


def verify(repo: Repo, task: TaskLanes, changes: dict[str, str], sandbox: Sandbox) -> Verdict:
    """The verdict on a patch making ``changes`` to the public repository."""
    patch = diff_of(repo[0], changes)
    return repo_patch.verify(task, Candidate.of_patch(patch), sandbox=sandbox)


def assert_tampering(verdict: Verdict, **guard: str) -> None:
    assert (verdict.status, verdict.reason) == ("failed", Reason.TAMPER_DETECTED), (
        verdict.reason,
        verdict.details,
        verdict.stderr[-1500:],
    )
    for key, value in guard.items():
        assert verdict.details[key] == value, verdict.details


# --- the blanket forgery that passed before the guard ------------------------------------------


@pytest.mark.parametrize("command", IMAGE_COMMANDS.values(), ids=IMAGE_COMMANDS.keys())
def test_package_code_forcing_every_report_to_passed_is_tampering(
    sandbox: Sandbox, repo: Repo, command: list[str]
) -> None:
    test_patch = diff_of(repo[0], {"tests/test_new.py": NEW_TEST, "conftest.py": ROOT_CONFTEST})
    task = tiny_task(repo, command=command, test_patch=test_patch)

    forced = verify(repo, task, {"mylib/__init__.py": LIB + FORCED_OUTCOME}, sandbox)
    fixed = repo_patch.verify(task, gold(repo), sandbox=sandbox)

    assert_tampering(forced, honeypot="passed")
    assert fixed.status == "passed", (fixed.reason, fixed.details, fixed.stderr[-1500:])
    assert (fixed.details["honeypot"], fixed.details["canary"]) == ("failed", "passed")
    assert (fixed.details["tests_passed"], fixed.details["tests_total"]) == (2, 2)
    assert fixed.details["guard_file"].startswith("/workspace/repo/tests/test_")


# --- other routes to a forged pass --------------------------------------------------------------

# A distribution the patch adds at the repository root: `python -m pytest` has the root on
# sys.path, so pytest's plugin autoloading imports its pytest11 entry point.
DIST_INFO = {
    "forge-0.dist-info/METADATA": "Metadata-Version: 2.1\nName: forge\nVersion: 0\n",
    "forge-0.dist-info/entry_points.txt": "[pytest11]\nforge = forge_plugin\n",
}
PLUGIN_FORCING_PASSES = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    outcome.get_result().outcome = 'passed'\n"
)
# Keeps only the tests of files the public repository has: the hidden test patch's new file
# (and anything else unknown) is deselected, politely reported to pytest as such, late
# (trylast), and the run exits 1 as one whose honeypot failed would.
PLUGIN_DROPPING_UNKNOWN_TESTS = (
    "import atexit, os\n\n"
    "import pytest\n\n"
    "atexit.register(os._exit, 1)\n\n\n"
    "@pytest.hookimpl(trylast=True)\n"
    "def pytest_collection_modifyitems(config, items):\n"
    "    known = [i for i in items if i.nodeid.startswith('tests/test_old.py')]\n"
    "    config.hook.pytest_deselected(items=[i for i in items if i not in known])\n"
    "    items[:] = known\n"
)
# pytest's junit writer, taken from sys.modules, stops writing failures: the report says
# every test passed while pytest itself still exits 1.
WRITER_DROPPING_FAILURES = (
    "import sys\n\n"
    "_junit = sys.modules.get('_pytest.junitxml')\n"
    "if _junit is not None:\n"
    "    _junit._NodeReporter.append_failure = lambda self, report: None\n\n"
)
# The report file rewritten after pytest wrote it, its failures cut out.
REPORT_REWRITTEN_AT_EXIT = (
    "import atexit, re, sys\n\n\n"
    "def _rewrite():\n"
    "    path = sys.argv[sys.argv.index('--junitxml') + 1]\n"
    "    with open(path) as handle:\n"
    "        text = handle.read()\n"
    "    text = re.sub(r'<failure.*?</failure>', '', text, flags=re.S)\n"
    "    with open(path, 'w') as handle:\n"
    "        handle.write(text)\n\n\n"
    "if '--junitxml' in sys.argv:\n"
    "    atexit.register(_rewrite)\n\n"
)
ROUTES = {
    "entry-point-plugin-forcing-passes": (
        {**DIST_INFO, "forge_plugin.py": PLUGIN_FORCING_PASSES},
        {"honeypot": "passed"},
    ),
    "entry-point-plugin-dropping-unknown-tests": (
        {**DIST_INFO, "forge_plugin.py": PLUGIN_DROPPING_UNKNOWN_TESTS},
        {"honeypot": "missing", "canary": "missing"},
    ),
    "junit-writer-patched-in-sys-modules": (
        {"mylib/__init__.py": WRITER_DROPPING_FAILURES + LIB},
        {"honeypot": "passed"},
    ),
    "report-file-rewritten-at-exit": (
        {"mylib/__init__.py": REPORT_REWRITTEN_AT_EXIT + LIB},
        {"honeypot": "passed"},
    ),
}


@pytest.mark.parametrize(("changes", "guard"), ROUTES.values(), ids=ROUTES.keys())
def test_other_routes_to_a_forged_pass_are_tampering(
    sandbox: Sandbox, repo: Repo, changes: dict[str, str], guard: dict[str, str]
) -> None:
    verdict = verify(repo, tiny_task(repo), changes, sandbox)

    assert_tampering(verdict, **guard)


def test_an_exit_status_forged_to_zero_is_tampering(sandbox: Sandbox, repo: Repo) -> None:
    # Every report is real (the fix is right), but the status is not: with the honeypot
    # failed, pytest exits 1; a 0 came from somewhere else.
    forge_status = "import atexit, os\n\natexit.register(os._exit, 0)\n" + FIXED_LIB
    verdict = verify(repo, tiny_task(repo), {"mylib/__init__.py": forge_status}, sandbox)

    assert_tampering(verdict, honeypot="failed", canary="passed")
    assert verdict.details["exit_code"] == 0
    assert verdict.details["exit_code_problem"]


# --- the task's own options keep the planted tests --------------------------------------------


@pytest.mark.parametrize("options", [["-k", "old or new"], ["-x"]], ids=["keyword", "exitfirst"])
def test_the_tasks_selection_options_keep_the_planted_tests(
    sandbox: Sandbox, repo: Repo, options: list[str]
) -> None:
    # No planted name can match "old or new" (hex digits only): without the guard holding
    # its tests back from pytest's selection, -k would drop them.
    task = tiny_task(repo, command=["python3", "-m", "pytest", "-q", *options, "tests"])

    fixed = repo_patch.verify(task, gold(repo), sandbox=sandbox)
    unfixed = verify(repo, task, {"README.md": "tiny, now documented\n"}, sandbox)

    assert fixed.status == "passed", (fixed.reason, fixed.details, fixed.stderr[-1500:])
    assert (fixed.details["honeypot"], fixed.details["canary"]) == ("failed", "passed")
    assert fixed.details["tests_total"] == 2  # the guard's tests ran last, after all others
    # a real failure stays a plain test failure, even where -x stopped before the guard
    assert (unfixed.status, unfixed.reason) == ("failed", Reason.TESTS_FAILED), unfixed.details


def test_a_plugin_dropping_unknown_tests_is_caught_beside_the_tasks_own_selection(
    sandbox: Sandbox, repo: Repo
) -> None:
    # With -k the planted tests are held back from pytest's own selection, but only after
    # the plugins registered later (the candidate's) have had their turn at the list.
    task = tiny_task(repo, command=["python3", "-m", "pytest", "-q", "-k", "old or new", "tests"])
    plugin = PLUGIN_DROPPING_UNKNOWN_TESTS.replace("@pytest.hookimpl(trylast=True)\n", "")
    changes = {**DIST_INFO, "forge_plugin.py": plugin}

    assert_tampering(verify(repo, task, changes, sandbox), honeypot="missing", canary="missing")


def test_planted_names_are_drawn_afresh_and_the_canary_runs_first() -> None:
    guards = [repo_patch.Guard.new() for _ in range(20)]

    assert len({(g.module, g.file, g.canary, g.honeypot) for g in guards}) == 20
    assert all(g.canary < g.honeypot for g in guards)  # unittest runs them in name order


# --- the task's own tests kept from running -----------------------------------------------------
# Nothing is forged here: the candidate's code keeps the hidden test from counting, and an
# unfixed add() stands. Each must fail as tests that did not pass, naming the hidden test.

# Skips (at module level) any test module the public repository did not have: the importer
# is found on the stack, so the guard's file, which never imports the package, runs as usual.
SKIPPING_UNKNOWN_IMPORTERS = (
    "import os, sys\n\n"
    "_frame = sys._getframe(1)\n"
    "while _frame is not None and not os.path.basename(_frame.f_code.co_filename).startswith("
    "'test_'):\n"
    "    _frame = _frame.f_back\n"
    "if _frame is not None and os.path.basename(_frame.f_code.co_filename) != 'test_old.py':\n"
    "    import pytest\n\n"
    "    pytest.skip('needs a newer platform', allow_module_level=True)\n\n"
)
XFAIL_FOR_UNKNOWN_CALLERS = (
    "import os, sys\n\n\n"
    "def add(a, b):\n"
    "    if os.path.basename(sys._getframe(1).f_code.co_filename) != 'test_old.py':\n"
    "        import pytest\n\n"
    "        pytest.xfail('known issue')\n"
    "    return a - b\n"
)
# Deselects every test but the public ones and the guard's (found by its planted name).
PLUGIN_DROPPING_UNKNOWN_BUT_THE_GUARDS = (
    "import os\n\n"
    "import pytest\n\n\n"
    "@pytest.hookimpl(trylast=True)\n"
    "def pytest_collection_modifyitems(config, items):\n"
    "    guard = os.path.basename(os.environ.get('SECUREBENCH_GUARD_TESTS', '-'))\n"
    "    kept = [i for i in items\n"
    "            if i.nodeid.startswith('tests/test_old.py') or guard in i.nodeid]\n"
    "    config.hook.pytest_deselected(items=[i for i in items if i not in kept])\n"
    "    items[:] = kept\n"
)
KEEPING_HIDDEN_TESTS_FROM_COUNTING = {
    # a module skipped whole reports no test of its own
    "skipped-at-import": ({"mylib/__init__.py": SKIPPING_UNKNOWN_IMPORTERS + LIB}, "not run"),
    "xfailed-when-called": ({"mylib/__init__.py": XFAIL_FOR_UNKNOWN_CALLERS}, "skipped"),
    "deselected-by-a-plugin": (
        {**DIST_INFO, "forge_plugin.py": PLUGIN_DROPPING_UNKNOWN_BUT_THE_GUARDS},
        "not run",
    ),
}


@pytest.mark.parametrize(
    ("changes", "outcome"),
    KEEPING_HIDDEN_TESTS_FROM_COUNTING.values(),
    ids=KEEPING_HIDDEN_TESTS_FROM_COUNTING.keys(),
)
def test_a_hidden_test_kept_from_running_fails_the_candidate(
    sandbox: Sandbox, repo: Repo, changes: dict[str, str], outcome: str
) -> None:
    verdict = verify(repo, tiny_task(repo), changes, sandbox)

    assert (verdict.status, verdict.reason) == ("failed", Reason.TESTS_FAILED), (
        verdict.reason,
        verdict.details,
        verdict.stderr[-1500:],
    )
    problem = verdict.details["junit_problem"]
    assert f"tests/test_new.py::test_add ({outcome})" in problem, problem


def test_a_test_the_command_names_must_pass_too(sandbox: Sandbox, repo: Repo) -> None:
    command = ["python", "-m", "pytest", "-q", "tests/test_old.py::test_add_zero", "tests"]
    task = tiny_task(repo, command=command)
    skipping = "def add(a, b):\n    import pytest\n\n    pytest.skip('not on this platform')\n"
    skipped = {"mylib/__init__.py": skipping}

    verdict = verify(repo, task, skipped, sandbox)
    fixed = repo_patch.verify(task, gold(repo), sandbox=sandbox)

    assert (verdict.status, verdict.reason) == ("failed", Reason.TESTS_FAILED), (
        verdict.details,
        verdict.stderr[-2000:],
    )
    assert "tests/test_old.py::test_add_zero (skipped)" in verdict.details["junit_problem"]
    assert fixed.status == "passed", (fixed.reason, fixed.details, fixed.stderr[-1500:])
