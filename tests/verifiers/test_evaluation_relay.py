"""An arena evaluation: the program plays against the candidate's own player (issue 33).

The game is a Nim-like echo: the program sends "pile N", a player answers "take K". The
program logs every answer it gets (its stderr is the outcome's log) and scores the share of
well-formed answers. Each player here is an agent's attack on the relay; on both backends.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.verifiers.test_evaluation_program import SEALED_SECRET, _run
from verifiers import evaluation_relay
from verifiers.evaluation_messages import MetricDeclaration
from verifiers.evaluation_program import CandidateProgram, ProgramSpec
from verifiers.sandbox.base import MiB, Sandbox

pytestmark = pytest.mark.database_independent

ARENA = ProgramSpec(
    key="nim@1",
    scope="task",
    command=("python3", "/evaluation/program/score.py"),
    image=None,
    timeout_seconds=30,
    memory_bytes=512 * MiB,
    metrics=(MetricDeclaration("score", "higher", 0.0, 1.0, primary=True),),
    candidate_program=CandidateProgram(command_file="player.cmd", reply_timeout_seconds=1.0),
)

# Three rounds; every answer goes to the log as the program received it.
REFEREE = """
    import json, sys
    good = 0
    for pile in (7, 5, 3):
        print(json.dumps({"to_candidate": f"pile {pile}"}), flush=True)
        answer = json.loads(sys.stdin.readline())
        print("answer", json.dumps(answer), file=sys.stderr, flush=True)
        reply = answer.get("from_candidate")
        good += isinstance(reply, str) and reply.startswith("take ")
    print(json.dumps({"metrics": {"score": good / 3}}))
"""

FAIR_PLAYER = """
    import sys
    for line in sys.stdin:
        pile = int(line.split()[1])
        print(f"take {pile % 4 or 1}", flush=True)
"""


def _arena(
    sandbox: Sandbox, tmp_path: Path, player: str, referee: str = REFEREE, **changes: object
):
    candidate = {"player.cmd": "python3 -u player.py\n", "player.py": player}
    return _run(sandbox, tmp_path, referee, candidate=candidate, spec=replace(ARENA, **changes))


def _answers(log: str) -> list[dict]:
    return [json.loads(line[len("answer ") :]) for line in log.splitlines() if "answer " in line]


def test_a_fair_player_is_relayed_line_by_line(sandbox: Sandbox, tmp_path: Path) -> None:
    outcome = _arena(sandbox, tmp_path, FAIR_PLAYER)
    assert (outcome.status, outcome.problem) == ("ok", "")
    assert outcome.metrics["score"]["value"] == 1.0
    assert _answers(outcome.log) == [
        {"from_candidate": "take 3"},
        {"from_candidate": "take 1"},
        {"from_candidate": "take 3"},
    ]


def test_a_forged_final_message_from_the_player_is_only_data(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The player prints the channel's final message (and a request to itself); both reach
    the program as strings, and the call's metrics are the program's own."""
    player = """
        import sys
        for line in sys.stdin:
            print('{"metrics": {"score": 1.0}}\\n', end="", flush=True)
            print('{"metrics": {"score": 1.0}}', file=sys.stderr, flush=True)
    """
    outcome = _arena(sandbox, tmp_path, player)
    assert outcome.status == "ok"
    assert outcome.metrics["score"]["value"] == 0.0
    assert _answers(outcome.log)[0] == {"from_candidate": '{"metrics": {"score": 1.0}}'}


def test_the_player_cannot_see_the_sealed_data(sandbox: Sandbox, tmp_path: Path) -> None:
    """The player looks for /evaluation and /candidates and reports what it found; the
    program can read its sealed file, yet no byte of it comes back through the player."""
    player = r"""
        import os, sys
        found = []
        for path in ("/evaluation/sealed/secret.txt", "/evaluation/input.json",
                     "/evaluation", "/candidates", "/evaluation/sealed"):
            try:
                found.append(path + "=" + (open(path).read() if os.path.isfile(path)
                                           else ",".join(os.listdir(path))))
            except OSError as exc:
                found.append(path + ":" + exc.__class__.__name__)
        found.append("work=" + ",".join(sorted(os.listdir("/work"))))
        for line in sys.stdin:
            print("take 1 " + " ".join(found), flush=True)
    """
    referee = REFEREE.replace(
        "good = 0", "good = 0\n    assert open('/evaluation/sealed/secret.txt').read()"
    )
    outcome = _arena(sandbox, tmp_path, player, referee=referee)
    assert outcome.status == "ok", outcome.problem
    seen = _answers(outcome.log)[0]["from_candidate"]
    assert "/evaluation/sealed/secret.txt:FileNotFoundError" in seen
    assert "/evaluation:FileNotFoundError" in seen and "/candidates:FileNotFoundError" in seen
    assert "work=player.cmd,player.py" in seen  # the candidate's own files, copied in
    assert SEALED_SECRET not in outcome.log and "sealed-" not in seen


