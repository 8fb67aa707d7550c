"""An uploaded evaluation program run for real, on both backends (issue 33).

Each test plays an author's program (or an agent's player behind the relay) doing what it
would do to cheat or break the site, and checks what the host makes of it. Nothing under
test is mocked: the programs are Python run by python3 inside the sandbox.
"""

from __future__ import annotations

import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from verifiers.evaluation_messages import MetricDeclaration
from verifiers.evaluation_program import (
    ProgramOutcome,
    ProgramSpec,
    ProgramTask,
    run_evaluation_program,
)
from verifiers.sandbox.base import MiB, Sandbox

pytestmark = pytest.mark.database_independent

SEALED_SECRET = "sealed-answer-7f3a9c"  # must never reach anything the host keeps
ACCURACY = MetricDeclaration("accuracy", "higher", 0.0, 1.0, primary=True)
SPEC = ProgramSpec(
    key="exact-match@1",
    scope="task",
    command=("python3", "/evaluation/program/score.py"),
    image=None,
    timeout_seconds=20,
    memory_bytes=512 * MiB,
    metrics=(ACCURACY, MetricDeclaration("escapes", "lower", 0, None)),
)


def _folder(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(textwrap.dedent(text))
    return path


def _run(
    sandbox: Sandbox,
    tmp_path: Path,
    program: str,
    candidate: dict[str, str] | None = None,
    spec: ProgramSpec = SPEC,
) -> ProgramOutcome:
    task = ProgramTask(
        task_id="t-1",
        family="artifact_task",
        sample=0,
        input={"question": "6 * 7"},
        eval={"expected": "42"},
        files_dir=_folder(tmp_path / "files", {"reference.txt": "42\n"}),
        candidate_dir=_folder(tmp_path / "candidate", candidate or {"answer.txt": "42\n"}),
    )
    return run_evaluation_program(
        sandbox,
        spec,
        _folder(tmp_path / "program", {"score.py": program}),
        _folder(tmp_path / "sealed", {"secret.txt": SEALED_SECRET}),
        [task],
    )


# --- an honest program ---------------------------------------------------------------------------

HONEST = """
    import json, os, sys
    doc = json.load(open("/evaluation/input.json"))
    task = doc["tasks"][0]
    answer = open(os.path.join(task["candidate"], "answer.txt")).read().strip()
    reference = open(os.path.join(task["files"], "reference.txt")).read().strip()
    sealed = open("/evaluation/sealed/secret.txt").read()
    print("scoring", task["task_id"], task["candidate_files"], file=sys.stderr)
    right = answer == reference == task["eval"]["expected"] and sealed.startswith("sealed-")
    assert doc["evaluation"] == "exact-match@1" and doc["scope"] == "task"
    assert doc["metrics"][0] == {
        "name": "accuracy", "direction": "higher", "range": [0.0, 1.0], "primary": True}
    value = 1.0 if right else 0.0
    print(json.dumps({"metrics": {
        "accuracy": {"value": value, "ci_low": value / 2, "ci_high": value},
        "escapes": 0}, "passed": right}))
"""


def test_an_honest_program_reads_its_inputs_and_reports(sandbox: Sandbox, tmp_path: Path) -> None:
    outcome = _run(sandbox, tmp_path, HONEST)
    assert (outcome.status, outcome.problem) == ("ok", "")
    assert outcome.metrics["accuracy"] == {"value": 1.0, "ci_low": 0.5, "ci_high": 1.0}
    assert outcome.metrics["escapes"]["value"] == 0.0
    assert outcome.passed is True
    assert "scoring t-1 ['answer.txt']" in outcome.log
    assert outcome.backend == sandbox.name


def test_a_wrong_candidate_scores_zero_not_an_error(sandbox: Sandbox, tmp_path: Path) -> None:
    outcome = _run(sandbox, tmp_path, HONEST, candidate={"answer.txt": "41"})
    assert outcome.status == "ok"
    assert outcome.metrics["accuracy"]["value"] == 0.0 and outcome.passed is False


# --- a broken or dishonest program ------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "named"),
    [
        ("raise SystemExit(1)", "the program exited with status 1"),
        ("print('all good, 100%')", "stdout line 1 is not JSON: 'all good, 100%'"),
        ('print(\'{"metrics": {"accuracy": 1, "bonus": 5}}\')', "metric 'bonus' is not declared"),
        ('print(\'{"metrics": {"accuracy": NaN}}\')', "metric 'accuracy' is not a finite number"),
        ('print(\'{"metrics": {"accuracy": 1.5}}\')', "metric 'accuracy' is 1.5, outside its"),
        ('print(\'{"metrics": {"escapes": 0}}\')', "the primary metric 'accuracy' is missing"),
        ("print('{\"score\": 1}')", "stdout line 1 is not a message of the channel"),
        ("pass", "the program ended without a final message"),
        (
            'print(\'{"metrics": {"accuracy": 1}}\\n{"metrics": {"accuracy": 0}}\')',
            "more than one final message",
        ),
        ('print(\'{"to_candidate": "hi"}\')', "the evaluation declares no candidate_program"),
        ("print('x' * (2 * 1024 * 1024))", "a stdout line is over 1048576 bytes"),
    ],
)
def test_a_bad_program_is_an_evaluation_error_naming_it(
    sandbox: Sandbox, tmp_path: Path, program: str, named: str
) -> None:
    outcome = _run(sandbox, tmp_path, program)
    assert (outcome.status, outcome.reason) == ("error", "evaluation_error")
    assert named in outcome.problem
    assert outcome.metrics == {} and outcome.passed is None


