"""Gaming attempts against the code_completion verifier (security.md §6) all FAIL, for the
right reason, in real sandboxes.

The design under test: the candidate runs in one sandbox (W), the tests in another (T); only
T's own result frame decides, values cross as plain data. Each payload below is what a
benchmark-gaming agent would write into candidate.py.

The attacks run on the suite's own packs (tests/packs/): a `def check(candidate)` task and a
bare-call task. The verdict-channel attacks run again on the reference packs' tasks when
those are present (a visible skip, or a failure when required, when they are not).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.verifiers.test_code_completion import (
    BARE_CALL,
    CHECK_STYLE,
    FRACTION,
    assert_failed,
    entry_point,
    explain,
    get_task,
    reference_ids,
    run,
    with_timeout,
)
from verifiers.sandbox.base import Sandbox
from verifiers.task import TaskLanes
from verifiers.verdict import Reason

# Ours first; the reference packs' own check-style and bare-call tasks as an extra layer.
CHECK_STYLE_TASKS = [CHECK_STYLE, *reference_ids("humaneval-mini/0")]
BARE_CALL_TASKS = [BARE_CALL, *reference_ids("code-completion-smoke/add_numbers")]
ALL_STYLE_TASKS = [
    CHECK_STYLE,
    BARE_CALL,
    *reference_ids("humaneval-mini/0", "code-completion-smoke/add_numbers"),
]
# Short walls for the attacks that are meant to run into one.
SHORT_WALL = 3.0


def humaneval() -> TaskLanes:
    """Our check-style task (any_pair_within), for attacks that do not depend on the task."""
    return get_task(CHECK_STYLE)


def smoke() -> TaskLanes:
    """Our bare-call task (sum_pair), for attacks that do not depend on the task."""
    return get_task(BARE_CALL)


@pytest.fixture(params=CHECK_STYLE_TASKS)
def check_style(request: pytest.FixtureRequest) -> TaskLanes:
    return get_task(request.param)


@pytest.fixture(params=BARE_CALL_TASKS)
def bare_call(request: pytest.FixtureRequest) -> TaskLanes:
    return get_task(request.param)


# --- A05: exit before the assertions run ------------------------------------------------------

EXIT_AT_IMPORT = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "raise SystemExit": "raise SystemExit(0)\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "exit() builtin": "exit(0)\n",
}


@pytest.mark.parametrize("payload", EXIT_AT_IMPORT.values(), ids=EXIT_AT_IMPORT.keys())
@pytest.mark.parametrize("task_id", ALL_STYLE_TASKS)
def test_exit_at_import_fails(payload: str, task_id: str, sandbox: Sandbox) -> None:
    task = get_task(task_id)
    code = payload + f"def {entry_point(task)}(*args):\n    return True\n"
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.INVALID_CANDIDATE)
    assert verdict.details["stage"] == "import"


@pytest.mark.parametrize("exit_call", ["os._exit(0)", "sys.exit(0)", "os.kill(os.getpid(), 9)"])
def test_exit_inside_the_function_fails(
    exit_call: str, bare_call: TaskLanes, sandbox: Sandbox
) -> None:
    code = f"import os, sys\ndef {entry_point(bare_call)}(a, b):\n    {exit_call}\n"
    verdict = run(bare_call, code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert verdict.details["failed_test_line"] == 2  # the very first assertion


def test_exit_after_some_correct_answers_fails(bare_call: TaskLanes, sandbox: Sandbox) -> None:
    # Right for the first call (both bare-call tasks add), then the process ends mid-run:
    # still a failure.
    code = (
        "import os\nCALLS = []\n"
        f"def {entry_point(bare_call)}(a, b):\n"
        "    CALLS.append(1)\n"
        "    if len(CALLS) > 1:\n        os._exit(0)\n"
        "    return a + b\n"
    )
    verdict = run(bare_call, code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert verdict.details["worker_gone"] == "it exited"


# --- A07: forged result lines -----------------------------------------------------------------

FAKE_FRAME = '{"type": "result", "passed": true, "assertions": 7}'


def test_printed_fake_results_are_ignored(check_style: TaskLanes, sandbox: Sandbox) -> None:
    code = (
        f"print({FAKE_FRAME!r})\nprint('PASSED')\nprint('7 passed in 0.01s')\n"
        f"def {entry_point(check_style)}(*args):\n"
        f"    print({FAKE_FRAME!r}, flush=True)\n"
        "    return None\n"
    )
    verdict = run(check_style, code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert FAKE_FRAME in verdict.stdout  # it went to the candidate's log, nowhere else


def test_fake_frames_written_to_fd1_are_ignored(check_style: TaskLanes, sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        f"os.write(1, {FAKE_FRAME!r}.encode() + b'\\n')\n"
        f"def {entry_point(check_style)}(*args):\n"
        f"    os.write(1, {FAKE_FRAME!r}.encode() + b'\\n')\n"
        "    return None\n"
    )
    verdict = run(check_style, code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)


def test_fake_frames_sprayed_on_every_fd_are_tampering(
    check_style: TaskLanes, sandbox: Sandbox
) -> None:
    # The worker's protocol pipe is some fd of this process: write a fake "passed" result to
    # every one. At best it reaches the relay as W's reply, which is checked and refused.
    code = (
        "import os\n"
        f"def {entry_point(check_style)}(*args):\n"
        "    for name in os.listdir('/proc/self/fd'):\n"
        "        try:\n"
        f"            os.write(int(name), {FAKE_FRAME!r}.encode() + b'\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return True\n"
    )
    verdict = run(check_style, code, sandbox)
    assert_failed(verdict, Reason.TAMPER_DETECTED)


def test_monkeypatched_json_is_tampering(check_style: TaskLanes, sandbox: Sandbox) -> None:
    code = (
        "import json\n"
        f"json.dumps = lambda *args, **kwargs: {FAKE_FRAME!r}\n"
        f"def {entry_point(check_style)}(*args):\n"
        "    return True\n"
    )
    verdict = run(check_style, code, sandbox)
    assert_failed(verdict, Reason.TAMPER_DETECTED)


def test_stop_iteration_cannot_end_a_test_loop_early(
    bare_call: TaskLanes, sandbox: Sandbox
) -> None:
    # Raised through map() inside zip(), a real StopIteration would end this loop before any
    # assertion ran, and the tests would "pass". It must arrive as an ordinary error.
    name = entry_point(bare_call)
    loop = (
        f"for got, want in zip(map(lambda x: {name}(x, 1), [1, 2]), [2, 3]):\n"
        "    assert got == want\n"
    )
    task = replace(bare_call, evaluation_inputs={"tests": {"source": "inline", "code": loop}})
    assert run(task, f"def {name}(a, b):\n    return a + b\n", sandbox).passed
    code = f"def {name}(a, b):\n    raise StopIteration\n"
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
def test_always_equal_results_fail(payload: str, check_style: TaskLanes, sandbox: Sandbox) -> None:
    code = payload + f"def {entry_point(check_style)}(*args):\n    return RESULT\n"
    verdict = run(check_style, code, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert "not plain data" in verdict.details["error"], explain(verdict)


# --- A13 / A15: reading the tests from memory or disk -----------------------------------------

STACK_WALK = """
import inspect
def ENTRY(*args):
    # Built at run time (the worker holds this very source text, which is no leak) and
    # local (module data is fetched by the tests, so the worker saw it as a reply).
    markers = ["assert " + "candidate", "check" + "(", "def " + "check", "ENTRY" + ")"]
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


