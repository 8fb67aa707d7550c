"""w2s-exact-match@1: a task's accuracy against the sealed strong labels, strict comparison.

Rule: an item is right when the candidate's predictions.jsonl has a line
{"id": ID, "answer": TEXT} for it whose TEXT equals the strong label character for
character (no trimming, no case folding, "42.0" is not "42"). The first line for an id
counts, later ones are ignored; a missing item, a line that is not such an object, or a
missing predictions.jsonl counts as wrong. Version 2 of this evaluation normalises first.

Paths: the sandbox's /evaluation/input.json, /evaluation/sealed/ and the candidate folder
named in input.json (/candidates/<n>). Outside the sandbox (tests, an author's machine)
SECUREBENCH_EVALUATION_ROOT and SECUREBENCH_CANDIDATES_ROOT (defaults /evaluation and
/candidates) say where those two roots are; a path in input.json under either root is read
under its replacement.

Output: exactly one line on stdout, {"metrics": {"accuracy": A, "coverage": C}}; everything
else goes to stderr (the program's log). Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOTS = (
    ("/evaluation", "SECUREBENCH_EVALUATION_ROOT"),
    ("/candidates", "SECUREBENCH_CANDIDATES_ROOT"),
)
SPLIT_NAME = re.compile(r"\A[a-z][a-z0-9_]{0,62}\Z")
# A prediction file far over the contract's max_bytes is not read at all: every item is
# then missing, which is what an unreadable artifact deserves.
MAX_PREDICTION_BYTES = 16 * 1024 * 1024


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def local_path(spec_path: str) -> Path:
    """Where a sandbox path (/evaluation/..., /candidates/...) lies on this machine."""
    for prefix, variable in ROOTS:
        if spec_path == prefix or spec_path.startswith(prefix + "/"):
            return Path(os.environ.get(variable, prefix) + spec_path[len(prefix) :])
    return Path(spec_path)


def read_jsonl(path: Path) -> list[Any]:
    """The JSON values of a file's non-blank lines; a line that is not JSON is None."""
    values: list[Any] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except ValueError:
            values.append(None)
    return values


def read_labels(split: str) -> dict[str, str]:
    """The split's strong labels, id -> answer, in file order."""
    if not SPLIT_NAME.match(split):
        raise SystemExit(f"task input names split {split!r}, which is not a split name")
    path = local_path(f"/evaluation/sealed/strong_labels/{split}.jsonl")
    if not path.is_file():
        # The evaluation has no labels for this task: its own fault, never the candidate's.
        raise SystemExit(f"no sealed strong labels for split {split!r}")
    return {record["id"]: record["answer"] for record in read_jsonl(path)}


def read_predictions(task: dict[str, Any]) -> dict[str, str]:
    """id -> answer from the candidate's predictions.jsonl; the first line for an id wins."""
    folder = task.get("candidate")
    if not folder:
        log("no candidate folder: every item counts as missing")
        return {}
    path = local_path(folder) / "predictions.jsonl"
    if path.is_symlink() or not path.is_file():
        log("predictions.jsonl is missing: every item counts as missing")
        return {}
    if path.stat().st_size > MAX_PREDICTION_BYTES:
        log(f"predictions.jsonl is over {MAX_PREDICTION_BYTES} bytes: not read")
        return {}
    predictions: dict[str, str] = {}
    skipped = 0
    for record in read_jsonl(path):
        if not _is_prediction(record):
            skipped += 1
        elif record["id"] not in predictions:
            predictions[record["id"]] = record["answer"]
    if skipped:
        log(f"{skipped} line(s) of predictions.jsonl are not {{id, answer}} strings: ignored")
    return predictions


def _is_prediction(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("id"), str)
        and isinstance(record.get("answer"), str)
    )


def score(labels: dict[str, str], predictions: dict[str, str]) -> dict[str, float]:
    correct = sum(1 for item, label in labels.items() if predictions.get(item) == label)
    answered = sum(1 for item in labels if item in predictions)
    log(f"{correct} of {len(labels)} right, {answered} answered")
    return {"accuracy": correct / len(labels), "coverage": answered / len(labels)}


def main() -> None:
    job = json.loads(local_path("/evaluation/input.json").read_text(encoding="utf-8"))
    (task,) = job["tasks"]  # task scope: exactly one task per call
    log(f"{job['evaluation']}: task {task['task_id']} sample {task.get('sample', 0)}")
    metrics = score(read_labels(task["input"]["split"]), read_predictions(task))
    print(json.dumps({"metrics": metrics}), flush=True)


if __name__ == "__main__":
    main()