@pytest.mark.parametrize(
    "program",
    [
        "import time\ntime.sleep(3600)",  # prints nothing, never ends
        'import time\nprint(\'{"metrics": {"accuracy": 1}}\', flush=True)\ntime.sleep(3600)',
        "import os, time\nos.close(1)\ntime.sleep(3600)",  # closes stdout, lives on
    ],
)
def test_a_program_that_never_ends_times_out(
    sandbox: Sandbox, tmp_path: Path, program: str
) -> None:
    started = time.monotonic()
    outcome = _run(sandbox, tmp_path, program, spec=replace(SPEC, timeout_seconds=2))
    assert (outcome.status, outcome.reason) == ("error", "evaluation_error")
    assert outcome.problem == "the program timed out after 2 s"
    assert time.monotonic() - started < 15


def test_only_stdout_counts_not_files_the_program_leaves(sandbox: Sandbox, tmp_path: Path) -> None:
    """A program that writes a metrics file (in /work, beside its inputs, anywhere it can)
    and prints nothing has reported nothing; its inputs stay read-only."""
    program = """
        import json, os, sys
        forged = json.dumps({"metrics": {"accuracy": 1.0}})
        escapes = 0
        for path in ("/work/metrics.json", "/work/result.json", "/tmp/metrics.json",
                     "/evaluation/metrics.json", "/evaluation/program/metrics.json",
                     "/evaluation/sealed/secret.txt", "/candidates/0/answer.txt",
                     "/evaluation/input.json", "/metrics.json"):
            try:
                with open(path, "w") as out:
                    out.write(forged)
                print("wrote", path, file=sys.stderr)
                if not path.startswith(("/work/", "/tmp/")):
                    escapes += 1
            except OSError as exc:
                print("refused", path, exc.errno, file=sys.stderr)
        if os.environ.get("REPORT") or "--report" in sys.argv:
            print(json.dumps({"metrics": {"accuracy": 0.0, "escapes": escapes}}))
    """
    silent = _run(sandbox, tmp_path / "silent", program)
    assert silent.problem == "the program ended without a final message"
    assert "wrote /work/metrics.json" in silent.log  # it could write there; nobody read it
    reporting = replace(SPEC, command=(*SPEC.command, "--report"))
    outcome = _run(sandbox, tmp_path / "reporting", program, spec=reporting)
    assert outcome.status == "ok"
    assert outcome.metrics["accuracy"]["value"] == 0.0  # its stdout, not its files
    assert outcome.metrics["escapes"]["value"] == 0.0, outcome.log


