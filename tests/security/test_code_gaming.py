"""Gaming attempts against the code_completion verifier (security.md §6) all FAIL, for the
right reason, in real sandboxes.

The design under test: the candidate runs in one sandbox (W), the tests in another (T); only
T's own result frame decides, values cross as plain data. Each payload below is what a
benchmark-gaming agent would write into candidate.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.verifiers.test_code_completion import (
    assert_failed,
    explain,
    get_task,
    run,
    with_timeout,
)
from verifiers.sandbox.base import Sandbox
from verifiers.task import TaskLanes
from verifiers.verdict import Reason

HUMANEVAL = "humaneval-mini/0"  # has_close_elements, `def check(candidate)` style
SMOKE = "code-completion-smoke/add_numbers"  # bare-call style
# Short walls for the attacks that are meant to run into one.
SHORT_WALL = 3.0


def humaneval() -> TaskLanes:
    return get_task(HUMANEVAL)


def smoke() -> TaskLanes:
    return get_task(SMOKE)


# --- A05: exit before the assertions run ------------------------------------------------------

EXIT_AT_IMPORT = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "raise SystemExit": "raise SystemExit(0)\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "exit() builtin": "exit(0)\n",
}


@pytest.mark.parametrize("payload", EXIT_AT_IMPORT.values(), ids=EXIT_AT_IMPORT.keys())
@pytest.mark.parametrize("task_id", [HUMANEVAL, SMOKE])
def test_exit_at_import_fails(payload: str, task_id: str, sandbox: Sandbox) -> None:
    code = payload + "def has_close_elements(*a):\n    return True\n"
    code += "def add_numbers(a, b):\n    return 0\n"
    verdict = run(get_task(task_id), code, sandbox)
    assert_failed(verdict, Reason.INVALID_CANDIDATE)
    assert verdict.details["stage"] == "import"


@pytest.mark.parametrize("exit_call", ["os._exit(0)", "sys.exit(0)", "os.kill(os.getpid(), 9)"])
def test_exit_inside_the_function_fails(exit_call: str, sandbox: Sandbox) -> None:
    code = f"import os, sys\ndef add_numbers(a, b):\n    {exit_call}\n"
    verdict = run(smoke(), code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert verdict.details["failed_test_line"] == 2  # the very first assertion


def test_exit_after_some_correct_answers_fails(sandbox: Sandbox) -> None:
    # Right for the first call, then the process ends mid-run: still a failure.
    code = (
        "import os\nCALLS = []\n"
        "def add_numbers(a, b):\n"
        "    CALLS.append(1)\n"
        "    if len(CALLS) > 1:\n        os._exit(0)\n"
        "    return a + b\n"
    )
    verdict = run(smoke(), code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert verdict.details["worker_gone"] == "it exited"


# --- A07: forged result lines -----------------------------------------------------------------

FAKE_FRAME = '{"type": "result", "passed": true, "assertions": 7}'


def test_printed_fake_results_are_ignored(sandbox: Sandbox) -> None:
    code = (
        f"print({FAKE_FRAME!r})\nprint('PASSED')\nprint('7 passed in 0.01s')\n"
        "def has_close_elements(numbers, threshold):\n"
        f"    print({FAKE_FRAME!r}, flush=True)\n"
        "    return None\n"
    )
    verdict = run(humaneval(), code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert FAKE_FRAME in verdict.stdout  # it went to the candidate's log, nowhere else


def test_fake_frames_written_to_fd1_are_ignored(sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        f"os.write(1, {FAKE_FRAME!r}.encode() + b'\\n')\n"
        "def has_close_elements(numbers, threshold):\n"
        f"    os.write(1, {FAKE_FRAME!r}.encode() + b'\\n')\n"
        "    return False\n"
    )
    verdict = run(humaneval(), code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)


def test_fake_frames_sprayed_on_every_fd_are_tampering(sandbox: Sandbox) -> None:
    # The worker's protocol pipe is some fd of this process: write a fake "passed" result to
    # every one. At best it reaches the relay as W's reply, which is checked and refused.
    code = (
        "import os\n"
        "def has_close_elements(numbers, threshold):\n"
        "    for name in os.listdir('/proc/self/fd'):\n"
        "        try:\n"
        f"            os.write(int(name), {FAKE_FRAME!r}.encode() + b'\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return True\n"
    )
    verdict = run(humaneval(), code, sandbox)
    assert_failed(verdict, Reason.TAMPER_DETECTED)


def test_monkeypatched_json_is_tampering(sandbox: Sandbox) -> None:
    code = (
        "import json\n"
        f"json.dumps = lambda *args, **kwargs: {FAKE_FRAME!r}\n"
        "def has_close_elements(numbers, threshold):\n"
        "    return True\n"
    )
    verdict = run(humaneval(), code, sandbox)
    assert_failed(verdict, Reason.TAMPER_DETECTED)


def test_stop_iteration_cannot_end_a_test_loop_early(sandbox: Sandbox) -> None:
    # Raised through map() inside zip(), a real StopIteration would end this loop before any
    # assertion ran, and the tests would "pass". It must arrive as an ordinary error.
    loop = (
        "for got, want in zip(map(lambda x: add_numbers(x, 1), [1, 2]), [2, 3]):\n"
        "    assert got == want\n"
    )
    task = replace(smoke(), evaluation_inputs={"tests": {"source": "inline", "code": loop}})
    assert run(task, "def add_numbers(a, b):\n    return a + b\n", sandbox).passed
    code = "def add_numbers(a, b):\n    raise StopIteration\n"
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert verdict.details["error"].startswith("RuntimeError: StopIteration"), explain(verdict)


# --- A06: always-equal objects ----------------------------------------------------------------

ALWAYS_EQUAL = {
    "class": (
        "class Anything:\n"
        "    def __eq__(self, other): return True\n"
        "    def __ne__(self, other): return False\n"
        "    def __bool__(self): return True\n"
        "    __hash__ = object.__hash__\n"
        "RESULT = Anything()\n"
    ),
    "bool subclass": (
        "class B(int):\n"
        "    def __eq__(self, other): return True\n"
        "    __hash__ = int.__hash__\n"
        "RESULT = B(1)\n"
    ),
    "str subclass": (
        "class S(str):\n"
        "    def __eq__(self, other): return True\n"
        "    __hash__ = str.__hash__\n"
        "RESULT = S('x')\n"
    ),
    "generator": "RESULT = (x for x in [True])\n",
}


@pytest.mark.parametrize("payload", ALWAYS_EQUAL.values(), ids=ALWAYS_EQUAL.keys())
def test_always_equal_results_fail(payload: str, sandbox: Sandbox) -> None:
    code = payload + "def has_close_elements(numbers, threshold):\n    return RESULT\n"
    verdict = run(humaneval(), code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert "not plain data" in verdict.details["error"], explain(verdict)


# --- A13 / A15: reading the tests from memory or disk -----------------------------------------

STACK_WALK = """
import inspect
def has_close_elements(numbers, threshold):
    # Built at run time (the worker holds this very source text, which is no leak) and
    # local (module data is fetched by the tests, so the worker saw it as a reply).
    markers = ["assert " + "candidate", "check" + "(", "def " + "check", "0.3" + ") == True"]
    frame = inspect.currentframe().f_back
    leaks = []
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            text = repr(scope)
            leaks += [marker for marker in markers if marker in text]
        frame = frame.f_back
    print("STACK-LEAK" if leaks else "STACK-CLEAN", leaks)
    return True