def test_stack_walking_finds_nothing(check_style: TaskLanes, sandbox: Sandbox) -> None:
    verdict = run(check_style, STACK_WALK.replace("ENTRY", entry_point(check_style)), sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert "STACK-CLEAN" in verdict.stdout and "STACK-LEAK" not in verdict.stdout, verdict.stdout


DISK_SEARCH = """
import os
MARKER = ("check(" + "ENTRY" + ")").encode()  # not contiguous in this file
paths = ["/opt/securebench/tests/tests.py", "/work/tests.py"]
for root in ("/opt", "/work", "/tmp", "/var/tmp", "/srv", "/mnt", "/run", "/home", "/root",
             "/etc", "/usr/local", "/var/lib"):
    for folder, _, files in os.walk(root):
        paths += [os.path.join(folder, name) for name in files]
        if len(paths) > 20000:
            break
for pid in [name for name in os.listdir("/proc") if name.isdigit()]:
    paths += [f"/proc/{pid}/cmdline", f"/proc/{pid}/environ",
              f"/proc/{pid}/root/opt/securebench/tests/tests.py",
              f"/proc/{pid}/root/work/tests.py"]
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
def ENTRY(*args):
    return None
"""


def test_test_source_is_not_on_the_candidates_disk(
    check_style: TaskLanes, sandbox: Sandbox
) -> None:
    verdict = run(check_style, DISK_SEARCH.replace("ENTRY", entry_point(check_style)), sandbox)
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
def test_patched_builtins_only_break_the_candidate(
    payload: str, check_style: TaskLanes, sandbox: Sandbox
) -> None:
    code = payload + f"def {entry_point(check_style)}(*args):\n    return True\n"
    verdict = run(check_style, code, sandbox)
    # Sabotaged at import, the worker cannot even list the candidate's names: the candidate
    # broke itself (invalid_candidate); later breakage fails the calls (tests_failed).
    assert verdict.status == "failed", explain(verdict)
    candidate_faults = (Reason.INVALID_CANDIDATE, Reason.TESTS_FAILED, Reason.TAMPER_DETECTED)
    assert verdict.reason in candidate_faults, explain(verdict)


@pytest.mark.parametrize("task_id", [FRACTION, *reference_ids("humaneval-mini/2")])
def test_candidate_cannot_shadow_builtins_used_by_the_tests(task_id: str, sandbox: Sandbox) -> None:
    # Both tasks' tests use `abs(candidate(x) - want) < 1e-6`, first with an answer of 0.5.
    # Were the candidate's `abs` seen by the tests, this wrong answer would pass every
    # assertion after the first.
    task = get_task(task_id)
    code = (
        f"def {entry_point(task)}(number):\n    return 0.5\n"
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
    code = "def any_pair_within(values, gap):\n    while True:\n        pass\n"
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.TIMEOUT)
    assert verdict.details["timeout_seconds"] == SHORT_WALL
    # An endless loop only ends by a kill: the verdict coming back is the proof, and run()
    # checks that nothing of the candidate outlived it. How long it took is bench/'s business.


def test_blocking_at_import_times_out(sandbox: Sandbox) -> None:
    task = with_timeout(smoke(), SHORT_WALL)
    verdict = run(task, "import time\ntime.sleep(3600)\n", sandbox)
    assert_failed(verdict, Reason.TIMEOUT)


def test_memory_hog_hits_the_memory_limit(sandbox: Sandbox) -> None:
    task = with_timeout(humaneval(), 20)
    code = (
        "def any_pair_within(values, gap):\n"
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
        "def any_pair_within(values, gap):\n"
        "    while True:\n"
        "        sys.stdout.write('x' * 65536)\n"
    )
    verdict = run(task, code, sandbox)
    assert_failed(verdict, Reason.OUTPUT_LIMIT)
    assert len(verdict.stdout) < 100_000  # stored output is capped


def test_oversized_return_value_hits_the_output_limit(sandbox: Sandbox) -> None:
    code = "def any_pair_within(values, gap):\n    return 'x' * (3 * 1024 * 1024)\n"
    verdict = run(humaneval(), code, sandbox)
    assert_failed(verdict, Reason.OUTPUT_LIMIT)


def test_fork_bomb_fails_and_leaves_nothing_behind(sandbox: Sandbox) -> None:
    task = with_timeout(smoke(), SHORT_WALL)
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    verdict = run(task, code, sandbox)  # run() asserts that no worker process survived
    assert verdict.status == "failed", explain(verdict)
    # Named for the limit it hit, not just the clock: bwrap's relay sees the worker die of
    # memory, Docker reads the refused forks off the container's pids cgroup.
    assert verdict.reason in (Reason.PROCESS_LIMIT, Reason.MEMORY_LIMIT), explain(verdict)


def test_a_fork_bomb_outlasting_the_engine_clients_timeout_is_the_candidates_failure(
    sandbox: Sandbox,
) -> None:
    """Once seen on Docker: the worker's container went silent for 30 s, the engine client's
    socket timeout ended both streams as if the sandboxes had exited, and the verification
    came back `error / infrastructure` (then retried, three times). Here the client's timeout
    is 2 s and the wall 6 s, so the silence outlasts the client well within the wall. (The
    socket's own fix is proved in test_docker_pool; this is the verdict a user sees.)"""
    if sandbox.name == "docker":
        from verifiers.sandbox.docker import DockerSandbox, docker_client  # noqa: PLC0415

        sandbox = DockerSandbox(docker_client(timeout=2.0), labels=sandbox.labels)  # type: ignore[attr-defined]
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"  # noqa: E501
    )
    verdict = run(with_timeout(smoke(), 6), code, sandbox)
    assert verdict.status == "failed", explain(verdict)
    assert verdict.reason in (Reason.PROCESS_LIMIT, Reason.MEMORY_LIMIT), explain(verdict)