def test_the_programs_view_is_mounted_read_only(sandbox: Sandbox, tmp_path: Path) -> None:
    """Read-only by the mount itself, not only by file modes: the program reads its own
    mount table (a file the sandbox's uid owned would otherwise be writable)."""
    program = """
        import json
        options = {}
        for line in open("/proc/self/mountinfo"):
            fields = line.split()
            if fields[4] in ("/evaluation", "/candidates"):
                options[fields[4]] = fields[5].split(",")
        print(json.dumps(options), file=__import__("sys").stderr)
        ro = all("ro" in found for found in options.values()) and len(options) == 2
        print(json.dumps({"metrics": {"accuracy": float(ro), "escapes": 0}}))
    """
    outcome = _run(sandbox, tmp_path, program)
    assert outcome.status == "ok", outcome.problem
    assert outcome.metrics["accuracy"]["value"] == 1.0, outcome.log


def test_a_link_in_an_uploaded_folder_is_refused_not_followed(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """An upload whose program folder holds a link to a host file: following it would copy
    the host's file into the sandbox for the program to print."""
    host_secret = tmp_path / "host-secret.txt"
    host_secret.write_text("host-only-bytes")
    program_dir = _folder(
        tmp_path / "program", {"score.py": "print(open('/evaluation/program/leak').read())"}
    )
    (program_dir / "leak").symlink_to(host_secret)
    task = ProgramTask("t-1", "artifact_task", 0, {}, {}, None, _folder(tmp_path / "c", {}))
    outcome = run_evaluation_program(sandbox, SPEC, program_dir, None, [task])
    assert (outcome.status, outcome.reason) == ("error", "evaluation_error")
    assert "program/leak is a link or special file" in outcome.problem
    assert outcome.backend is None  # refused before any sandbox ran


def test_a_link_to_a_host_folder_is_refused_not_descended(sandbox: Sandbox, tmp_path: Path) -> None:
    """A link to a host folder in the sealed data: descending it would copy every file of
    that folder into the sandbox's view."""
    host_folder = _folder(tmp_path / "host", {"key.pem": "host-only-bytes"})
    sealed_dir = _folder(tmp_path / "sealed", {"labels.txt": "42"})
    (sealed_dir / "more").symlink_to(host_folder, target_is_directory=True)
    program = "import os\nprint(os.listdir('/evaluation/sealed/more'))"
    program_dir = _folder(tmp_path / "program", {"score.py": program})
    task = ProgramTask("t-1", "artifact_task", 0, {}, {}, None, _folder(tmp_path / "c", {}))
    outcome = run_evaluation_program(sandbox, SPEC, program_dir, sealed_dir, [task])
    assert (outcome.status, outcome.reason) == ("error", "evaluation_error")
    assert "sealed/more is a link or special file" in outcome.problem
    assert outcome.backend is None and "key.pem" not in outcome.log


def test_without_a_player_the_program_reads_an_empty_stdin(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    program = """
        import json, sys
        extra = sys.stdin.read()  # would block for ever on an open pipe
        print(json.dumps({"metrics": {"accuracy": int(extra == "")}}))
    """
    outcome = _run(sandbox, tmp_path, program, spec=replace(SPEC, timeout_seconds=5))
    assert (outcome.status, outcome.problem) == ("ok", "")
    assert outcome.metrics["accuracy"]["value"] == 1.0


@pytest.mark.parametrize(
    ("program", "memory_mib", "named"),
    [
        (
            # Memory high enough that 64 Python processes' RSS stays under it (bwrap's
            # watchdog sums RSS), so the process limit is what stops it.
            "import os\n"
            "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
            2048,
            "the program reached the limit of 64 processes",
        ),
        (
            "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))",
            128,
            "the program went over its memory limit of 128 MiB",
        ),
        (
            "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)",
            128,
            "the program wrote more than 1048576 bytes to stderr",
        ),
    ],
)
def test_a_program_past_its_limits_is_named_by_the_limit(
    sandbox: Sandbox, tmp_path: Path, program: str, memory_mib: int, named: str
) -> None:
    spec = replace(SPEC, timeout_seconds=5, memory_bytes=memory_mib * MiB)
    outcome = _run(sandbox, tmp_path, program, spec=spec)
    assert (outcome.status, outcome.reason) == ("error", "evaluation_error")
    assert outcome.problem == named
    assert len(outcome.log) <= 70_000  # its stderr, capped
