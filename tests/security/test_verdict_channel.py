"""The code_completion verdict channel holds against a candidate that attacks it directly.

The candidate runs in its own sandbox (W) and speaks to the tests' sandbox (T) only through
the host relay. These attacks reach for the protocol itself — forged, mismatched or malformed
frames written straight onto W's protocol pipe, oversized replies, exceptions that would steer
the tests' control flow, names that would shadow the tests' builtins — and each must end in a
failed verdict for the right reason. Honest output on either side must never disturb the
channel. Every task is written here (no reference pack needed), and every verification runs in
real bwrap and Docker sandboxes. tests/mutation/catalogue.py removes each defence in turn.
"""

from __future__ import annotations

import json

import pytest

from verifiers.families.code_codec import MAX_DEPTH, CodecError, from_data, loads_frame
from verifiers.families.code_completion import verify
from verifiers.sandbox.base import Sandbox
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Reason, Verdict

pytestmark = pytest.mark.database_independent

DOUBLE_TESTS = "assert double(2) == 4\nassert double(5) == 10\n"
CORRECT = "def double(x):\n    return 2 * x\n"

# Candidate code that finds W's protocol pipe the way an attacker would: the worker's own
# frames hold its channel object, and the current request is a local of the worker's code.
FIND_CHANNEL = """
import json, os, sys

def _worker_state():
    frame = sys._getframe(1)
    channel = request = None
    while frame is not None:
        channel = channel or frame.f_locals.get("channel")
        request = request or frame.f_locals.get("request")
        frame = frame.f_back
    return channel._fd_out, request

def _forge(data):
    fd, request = _worker_state()
    os.write(fd, data)
    return request
"""


def code_task(tests: str, *, entry_point: str | None = None, timeout: float = 20.0) -> TaskLanes:
    return TaskLanes(
        task_id="verdict-channel/double",
        family="code_completion",
        public={"prompt": "Write double(x).", "language": "python"},
        evaluation_inputs={"tests": {"source": "inline", "code": tests}},
        hidden={},
        environment={"timeout_seconds": timeout},
        metadata={"entry_point": entry_point} if entry_point else {},
    )


def check(tests: str, code: str, sandbox: Sandbox, **task_options: object) -> Verdict:
    return verify(code_task(tests, **task_options), Candidate.of_code(code), sandbox=sandbox)  # type: ignore[arg-type]


def explain(verdict: Verdict) -> str:
    shown = {"status": verdict.status, "reason": verdict.reason, "details": verdict.details}
    return json.dumps(shown, default=str, indent=1)[:3000]


def assert_outcome(verdict: Verdict, status: str, reason: str | None) -> None:
    assert (verdict.status, verdict.reason) == (status, reason), explain(verdict)


# --- honest output never touches the channel ----------------------------------------------------


def test_an_honest_candidate_that_prints_still_passes(sandbox: Sandbox) -> None:
    # W moves the protocol off fd 1: prints at import and inside calls land in the log.
    code = "print('importing', flush=True)\n" + CORRECT.replace(
        "    return", "    print('called with', x, flush=True)\n    return"
    )
    verdict = check(DOUBLE_TESTS, code, sandbox)
    assert_outcome(verdict, "passed", None)
    assert "called with 5" in verdict.stdout + verdict.stderr


def test_output_a_candidate_writes_on_fd_1_never_reaches_the_channel(sandbox: Sandbox) -> None:
    # Output below print(): a C extension or a child process writes straight to fd 1.
    code = "import os\n" + CORRECT.replace(
        "    return", "    os.write(1, b'low-level output\\n')\n    return"
    )
    verdict = check(DOUBLE_TESTS, code, sandbox)
    assert_outcome(verdict, "passed", None)


def test_output_the_tests_write_on_fd_1_never_reaches_the_channel(sandbox: Sandbox) -> None:
    tests = "import os\nos.write(1, b'checking double\\n')\n" + DOUBLE_TESTS
    assert_outcome(check(tests, CORRECT, sandbox), "passed", None)


def test_tests_that_print_do_not_break_the_result_channel(sandbox: Sandbox) -> None:
    # T, too, sends the test source's prints to stderr: only the harness writes its pipe.
    tests = "print('checking double', flush=True)\n" + DOUBLE_TESTS
    assert_outcome(check(tests, CORRECT, sandbox), "passed", None)


# --- frames forged on W's protocol pipe ---------------------------------------------------------


def test_a_reply_to_no_pending_request_is_tampering(sandbox: Sandbox) -> None:
    code = FIND_CHANNEL + (
        "def double(x):\n"
        '    _forge(b\'{"id": 424242, "ok": true, "value": 4}\\n\')\n'
        "    return 2 * x\n"
    )
    verdict = check(DOUBLE_TESTS, code, sandbox)
    assert_outcome(verdict, "failed", Reason.TAMPER_DETECTED)
    assert verdict.details["tamper"] == "the candidate wrote a frame that answers no request"