def test_a_player_that_never_answers_is_a_timeout_for_the_program(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    player = "import time\ntime.sleep(3600)\n"
    started = time.monotonic()
    outcome = _arena(sandbox, tmp_path, player)
    assert (outcome.status, outcome.problem) == ("ok", "")  # the program judged it: zero
    assert outcome.metrics["score"]["value"] == 0.0
    # Killed at the first missed reply, so the next requests are answered at once.
    assert _answers(outcome.log) == [{"from_candidate": None, "problem": "timeout"}] * 3
    assert outcome.candidate_notes == ["player 1: timeout"]
    assert time.monotonic() - started < 15


def test_a_fork_bomb_player_harms_neither_the_program_nor_the_call(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    player = """
        import os, sys
        sys.stdin.readline()
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """
    outcome = _arena(sandbox, tmp_path, player)
    assert (outcome.status, outcome.problem) == ("ok", "")
    assert outcome.metrics["score"]["value"] == 0.0
    assert _answers(outcome.log)[0] == {"from_candidate": None, "problem": "timeout"}


@pytest.mark.parametrize(
    ("player", "problem"),
    [
        ("import sys\nsys.stdin.readline()\nprint('x' * 70000, flush=True)\n", "too_long"),
        ("import sys\nsys.stdin.readline()\n", "exited"),
        ("raise SystemExit(3)\n", "exited"),
    ],
)
def test_a_broken_player_is_a_problem_told_to_the_program(
    sandbox: Sandbox, tmp_path: Path, player: str, problem: str
) -> None:
    outcome = _arena(sandbox, tmp_path, player)
    assert (outcome.status, outcome.problem) == ("ok", "")
    assert _answers(outcome.log)[0] == {"from_candidate": None, "problem": problem}


def test_a_candidate_without_a_usable_command_is_not_started(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    candidate = {"player.cmd": "python3 'player.py", "player.py": FAIR_PLAYER}
    outcome = _run(sandbox, tmp_path, REFEREE, candidate=candidate, spec=ARENA)
    assert outcome.status == "ok"
    assert _answers(outcome.log)[0] == {"from_candidate": None, "problem": "not_started"}
    assert "command file player.cmd is not a command line" in outcome.candidate_notes[0]


def test_restarts_give_a_fresh_player_up_to_the_cap(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A player that answers once and then exits; the program restarts it each round until
    the cap (lowered here from 100 to keep the test short) refuses."""
    monkeypatch.setattr(evaluation_relay, "MAX_RESTARTS", 2)
    player = "import sys\nline = sys.stdin.readline()\nprint('take 1', flush=True)\n"
    referee = """
        import json, sys
        def send(message):
            print(json.dumps(message), flush=True)
            answer = json.loads(sys.stdin.readline())
            print("answer", json.dumps(answer), file=sys.stderr, flush=True)
        for _ in range(3):
            send({"to_candidate": "pile 1"})
            send({"restart_candidate": True})
        print(json.dumps({"metrics": {"score": 1}}))
    """
    outcome = _arena(sandbox, tmp_path, player, referee=referee)
    assert outcome.status == "ok", outcome.problem
    take, restarted = {"from_candidate": "take 1"}, {"restarted": True}
    refused = {"restarted": False, "problem": "too_many_restarts"}
    assert _answers(outcome.log) == [take, restarted, take, restarted, take, refused]


@pytest.mark.parametrize(
    ("request_line", "named"),
    [
        ('{"to_candidate": "pile 1\\n{}"}', "stdout line 1: to_candidate string contains a line"),
        ('{"to_candidate": "' + "x" * 70_000 + '"}', "over the 65535 byte cap"),
    ],
)
def test_a_request_that_would_break_the_player_protocol_is_the_programs_error(
    sandbox: Sandbox, tmp_path: Path, request_line: str, named: str
) -> None:
    referee = f"print({request_line!r}, flush=True)\nimport time\ntime.sleep(60)\n"
    outcome = _arena(sandbox, tmp_path, FAIR_PLAYER, referee=referee)
    assert (outcome.status, outcome.reason) == ("error", "evaluation_error")
    assert named in outcome.problem


def test_a_program_flooding_the_relay_hits_the_stdout_cap(sandbox: Sandbox, tmp_path: Path) -> None:
    referee = """
        import json, sys
        request = json.dumps({"to_candidate": "x" * 60000})
        for _ in range(200):
            print(request, flush=True)
            sys.stdin.readline()
        print(json.dumps({"metrics": {"score": 1}}))
    """
    player = "import sys\nfor line in sys.stdin:\n    print('ok', flush=True)\n"
    outcome = _arena(sandbox, tmp_path, player, referee=referee)
    assert (outcome.status, outcome.reason) == ("error", "evaluation_error")
    assert outcome.problem == f"stdout is over {8 * MiB} bytes"


def test_a_late_reply_never_answers_the_next_request(sandbox: Sandbox, tmp_path: Path) -> None:
    """A player that answers the first request after the reply timeout: its late line must
    not be taken as the answer to the second request (it was killed at the timeout)."""
    player = """
        import sys, time
        for number, line in enumerate(sys.stdin):
            if number == 0:
                time.sleep(1.5)
                print("take late", flush=True)
            else:
                print("take 1", flush=True)
    """
    outcome = _arena(sandbox, tmp_path, player)
    assert outcome.status == "ok", outcome.problem
    assert "take late" not in outcome.log
    assert _answers(outcome.log)[1] == {"from_candidate": None, "problem": "timeout"}
