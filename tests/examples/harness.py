"""Running an example evaluation program directly, as the site's runner will, minus the sandbox.

A temporary folder stands in for /evaluation (program/, sealed/, input.json, tasks/<n>/files)
and for /candidates/<n>; the programs find these two roots through SECUREBENCH_EVALUATION_ROOT
and SECUREBENCH_CANDIDATES_ROOT. input.json is written as the site writes it, with the
sandbox's paths (/candidates/0, ...), so the programs' path mapping is exercised too. The
channel's rules for the final message are checked here, so a program that would be an
`evaluation_error` on the site fails these tests.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import queue
import shlex
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
EVALUATIONS = EXAMPLES / "evaluations"
PROGRAM_TIMEOUT = 120


@dataclass(frozen=True)
class TaskCall:
    """One task result as input.json lists it: the pack's row and the candidate's files."""

    task_id: str
    input: dict[str, Any]
    files: dict[str, str]
    sample: int = 0


@dataclass
class Exchange:
    """What the relay saw of one evaluation call with a player."""

    to_candidate: list[str] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0


def load_module(path: Path) -> Any:
    """A script of examples/ as a module (registered first: its dataclasses need that)."""
    name = f"examples_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def evaluation_spec(name: str) -> dict[str, Any]:
    return yaml.safe_load((EVALUATIONS / name / "evaluation.yaml").read_text(encoding="utf-8"))


def pack_rows(pack: str) -> list[dict[str, Any]]:
    text = (EXAMPLES / pack / "tasks.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def reference_files(pack: str, row: dict[str, Any]) -> dict[str, str]:
    """The task's hidden reference artifact (eval.reference_artifact), path -> text."""
    folder = EXAMPLES / pack / "hidden" / row["eval"]["reference_artifact"]["path"]
    return {
        path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def build_tree(root: Path, name: str, tasks: list[TaskCall]) -> None:
    spec = evaluation_spec(name)
    source = EVALUATIONS / name
    evaluation, candidates = root / "evaluation", root / "candidates"
    shutil.copytree(source / "program", evaluation / "program")
    if (source / "sealed").is_dir():
        shutil.copytree(source / "sealed", evaluation / "sealed")
    listed = []
    for index, task in enumerate(tasks):
        (evaluation / "tasks" / str(index) / "files").mkdir(parents=True)
        for path, text in task.files.items():
            target = candidates / str(index) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (candidates / str(index)).mkdir(parents=True, exist_ok=True)
        listed.append(
            {
                "task_id": task.task_id,
                "family": "artifact_task",
                "sample": task.sample,
                "input": task.input,
                "eval": {},
                "files": f"/evaluation/tasks/{index}/files",
                "candidate": f"/candidates/{index}",
                "candidate_files": sorted(task.files),
            }
        )
    document = {
        "evaluation": f"{spec['id']}@{spec['version']}",
        "scope": spec["scope"],
        "metrics": [
            {key: metric[key] for key in ("name", "direction", "range", "primary") if key in metric}
            for metric in spec["metrics"]
        ],
        "tasks": listed,
    }
    (evaluation / "input.json").write_text(json.dumps(document), encoding="utf-8")
    (root / "work").mkdir()


def program_command(name: str, root: Path) -> list[str]:
    """evaluation.yaml's command with /evaluation under `root` and python3 as this Python."""
    command = evaluation_spec(name)["program"]["command"]
    mapped = [sys.executable if word == "python3" else word for word in command]
    return [
        str(root / "evaluation") + word[len("/evaluation") :]
        if word.startswith("/evaluation/")
        else word
        for word in mapped
    ]


def program_env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SECUREBENCH_EVALUATION_ROOT": str(root / "evaluation"),
        "SECUREBENCH_CANDIDATES_ROOT": str(root / "candidates"),
    }