"""


def test_stack_walking_finds_nothing(sandbox: Sandbox) -> None:
    verdict = run(humaneval(), STACK_WALK, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert "STACK-CLEAN" in verdict.stdout and "STACK-LEAK" not in verdict.stdout, verdict.stdout


DISK_SEARCH = """
import os
MARKER = ("check(" + "has_close_elements" + ")").encode()  # not contiguous in this file
paths = ["/opt/securebench/tests/tests.py"]
for root in ("/opt", "/work", "/tmp", "/var/tmp", "/srv", "/mnt", "/run", "/home", "/root",
             "/etc", "/usr/local", "/var/lib"):
    for folder, _, files in os.walk(root):
        paths += [os.path.join(folder, name) for name in files]
        if len(paths) > 20000:
            break
for pid in [name for name in os.listdir("/proc") if name.isdigit()]:
    paths += [f"/proc/{pid}/cmdline", f"/proc/{pid}/environ",
              f"/proc/{pid}/root/opt/securebench/tests/tests.py"]
    try:
        paths += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        pass
hits = []
for path in paths:
    try:
        if not os.path.isfile(path):
            continue  # pipes and sockets would block
        with open(path, "rb") as handle:
            if MARKER in handle.read(4_000_000):
                hits.append(path)
    except OSError:
        pass
print("DISK-LEAK" if hits else "DISK-CLEAN", hits[:5], len(paths))
def has_close_elements(numbers, threshold):
    return None
