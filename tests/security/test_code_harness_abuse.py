"""A failing code candidate that tries to make its failure look like ours: the test harness
handles what the candidate's worker sends (names, module names, error messages), and none of
it may crash the harness, run code there, or swell its result past the relay's frame cap.
Each ends as the candidate's failure, on both backends; none is retried as an infrastructure
error (security.md: a candidate's own crash or abuse is its failure)."""

from __future__ import annotations

import pytest

from tests.verifiers.test_code_completion import BARE_CALL, entry_point, explain, get_task, run
from verifiers.sandbox.base import Sandbox
from verifiers.verdict import Reason

ABUSES = {
    # 50 names of 20,000 characters: each under the worker's frame cap, but the harness
    # used to copy every one twice into its own result.
    "long-names": (
        "for _i in range(50):\n    globals()['-' * 20000 + str(_i)] = lambda: 0\n",
        Reason.TESTS_FAILED,
    ),
    # A module object named like a standard-library __main__: importing that name runs
    # unittest.main() in the harness, which exits.
    "stdlib-main-module": (
        "import types\nhelper = types.ModuleType('unittest.__main__')\n",
        Reason.TESTS_FAILED,
    ),
    # The worker's own reply rewritten: a names answer the harness cannot read.
    "malformed-names-reply": (
        "import __main__\n"
        "__main__._exposed = lambda module, source: {'modules': 5, 'functions': [], 'data': []}\n",
        Reason.INVALID_CANDIDATE,
    ),
    # The worker's error report rewritten: a KeyError message that doubles when the harness
    # raises it again and describes it.
    "amplified-error-message": (
        "import __main__\n"
        "__main__._describe = lambda exc: {'type': 'KeyError', 'message': '\\\\' * 500000}\n",
        Reason.TESTS_FAILED,
    ),
}


@pytest.mark.parametrize(("payload", "reason"), ABUSES.values(), ids=ABUSES.keys())
def test_a_candidate_abusing_the_harness_fails_as_itself(
    payload: str, reason: str, sandbox: Sandbox
) -> None:
    task = get_task(BARE_CALL)
    code = payload + f"def {entry_point(task)}(a, b):\n    raise ValueError('not solved')\n"

    verdict = run(task, code, sandbox)

    assert (verdict.status, verdict.reason) == ("failed", reason), explain(verdict)
    assert len(str(verdict.details)) < 50_000  # what is kept of the candidate's text is bounded
