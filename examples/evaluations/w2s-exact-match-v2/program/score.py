"""w2s-exact-match@2: a task's accuracy against the sealed strong labels, after normalising.

Rule (the one change from version 1): the predicted answer and the strong label are both
normalised, then compared.
- Whitespace: leading and trailing removed, inner runs collapsed to one space.
- Case: folded ("Seven" is "seven").
- A trailing full stop is dropped ("42." is "42").
- Numbers are compared by value: "42", "+42", "42.0", "4.2e1" and "84/2" are the same
  number, and commas between groups of three digits are dropped ("1,680" is "1680").
The first line for an id counts, later ones are ignored; a missing item, a line that is not
{"id": string, "answer": string}, or a missing predictions.jsonl counts as wrong.

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
from fractions import Fraction
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
GROUPED_NUMBER = re.compile(r"\A[+-]?\d{1,3}(,\d{3})+(\.\d+)?\Z")
DECIMAL_NUMBER = re.compile(r"\A[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d{1,3})?\Z")
RATIO = re.compile(r"\A[+-]?\d+/\d+\Z")


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


def normalise(text: str) -> tuple[str, str | Fraction]:
    """What an answer means: ("number", its exact value) or ("text", its folded text)."""
    folded = " ".join(text.split()).casefold()
    if folded.endswith("."):
        folded = folded[:-1].rstrip()
    number = _number(folded)
    return ("number", number) if number is not None else ("text", folded)


def _number(text: str) -> Fraction | None:
    if GROUPED_NUMBER.match(text):
        text = text.replace(",", "")
    # Fraction parses exactly (no float rounding) but also accepts forms such as "1_000";
    # the patterns keep to the documented forms, and a short exponent keeps "1e999999999"
    # from building a huge integer.
    if not (DECIMAL_NUMBER.match(text) or RATIO.match(text)):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):  # "3/0"
        return None


def same_answer(prediction: str | None, label: str) -> bool:
    return prediction is not None and normalise(prediction) == normalise(label)


def score(labels: dict[str, str], predictions: dict[str, str]) -> dict[str, float]:
    correct = sum(1 for item, label in labels.items() if same_answer(predictions.get(item), label))
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