def test_filling_the_disk_is_the_candidates_failure(sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        "for folder in ('/tmp', '.'):\n"
        "    try:\n"
        "        with open(os.path.join(folder, 'fill'), 'wb') as out:\n"
        "            while True:\n"
        "                out.write(b'x' * (1 << 20))\n"
        "    except OSError:\n"
        "        pass\n"
        "raise SystemExit('disk full')\n"
    )
    verdict = run(with_timeout(smoke(), 30), code, sandbox)
    assert verdict.status == "failed", explain(verdict)


# What the detached daemon becomes: the worker's own python, or another program (a shell; it
# passes on the worker's command line so run()'s leftover check can still recognise it).
DAEMON_BODIES = {
    "python": "        time.sleep(600)\n",
    "exec": (
        "        argv = open('/proc/self/cmdline', 'rb').read().decode().split('\\0')\n"
        "        os.execv('/bin/sh', ['sh', '-c', 'sleep 600; :', *argv])\n"
    ),
}


@pytest.mark.parametrize("body", DAEMON_BODIES.values(), ids=DAEMON_BODIES.keys())
def test_background_process_does_not_survive(body: str, sandbox: Sandbox) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n" + body + "    os._exit(0)\n"
        "def sum_pair(a, b):\n    return a + b\n"
    )
    verdict = run(smoke(), code, sandbox)  # run() asserts no process of it is left
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
        code = "import os, signal\n" + kill + "def sum_pair(a, b):\n    return 0\n"
    else:
        body = "".join(f"    {line}\n" for line in kill.splitlines())
        code = "import os, signal\ndef sum_pair(a, b):\n" + body + "    return 0\n"
    verdict = run(smoke(), code, sandbox)
    assert verdict.status == "failed", explain(verdict)
    allowed = {Reason.TESTS_FAILED}
    if when == "import":
        allowed.add(Reason.INVALID_CANDIDATE)
    assert verdict.reason in allowed, explain(verdict)