def test_a_forged_gone_reply_is_tampering(sandbox: Sandbox) -> None:
    # Right id, but "gone" is the host's word alone: a worker saying it is tampering.
    code = FIND_CHANNEL + (
        "def double(x):\n"
        "    request = _worker_state()[1]\n"
        "    frame = {'id': request['id'], 'ok': False, 'gone': True, 'message': 'host says ok'}\n"
        "    _forge(json.dumps(frame).encode() + b'\\n')\n"
        "    return 2 * x\n"
    )
    verdict = check(DOUBLE_TESTS, code, sandbox)
    assert_outcome(verdict, "failed", Reason.TAMPER_DETECTED)
    assert verdict.details["tamper"] == "the candidate wrote a frame that answers no request"


def test_a_malformed_frame_is_tampering(sandbox: Sandbox) -> None:
    code = FIND_CHANNEL + ("def double(x):\n    _forge(b'PASSED all tests\\n')\n    return 2 * x\n")
    verdict = check(DOUBLE_TESTS, code, sandbox)
    assert_outcome(verdict, "failed", Reason.TAMPER_DETECTED)
    assert verdict.details["tamper"] == "the candidate wrote a malformed protocol frame"


def test_a_reply_over_the_frame_cap_is_an_output_limit(sandbox: Sandbox) -> None:
    code = "def double(x):\n    return 'x' * (2 * 1024 * 1024)\n"
    verdict = check(DOUBLE_TESTS, code, sandbox)
    assert_outcome(verdict, "failed", Reason.OUTPUT_LIMIT)
    assert verdict.details["frame_limit_bytes"] == 1024 * 1024


# --- the tests' control flow belongs to the tests ----------------------------------------------

# The error check comes last: nothing after it would call the (dead) candidate again.
EXPECTS_AN_ERROR = """
assert double(3) == 6
try:
    double(-1)
except Exception:
    pass
else:
    raise AssertionError("double(-1) must raise")
"""


def test_a_dead_candidate_is_not_an_exception_the_tests_can_catch(sandbox: Sandbox) -> None:
    # The process ending is not "raised an error": test code catching Exception must not
    # turn the candidate's exit into the error the test hoped for.
    code = "import os\ndef double(x):\n    if x < 0:\n        os._exit(0)\n    return 2 * x\n"
    verdict = check(EXPECTS_AN_ERROR, code, sandbox)
    assert_outcome(verdict, "failed", Reason.TESTS_FAILED)
    assert verdict.details["worker_gone"] == "it exited"


def test_a_stop_iteration_cannot_end_the_tests_loop_early(sandbox: Sandbox) -> None:
    tests = "for x, got in zip([1, 2, 3], map(double, [1, 2, 3])):\n    assert got == 2 * x\n"
    code = "def double(x):\n    raise StopIteration\n"
    verdict = check(tests, code, sandbox)
    assert_outcome(verdict, "failed", Reason.TESTS_FAILED)
    assert "StopIteration" in verdict.details["error"]


def test_a_candidate_builtin_does_not_replace_the_tests_builtin(sandbox: Sandbox) -> None:
    tests = "assert abs(double(2) - 4) < 1e-9\n"
    code = "def abs(x):\n    return 0\ndef double(x):\n    return 3 * x\n"
    verdict = check(tests, code, sandbox)
    assert_outcome(verdict, "failed", Reason.TESTS_FAILED)
    assert "abs" in verdict.details["exposed"]["skipped"]


def test_a_check_function_is_called_on_the_entry_point(sandbox: Sandbox) -> None:
    # HumanEval style: the tests only define check(candidate); the harness calls it.
    tests = "def check(candidate):\n    assert candidate(2) == 4\n"
    wrong = "def double(x):\n    return x\n"
    verdict = check(tests, wrong, sandbox, entry_point="double")
    assert_outcome(verdict, "failed", Reason.TESTS_FAILED)
    assert_outcome(check(tests, CORRECT, sandbox, entry_point="double"), "passed", None)


def test_a_frame_that_is_not_an_object_is_tampering(sandbox: Sandbox) -> None:
    # Valid JSON, but no frame: the host relay must refuse it, not trip over it.
    code = FIND_CHANNEL + "def double(x):\n    _forge(b'[1, 2]\\n')\n    return 2 * x\n"
    verdict = check(DOUBLE_TESTS, code, sandbox)
    assert_outcome(verdict, "failed", Reason.TAMPER_DETECTED)
    assert verdict.details["tamper"] == "the candidate wrote a malformed protocol frame"


# --- the codec's side of the contract ------------------------------------------------------------


@pytest.mark.parametrize("line", [b"[1, 2]", b'"result"', b"7", b"null"])
def test_the_codec_refuses_a_frame_that_is_not_an_object(line: bytes) -> None:
    with pytest.raises(CodecError):
        loads_frame(line)


def test_the_codec_refuses_to_decode_a_value_nested_past_its_depth() -> None:
    # A forged reply may nest as deep as JSON parsing allows; decoding stops at MAX_DEPTH
    # with a CodecError (the call fails as "not plain data"), never a RecursionError.
    deep: object = 0
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(CodecError, match="nests too deeply"):
        from_data(deep)
