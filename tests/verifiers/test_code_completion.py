"""code_completion verifier: oracle passes, nulls fail, every outcome maps to the right reason.

All verifications run in real sandboxes (bwrap and Docker, whichever this machine has); the
codec is unit-tested on its own. Helpers here (pack loading, the sandbox fixture) are also
used by tests/security/test_code_gaming.py.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from packs.compiler import compile_pack, compiled_task_lanes
from tests.components import REFERENCE_PACKS, probe_reference_packs
from tests.conftest import TEST_PACKS, reference_packs_or_skip, sandbox_or_skip
from tests.security.sandbox_probes import processes_with_token
from tests.verifiers.candidate_leftovers import (
    clean_up,
    labelled_containers,
    leftovers,
    tracked,
)
from verifiers.families.code_codec import CodecError, dumps_frame, from_data, loads_frame, to_data
from verifiers.families.code_completion import (
    CANDIDATE_FILE,
    TESTS_PATH,
    _specs,
    _wall_seconds,
    _write_inputs,
    reference_candidate,
    verify,
)
from verifiers.sandbox.base import (
    CODE_LIMITS,
    Sandbox,
    SandboxProcess,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.sandbox.bwrap import BwrapSandbox, pids_of_uid
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Reason, Verdict

CODE_TEST_PACKS = ("code-check-style", "code-bare-call")
REFERENCE_CODE_PACKS = ("humaneval-mini", "code-completion-smoke")
# Stands for the reference packs' tasks in parametrisations when they are absent: a visible
# skip (or a failure when required), never a parametrisation that silently shrinks.
REFERENCE_ABSENT = "reference-packs-absent"


# --- tasks: our test packs first, the reference packs as an extra layer -------------------------


def load_pack(folder: Path) -> dict[str, TaskLanes]:
    """Every task of a pack folder, split into lanes by the compiler itself."""
    pack = compile_pack(folder)
    return {task.task_id: compiled_task_lanes(task, pack.files) for task in pack.tasks}


OUR_TASKS: dict[str, TaskLanes] = {
    task_id: task
    for name in CODE_TEST_PACKS
    for task_id, task in load_pack(TEST_PACKS / name).items()
}
REFERENCE_TASKS: dict[str, TaskLanes] = (
    {
        task_id: task
        for name in REFERENCE_CODE_PACKS
        for task_id, task in load_pack(REFERENCE_PACKS / name).items()
    }
    if probe_reference_packs() is None
    else {}
)
TASK_IDS = sorted(OUR_TASKS) + (sorted(REFERENCE_TASKS) or [REFERENCE_ABSENT])
# Our tasks by role: a `def check(candidate)` task and a bare-call one, and tasks for the
# behaviours below (exceptions crossing the codec, scrubbed details, builtins in the tests).
CHECK_STYLE = "code-check-style/pairs-within"  # any_pair_within(values, gap)
BARE_CALL = "code-bare-call/sum-pair"  # sum_pair(a, b)
WINDOWS = "code-bare-call/windows"  # raises ValueError for a size below one
SLUG = "code-bare-call/make-slug"  # its tests hold a long literal input
FRACTION = "code-check-style/fraction-part"  # its tests compare with abs(...)


def reference_ids(*task_ids: str) -> list[str]:
    """Reference-pack task ids for a parametrisation, or the one placeholder when absent."""
    return list(task_ids) if REFERENCE_TASKS else [REFERENCE_ABSENT]


def get_task(task_id: str) -> TaskLanes:
    """A task of our test packs, or of the reference packs (skipped, or failed when required,
    when they are absent)."""
    if task_id in OUR_TASKS:
        return OUR_TASKS[task_id]
    if task_id not in REFERENCE_TASKS:
        reference_packs_or_skip()
    return REFERENCE_TASKS[task_id]


def entry_point(task: TaskLanes) -> str:
    """The function the tests call: metadata for HumanEval, the starter code otherwise."""
    name = task.metadata.get("entry_point")
    if isinstance(name, str):
        return name
    starter = task.public.get("starter_code", "")
    return starter.split("def ", 1)[1].split("(", 1)[0]


def with_timeout(task: TaskLanes, seconds: float) -> TaskLanes:
    return replace(task, environment={**task.environment, "timeout_seconds": seconds})


# --- real sandboxes ------------------------------------------------------------------------------


def scratch_folders(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("securebench-code-"))


def run(task: TaskLanes, code: str, sandbox: Sandbox) -> Verdict:
    # This verification's scratch folders go to a folder of its own, so the leftover check
    # sees only them, whatever else runs on the machine (sandbox uids traverse it: 0755).
    private = Path(tempfile.mkdtemp(prefix="securebench-test-tmp-"))
    private.chmod(0o755)
    saved, tempfile.tempdir = tempfile.tempdir, str(private)
    tracked_run = tracked(sandbox)
    try:
        verdict = verify(task, Candidate.of_code(code), sandbox=tracked_run.sandbox)
        # Whatever happened, nothing of the candidate may outlive its verification (A28),
        # wherever it lives (candidate_leftovers), and the host-side scratch folder
        # (candidate + test copies) is gone.
        found = leftovers(tracked_run)
        if found:
            clean_up(tracked_run, found)
        assert found == {}, f"processes of the verification outlived it: {found}"
        left = scratch_folders(private)
        assert left == [], f"verifier left scratch folders behind: {left}"
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(private, ignore_errors=True)
    return verdict


def test_the_leftover_check_sees_a_live_verification(sandbox: Sandbox) -> None:
    """run()'s check is worth something only if it finds a verification's processes while
    they live, on this backend and as whoever runs the test."""
    tracked_run = tracked(sandbox)
    waits = "import time\nprint('up', flush=True)\ntime.sleep(300)\n"
    spec = SandboxSpec(command=["python3", "-c", waits], limits=CODE_LIMITS.with_wall(60))
    process = tracked_run.sandbox.start(spec)
    try:
        assert process.stdout.readline() == b"up\n"
        assert processes_with_token(tracked_run.token) != []
        backend = tracked_run.backend
        if isinstance(backend, BwrapSandbox) and backend.privileged:
            assert any(pids_of_uid(uid) for uid in backend.used_uids)
        if backend.name == "docker":
            assert len(labelled_containers(tracked_run)) == 1
    finally:
        process.kill()
        process.finish()
    found = leftovers(tracked_run)
    if found:
        clean_up(tracked_run, found)
    assert found == {}, f"the killed sandbox left processes behind: {found}"


def explain(verdict: Verdict) -> str:
    return json.dumps(
        {
            "status": verdict.status,
            "reason": verdict.reason,
            "details": verdict.details,
            "stdout": verdict.stdout[-800:],
            "stderr": verdict.stderr[-800:],
        },
        indent=1,
        default=str,
    )


def assert_failed(verdict: Verdict, reason: str) -> None:
    assert (verdict.status, verdict.reason) == ("failed", reason), explain(verdict)
    assert verdict.score == 0.0


# --- oracle, nulls, trivially wrong ------------------------------------------------------------


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_solution_passes(task_id: str, sandbox: Sandbox) -> None:
    task = get_task(task_id)
    verdict = run(task, reference_candidate(task), sandbox)
    assert verdict.passed, explain(verdict)
    assert verdict.score == 1.0
    assert verdict.sandbox_backend == sandbox.name
    assert entry_point(task) in verdict.details["exposed"]["functions"]
    assert verdict.details["calls"] >= 1


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_wrong_candidates_fail(task_id: str, sandbox: Sandbox) -> None:
    task = get_task(task_id)
    returns_none = f"def {entry_point(task)}(*args, **kwargs):\n    return None\n"
    assert_failed(run(task, returns_none, sandbox), Reason.TESTS_FAILED)
    # The starter code (a stub with `pass` or only a docstring) imports fine and fails.
    assert_failed(run(task, task.public["starter_code"], sandbox), Reason.TESTS_FAILED)


@pytest.mark.parametrize("code", ["", "   \n\t\n"])
def test_empty_candidate_is_invalid_without_a_sandbox(code: str) -> None:
    task = get_task(CHECK_STYLE)
    assert_failed(verify(task, Candidate.of_code(code)), Reason.INVALID_CANDIDATE)


def test_syntax_error_and_missing_entry_point(sandbox: Sandbox) -> None:
    task = get_task(CHECK_STYLE)
    verdict = run(task, "def any_pair_within(values, gap)\n    return True\n", sandbox)
    assert_failed(verdict, Reason.INVALID_CANDIDATE)
    assert "SyntaxError" in verdict.details["error"]
    verdict = run(task, "def something_else():\n    return True\n", sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert "NameError" in verdict.details["error"]


def test_exception_at_import_is_invalid_candidate(sandbox: Sandbox) -> None:
    task = get_task(BARE_CALL)
    verdict = run(
        task, "raise RuntimeError('no')\ndef sum_pair(a, b):\n    return a + b\n", sandbox
    )
    assert_failed(verdict, Reason.INVALID_CANDIDATE)
    assert verdict.details["stage"] == "import"


def test_candidate_exceptions_cross_as_the_same_builtin_type(sandbox: Sandbox) -> None:
    # windows' tests require a ValueError for size 0: it must arrive as ValueError.
    task = get_task(WINDOWS)
    ok = reference_candidate(task)
    assert run(task, ok, sandbox).passed
    wrong_type = ok.replace("raise ValueError", "raise KeyError")
    verdict = run(task, wrong_type, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert verdict.details["error"].startswith("KeyError"), explain(verdict)


def test_failure_details_are_scrubbed(sandbox: Sandbox) -> None:
    task = get_task(WINDOWS)
    never_raises = (
        "def windows(items, size):\n"
        "    print('called with', repr(items), size)\n"
        "    items = list(items)\n"
        "    return [tuple(items[i:i + size]) for i in range(0, len(items) - size + 1)]\n"
    )
    verdict = run(task, never_raises, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    # The test's own message ('expected ValueError ...') is a test literal: shown redacted,
    # with the failing line of the tests instead.
    assert verdict.details["error"] == "AssertionError: <redacted>", explain(verdict)
    assert verdict.details["failed_test_line"] == 10
    assert "expected ValueError" not in json.dumps(verdict.details)
    # The candidate's own prints are kept, with test inputs redacted where they are literals.
    slug = get_task(SLUG)
    echo = "def make_slug(text):\n    print('INPUT', text)\n    return text\n"
    verdict = run(slug, echo, sandbox)
    assert_failed(verdict, Reason.TESTS_FAILED)
    assert "INPUT" in verdict.stdout
    assert "Tea & Biscuits, Please!" not in verdict.stdout
    assert "<redacted>" in verdict.stdout


def test_candidate_output_is_kept_and_passing_is_unaffected(sandbox: Sandbox) -> None:
    task = get_task(BARE_CALL)
    chatty = (
        "import os, sys\nprint('hello from import')\n"
        "def sum_pair(a, b):\n"
        "    print('adding'); os.write(1, b'raw fd1 write\\n'); sys.stderr.write('err\\n')\n"
        "    return a + b\n"
    )
    verdict = run(task, chatty, sandbox)
    assert verdict.passed, explain(verdict)
    assert "hello from import" in verdict.stdout
    assert "raw fd1 write" in verdict.stdout


def test_check_call_is_added_from_the_entry_point(sandbox: Sandbox) -> None:
    task = get_task(CHECK_STYLE)
    code = task.evaluation_inputs["tests"]["code"].replace("check(any_pair_within)", "")
    assert code != task.evaluation_inputs["tests"]["code"]
    tests = {"source": "inline", "code": code}
    no_call = replace(task, evaluation_inputs={"tests": tests})
    assert run(no_call, reference_candidate(task), sandbox).passed
    wrong = "def any_pair_within(values, gap):\n    return True\n"
    assert_failed(run(no_call, wrong, sandbox), Reason.TESTS_FAILED)
    # check() that nobody calls and no entry point to call it with: the task is broken.
    orphan = replace(no_call, metadata={})
    verdict = run(orphan, reference_candidate(task), sandbox)
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)


def test_task_misconfiguration_is_an_error() -> None:
    task = get_task(CHECK_STYLE)
    javascript = replace(task, public={**task.public, "language": "javascript"})
    verdict = verify(javascript, Candidate.of_code("x = 1"))
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)
    no_tests = replace(task, evaluation_inputs={})
    verdict = verify(no_tests, Candidate.of_code("x = 1"))
    assert (verdict.status, verdict.reason) == ("error", Reason.TASK_MISCONFIGURED)


class _NoBackend(Sandbox):
    """Stands for a machine without any backend: it only ever refuses to start."""

    name = "none"

    def run(self, spec: SandboxSpec) -> Any:
        raise SandboxUnavailable("no backend on this machine")

    def start(self, spec: SandboxSpec) -> SandboxProcess:
        raise SandboxUnavailable("no backend on this machine")


def test_missing_sandbox_is_an_error_not_a_failure() -> None:
    task = get_task(CHECK_STYLE)
    verdict = verify(task, Candidate.of_code(reference_candidate(task)), sandbox=_NoBackend())
    assert (verdict.status, verdict.reason) == ("error", Reason.SANDBOX_UNAVAILABLE)


def test_default_backend_comes_from_get_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox_or_skip("bwrap")  # skips when bwrap is unusable here (fails when required)
    monkeypatch.setenv("SECUREBENCH_SANDBOX", "bwrap")
    task = get_task(BARE_CALL)
    verdict = verify(task, Candidate.of_code(reference_candidate(task)))
    assert verdict.passed, explain(verdict)
    assert verdict.sandbox_backend == "bwrap"


def test_only_the_test_sandbox_gets_the_tests(tmp_path: Path) -> None:
    task = get_task(CHECK_STYLE)
    worker, tests = _specs(task, tmp_path, 5.0)
    _write_inputs(tmp_path, "def f(): pass\n", "assert True\n")
    assert tests.work_files == tmp_path / "tests" and worker.work_files == tmp_path / "work"
    assert f"{tests.workdir}/tests.py" == TESTS_PATH
    assert [p.name for p in tests.work_files.iterdir()] == ["tests.py"]
    assert [p.name for p in worker.work_files.iterdir()] == [CANDIDATE_FILE]
    assert TESTS_PATH not in {mount.target for mount in (*worker.mounts, *tests.mounts)}
    assert all(mount.read_only for mount in (*worker.mounts, *tests.mounts))
    assert worker.command[:2] == ["python3", "-I"] and tests.command[:3] == ["python3", "-I", "-S"]
    assert tests.limits.wall_seconds > worker.limits.wall_seconds == 5.0
    # The task's own timeout never raises the wall above the code profile.
    assert _wall_seconds(with_timeout(task, 10_000)) == CODE_LIMITS.wall_seconds


def test_reference_candidate_shapes() -> None:
    check_style = get_task(FRACTION)
    assert reference_candidate(check_style).startswith(check_style.public["prompt"])
    bare_call = get_task(BARE_CALL)
    assert reference_candidate(bare_call) == bare_call.hidden["canonical_solution"]


# --- the codec ---------------------------------------------------------------------------------


def _round_trip(value: Any) -> Any:
    return from_data(loads_frame(dumps_frame({"v": to_data(value)}))["v"])


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        2**200,
        -(3**150),
        1.5,
        -0.0,
        math.inf,
        -math.inf,
        "text\nwith newline \u2603 \udcff",
        b"\x00\xffbytes",
        [1, [2, (3, 4)]],
        (1, "a", None),
        (),
        [(1, 2), [1, 2]],
        {1, 2, 3},
        frozenset({"a", (1, 2)}),
        {"a": 1, 2: "b", (1, 2): [3], frozenset({1}): {"x": (None,)}},
        complex(1.5, -2),
        complex(math.nan, math.inf),
    ],
)
def test_codec_round_trip(value: Any) -> None:
    back = _round_trip(value)
    if isinstance(value, complex) and math.isnan(value.real):
        assert math.isnan(back.real) and back.imag == math.inf
        return
    assert back == value
    assert type(back) is type(value)
    if isinstance(value, list):
        assert [type(item) for item in back] == [type(item) for item in value]


def test_codec_keeps_nan_and_exact_types() -> None:
    assert math.isnan(_round_trip(math.nan))
    assert _round_trip((1, 2)) != [1, 2]
    assert type(_round_trip([(1, 2)])[0]) is tuple
    assert type(_round_trip(True)) is bool and type(_round_trip(1)) is int
    assert type(_round_trip(1.0)) is float


class _AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class _SneakyInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


def _generator() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize(
    "value",
    [
        _AlwaysEqual(),
        _SneakyInt(3),
        [1, _AlwaysEqual()],
        {"k": _SneakyInt(1)},
        _generator(),
        len,
        _AlwaysEqual,
        object(),
        range(3),
        bytearray(b"x"),
    ],
)
def test_codec_refuses_anything_but_plain_data(value: Any) -> None:
    with pytest.raises(CodecError):
        to_data(value)


def test_codec_refuses_deep_and_cyclic_values() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(CodecError):
        to_data(cyclic)
    deep: Any = 0
    for _ in range(200):
        deep = [deep]
    with pytest.raises(CodecError):
        to_data(deep)
    with pytest.raises(CodecError):
        loads_frame(b"[" * 100_000 + b"]" * 100_000)


@pytest.mark.parametrize(
    "raw",
    [
        {"t": "object", "v": "x"},
        {"t": "tuple", "v": [1], "extra": 1},
        {"t": "set", "v": [[1]]},  # unhashable element
        {"t": "dict", "v": [[[1], 2]]},  # unhashable key
        {"t": "dict", "v": {"a": 1}},
        {"t": "int", "v": "12x"},
        {"t": "int", "v": "9" * 5000},  # over the interpreter's digit limit
        {"t": "float", "v": "1e5"},
        {"t": "bytes", "v": "***"},
        {"a": 1},
    ],
)
def test_codec_refuses_malformed_frames(raw: Any) -> None:
    with pytest.raises(CodecError):
        from_data(raw)