def run_evaluation(name: str, tasks: list[TaskCall], root: Path) -> dict[str, Any]:
    """Runs a program without a player; returns its final message, checked."""
    build_tree(root, name, tasks)
    finished = subprocess.run(
        program_command(name, root),
        env=program_env(root),
        cwd=root / "work",
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PROGRAM_TIMEOUT,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert len(lines) == 1, f"stdout must hold only the final message: {lines!r}"
    return checked_final(name, json.loads(lines[0]))


def checked_final(name: str, message: dict[str, Any]) -> dict[str, Any]:
    """The site's rules for the final message: declared names, the primary present, finite
    numbers inside the declared range, ci_low <= value <= ci_high."""
    spec = evaluation_spec(name)
    declared = {metric["name"]: metric for metric in spec["metrics"]}
    assert set(message) <= {"metrics", "passed"}, message
    metrics = message["metrics"]
    assert set(metrics) <= set(declared), f"undeclared: {set(metrics) - set(declared)}"
    primary = next(metric["name"] for metric in spec["metrics"] if metric.get("primary"))
    assert primary in metrics
    for metric, value in metrics.items():
        low, high = declared[metric]["range"]
        numbers = [value] if not isinstance(value, dict) else list(value.values())
        if isinstance(value, dict):
            assert set(value) == {"value", "ci_low", "ci_high"}, value
            assert value["ci_low"] <= value["value"] <= value["ci_high"], (metric, value)
        for number in numbers:
            assert isinstance(number, int | float) and math.isfinite(number), (metric, value)
            assert low is None or number >= low, (metric, value)
            assert high is None or number <= high, (metric, value)
    return message


# --- the host's relay to a candidate's player --------------------------------------------------


class PlayerProcess:
    """The candidate's player: its files copied into a work folder, its command started there,
    one reply line awaited per request (a thread reads its stdout into a queue)."""

    def __init__(self, files: dict[str, str], folder: Path) -> None:
        folder.mkdir(parents=True)
        for path, text in files.items():
            (folder / path).write_text(text, encoding="utf-8")
        words = shlex.split(files.get("load_player_command.txt", ""))
        # The site runs the command in the player's own image; here python3 is this Python.
        command = [sys.executable if word == "python3" else word for word in words]
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.process = subprocess.Popen(
            command,
            cwd=folder,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def ask(self, line: str, timeout: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return {"from_candidate": None, "problem": "exited"}
        try:
            reply = self.lines.get(timeout=timeout)
        except queue.Empty:
            return {"from_candidate": None, "problem": "timeout"}
        if reply is None:
            return {"from_candidate": None, "problem": "exited"}
        return {"from_candidate": reply.rstrip("\n")}

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def run_arena(
    name: str, task: TaskCall, root: Path, reply_timeout: float
) -> tuple[dict[str, Any], Exchange]:
    """Runs a program with a player behind the relay; returns the final message and what the
    relay saw. `reply_timeout` is the host's per-request wait."""
    build_tree(root, name, [task])
    program = subprocess.Popen(
        program_command(name, root),
        env=program_env(root),
        cwd=root / "work",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert program.stdin is not None and program.stdout is not None
    seen = Exchange()
    player = PlayerProcess(task.files, root / "player-0")
    final: dict[str, Any] | None = None
    try:
        for line in program.stdout:
            assert final is None, f"a line after the final message: {line!r}"
            message = json.loads(line)
            if "to_candidate" in message:
                seen.to_candidate.append(message["to_candidate"])
                answer = player.ask(message["to_candidate"], reply_timeout)
                seen.replies.append(answer)
            elif message.get("restart_candidate") is True:
                player.stop()
                seen.restarts += 1
                player = PlayerProcess(task.files, root / f"player-{seen.restarts}")
                answer = {"restarted": True}
            else:
                final = message
                continue
            program.stdin.write(json.dumps(answer) + "\n")
            program.stdin.flush()
        program.wait(timeout=PROGRAM_TIMEOUT)
    finally:
        player.stop()
        if program.poll() is None:
            program.kill()
    stderr = program.stderr.read() if program.stderr else ""
    assert program.returncode == 0, stderr
    assert final is not None, stderr
    return checked_final(name, final), seen


def wilson(wins: int, games: int) -> tuple[float, float]:
    """The 95 % Wilson score interval, written out from its textbook form."""
    z = 1.959963984540054
    p = wins / games
    denominator = 1 + z**2 / games
    centre = p + z**2 / (2 * games)
    spread = z * math.sqrt(p * (1 - p) / games + z**2 / (4 * games**2))
    return (centre - spread) / denominator, (centre + spread) / denominator
