"""The evaluation program's channel, without a sandbox: every line parsed and every final
message checked against the declared metrics (issue 33). The sandboxed runs are in
test_evaluation_program.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifiers.evaluation_messages import (
    FINAL,
    RESTART_CANDIDATE,
    TO_CANDIDATE,
    MetricDeclaration,
    parse_line,
    validated_final,
    validated_metrics,
)
from verifiers.evaluation_relay import CandidateProgram, player_command, request_problem

pytestmark = pytest.mark.database_independent

DECLARED = (
    MetricDeclaration("accuracy", "higher", 0.0, 1.0, primary=True),
    MetricDeclaration("loss", "lower", 0.0, None),
)


def test_a_number_and_an_interval_are_both_taken() -> None:
    metrics, problem = validated_metrics(
        {"accuracy": {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}, "loss": 3}, DECLARED
    )
    assert problem == ""
    assert metrics == {
        "accuracy": {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6},
        "loss": {"value": 3.0, "ci_low": None, "ci_high": None},
    }


@pytest.mark.parametrize(
    ("reported", "named"),
    [
        ({"accuracy": 1, "bogus": 1}, "metric 'bogus' is not declared"),
        ({"loss": 1}, "primary metric 'accuracy' is missing"),
        ({"accuracy": True}, "metric 'accuracy' must be a number, not True"),
        ({"accuracy": "1"}, "metric 'accuracy' must be a number, not '1'"),
        ({"accuracy": None}, "metric 'accuracy' must be a number, not None"),
        ({"accuracy": float("nan")}, "metric 'accuracy' is not a finite number: nan"),
        ({"accuracy": 1, "loss": float("inf")}, "metric 'loss' is not a finite number: inf"),
        ({"accuracy": 10**400}, "metric 'accuracy' is not a finite number"),
        ({"accuracy": 1.5}, "metric 'accuracy' is 1.5, outside its declared range [0.0, 1.0]"),
        ({"accuracy": 1, "loss": -0.1}, "metric 'loss' is -0.1, outside its declared range"),
        (
            {"accuracy": {"value": 0.5, "ci_low": -0.1, "ci_high": 0.6}},
            "metric 'accuracy.ci_low' is -0.1, outside its declared range",
        ),
        (
            {"accuracy": {"value": 0.5, "ci_low": 0.6, "ci_high": 0.9}},
            "metric 'accuracy' has value 0.5 outside its interval [0.6, 0.9]",
        ),
        (
            {"accuracy": {"value": 0.5, "ci_low": 0.1}},
            "metric 'accuracy' must be a number or",
        ),
        ({"accuracy": {"value": 0.5, "extra": 1}}, "metric 'accuracy' must be a number or"),
        ([0.5], "metrics must be an object"),
    ],
)
def test_each_bad_metric_is_named_with_its_value(reported: object, named: str) -> None:
    metrics, problem = validated_metrics(reported, DECLARED)
    assert metrics == {}
    assert named in problem


def test_passed_must_be_a_boolean() -> None:
    assert validated_final({"metrics": {"accuracy": 1}, "passed": True}, DECLARED).passed is True
    report = validated_final({"metrics": {"accuracy": 1}, "passed": "yes"}, DECLARED)
    assert report.problem == "passed must be true or false, not 'yes'"


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (b'{"metrics": {"accuracy": 1}}', FINAL),
        (b'{"metrics": {}, "passed": false}', FINAL),
        (b'{"to_candidate": "pile 3"}', TO_CANDIDATE),
        (b'{"restart_candidate": true}', RESTART_CANDIDATE),
    ],
)
def test_the_three_messages(line: bytes, kind: str) -> None:
    message, problem = parse_line(line, 1)
    assert problem == ""
    assert message is not None and message.kind == kind


@pytest.mark.parametrize(
    ("line", "named"),
    [
        (b"hello", "stdout line 4 is not JSON: 'hello'"),
        (b"\xff\xfe", "stdout line 4 is not UTF-8 text"),
        (b"[1, 2]", "stdout line 4 is not a JSON object"),
        (b'{"metrics": {}, "extra": 1}', "stdout line 4 is not a message of the channel"),
        (b'{"to_candidate": 3}', "is not a message of the channel"),
        (b'{"restart_candidate": false}', "is not a message of the channel"),
        (b'{"to_candidate": "a", "restart_candidate": true}', "not a message of the channel"),
        (b'{"metrics": {"accuracy": 0}, "metrics": {"accuracy": 1}}', "repeats the key"),
        (b"[" * 100_000 + b"]" * 100_000, "stdout line 4 is not JSON"),
    ],
)
def test_anything_else_is_refused_by_line(line: bytes, named: str) -> None:
    message, problem = parse_line(line, 4)
    assert message is None
    assert named in problem
    assert len(problem) < 200  # program-made text is quoted in short excerpts only


def test_a_request_to_the_player_is_one_bounded_line() -> None:
    assert request_problem("pile 3") == ""
    assert "line break" in request_problem("pile 3\n{}")
    assert "over the 65535 byte cap" in request_problem("x" * 70_000)


@pytest.mark.parametrize(
    ("content", "expected", "why"),
    [
        (b"python3 player.py --fast\n", ["python3", "player.py", "--fast"], ""),
        (b"python3 'my player.py'", ["python3", "my player.py"], ""),
        (b"python3\0 player.py", [], "contains a NUL byte"),
        (b"python3 " + b"x" * 1100, [], "is over 1024 bytes"),
        (b"\xff\xfe", [], "is not UTF-8 text"),
        (b"python3 'unclosed", [], "is not a command line"),
        (b"   \n", [], "is empty"),
    ],
)
def test_the_command_file_of_a_candidate(
    tmp_path: Path, content: bytes, expected: list[str], why: str
) -> None:
    (tmp_path / "cmd.txt").write_bytes(content)
    program = CandidateProgram(command_file="cmd.txt")
    argv, problem = player_command(program, tmp_path)
    assert argv == expected
    assert why in problem


def test_the_command_file_must_be_a_file_of_the_candidate(tmp_path: Path) -> None:
    (tmp_path / "cmd.txt").symlink_to("/etc/passwd")
    for name in ("cmd.txt", "../cmd.txt", "/etc/passwd", "missing.txt"):
        argv, problem = player_command(CandidateProgram(command_file=name), tmp_path)
        assert argv == [] and problem, name
    argv, _ = player_command(CandidateProgram(command=("./play",)), tmp_path)
    assert argv == ["./play"]


def test_a_command_file_name_cannot_climb_out_of_the_candidate(tmp_path: Path) -> None:
    """A file beside the candidate's folder (another task's, the host's) is no command file,
    even when it exists, nor a link to it."""
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (tmp_path / "outside.cmd").write_text("python3 steal.py\n")
    for name in ("../outside.cmd", "sub/../../outside.cmd"):
        argv, problem = player_command(CandidateProgram(command_file=name), candidate)
        assert argv == [] and problem.startswith("command file: "), name
    # A link to it is no command file either, however short the file it points to.
    (candidate / "link.cmd").symlink_to(tmp_path / "outside.cmd")
    argv, problem = player_command(CandidateProgram(command_file="link.cmd"), candidate)
    assert argv == [] and problem == "the candidate has no command file link.cmd"


def test_input_metrics_are_the_declared_form() -> None:
    assert json.loads(json.dumps(DECLARED[1].as_input())) == {
        "name": "loss",
        "direction": "lower",
        "range": [0.0, None],
        "primary": False,
    }