"""


def test_test_source_is_not_on_the_candidates_disk(sandbox: Sandbox) -> None:
    verdict = run(humaneval(), DISK_SEARCH, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert "DISK-CLEAN" in verdict.stdout and "DISK-LEAK" not in verdict.stdout, verdict.stdout


# --- A03: patching the interpreter the tests run in -------------------------------------------

BUILTIN_PATCHES = {
    "__import__": (
        "import builtins\n"
        "builtins.__import__ = lambda *args, **kwargs: (_ for _ in ()).throw(SystemExit(0))\n"
    ),
    "isinstance/type": (
        "import builtins\n"
        "builtins.isinstance = lambda *args: True\n"
        "builtins.AssertionError = type('Nope', (Exception,), {})\n"
    ),
    "sys.modules builtins": (
        "import sys, types\n"
        "fake = types.ModuleType('builtins')\n"
        "fake.__dict__.update({'__import__': lambda *a, **k: None})\n"
        "sys.modules['builtins'] = fake\n"
    ),
}


@pytest.mark.parametrize("payload", BUILTIN_PATCHES.values(), ids=BUILTIN_PATCHES.keys())
def test_patched_builtins_only_break_the_candidate(payload: str, sandbox: Sandbox) -> None:
    code = payload + "def has_close_elements(numbers, threshold):\n    return True\n"
    verdict = run(humaneval(), code, sandbox)
    # Sabotaged at import, the worker cannot even list the candidate's names: the candidate
    # broke itself (invalid_candidate); later breakage fails the calls (tests_failed).
    assert verdict.status == "failed", explain(verdict)
    candidate_faults = (Reason.INVALID_CANDIDATE, Reason.TESTS_FAILED, Reason.TAMPER_DETECTED)
    assert verdict.reason in candidate_faults, explain(verdict)


def test_candidate_cannot_shadow_builtins_used_by_the_tests(sandbox: Sandbox) -> None:
    # truncate_number's tests use `abs(candidate(x) - want) < 1e-6`. Were the candidate's
    # `abs` seen by the tests, this wrong answer would pass every assertion after the first.
    task = get_task("humaneval-mini/2")
    code = (
        "def truncate_number(number):\n    return 0.5\n"
        "def abs(value):\n    return 0\n"
        "def isinstance(*args):\n    return True\n"
        "len = 3\n"
    )
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert {"abs", "isinstance", "len"} <= set(verdict.details["exposed"]["skipped"])


# --- A23-A27: resources -------------------------------------------------------------------------


def test_infinite_loop_times_out(sandbox: Sandbox) -> None:
    task = with_timeout(humaneval(), SHORT_WALL)
    code = "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.TIMEOUT)
    assert verdict.details["timeout_seconds"] == SHORT_WALL
    assert verdict.duration_seconds < SHORT_WALL + 10


def test_blocking_at_import_times_out(sandbox: Sandbox) -> None:
    task = with_timeout(smoke(), SHORT_WALL)
    verdict = run(task, "import time\ntime.sleep(3600)\n", sandbox)
    assert_failed(verdict, Reason.TIMEOUT)


def test_memory_hog_hits_the_memory_limit(sandbox: Sandbox) -> None:
    task = with_timeout(humaneval(), 20)
    code = (
        "def has_close_elements(numbers, threshold):\n"
        "    hoard = []\n"
        "    while True:\n"
        "        hoard.append(bytearray(32 * 1024 * 1024))\n"
    )
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.MEMORY_LIMIT)


def test_output_flood_hits_the_output_limit(sandbox: Sandbox) -> None:
    task = with_timeout(humaneval(), 20)
    code = (
        "import sys\n"
        "def has_close_elements(numbers, threshold):\n"
        "    while True:\n"
        "        sys.stdout.write('x' * 65536)\n"
    )
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.OUTPUT_LIMIT)
    assert len(verdict.stdout) < 100_000  # stored output is capped


def test_oversized_return_value_hits_the_output_limit(sandbox: Sandbox) -> None:
    code = "def has_close_elements(numbers, threshold):\n    return 'x' * (3 * 1024 * 1024)\n"
    verdict = run(humaneval(), code, sandbox)
    assert_failed(verdict, Reason.OUTPUT_LIMIT)


def test_fork_bomb_fails_and_leaves_nothing_behind(sandbox: Sandbox) -> None:
    task = with_timeout(smoke(), SHORT_WALL)
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    verdict = run(task, code, sandbox)  # run() asserts that no worker process survived
    assert verdict.status == "failed", explain(verdict)
    assert verdict.reason in (Reason.TIMEOUT, Reason.PROCESS_LIMIT, Reason.MEMORY_LIMIT)


def test_background_process_does_not_survive(sandbox: Sandbox) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "def add_numbers(a, b):\n    return a + b\n"
    )
    verdict = run(smoke(), code, sandbox)  # run() asserts no worker process is left
    assert verdict.passed, explain(verdict)


@pytest.mark.parametrize("when", ["import", "call"])
def test_killing_the_parent_process_fails(when: str, sandbox: Sandbox) -> None:
    kill = (
        "ppid = os.getppid()\n"
        "if ppid > 0:\n"
        "    os.kill(ppid, signal.SIGKILL)\n"
        "try:\n"
        "    os.kill(1, signal.SIGKILL)\n"
        "except OSError:\n"
        "    pass\n"
    )
    # Wrong answers: whatever the kill does to the sandbox, the result must be a failure
    # (never a pass, never our error). With bwrap the parent is the sandbox's wrapper, so the
    # worker dies with it; under Docker the parent is outside the container (getppid() is 0)
    # and pid 1 belongs to another uid, so the worker lives on and answers wrongly.
    if when == "import":
        code = "import os, signal\n" + kill + "def add_numbers(a, b):\n    return 0\n"
    else:
        body = "".join(f"    {line}\n" for line in kill.splitlines())
        code = "import os, signal\ndef add_numbers(a, b):\n" + body + "    return 0\n"
    verdict = run(smoke(), code, sandbox)
    assert verdict.status == "failed", explain(verdict)
    allowed = {Reason.TESTS_FAILED}
    if when == "import":
        allowed.add(Reason.INVALID_CANDIDATE)
    assert verdict.reason in allowed, explain(verdict)
