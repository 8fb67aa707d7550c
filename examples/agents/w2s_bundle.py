"""Two example candidates for the w2s-predictions pack, written as a run bundle.

    python examples/agents/w2s_bundle.py [--student] [PACK_FOLDER] > bundle.jsonl

Without --student every prediction is the weak teacher's label, copied as it is (its PGR is
0 by definition). With --student the arithmetic split is solved from its prompts and the
other splits keep the weak labels: a student that recovers part of the gap. Each line is
one task's artifact candidate: {"task_id": ..., "candidate": {"kind": "artifact",
"files": {"predictions.jsonl": ..., "run_manifest.json": ...}}}.
"""

from __future__ import annotations

import json
import operator
import re
import sys
from pathlib import Path

ARITHMETIC = re.compile(r"\AWhat is (-?\d+) ([-+*]) (-?\d+)\?\Z")
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def read_jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def solve(prompt: str) -> str | None:
    match = ARITHMETIC.match(prompt)
    if match is None:
        return None
    left, symbol, right = match.groups()
    return str(OPERATORS[symbol](int(left), int(right)))


def predictions(data: Path, student: bool) -> list[dict[str, str]]:
    weak = {row["id"]: row["weak_label"] for row in read_jsonl(data / "weak_labels.jsonl")}
    found = []
    for row in read_jsonl(data / "prompts.jsonl"):
        answer = solve(row["prompt"]) if student else None
        found.append({"id": row["id"], "answer": answer if answer is not None else weak[row["id"]]})
    return found


def bundle_lines(pack: Path, student: bool) -> list[dict[str, object]]:
    lines: list[dict[str, object]] = []
    for task in read_jsonl(pack / "tasks.jsonl"):
        public = task["input"]
        rows = predictions(pack / "assets" / public["split"], student)
        manifest = {
            "run_id": "example-student" if student else "example-weak-copy",
            "dataset_version": public["dataset_version"],
            "schema_version": public["schema_version"],
        }
        files = {
            "predictions.jsonl": "".join(json.dumps(row) + "\n" for row in rows),
            "run_manifest.json": json.dumps(manifest) + "\n",
        }
        lines.append({"task_id": task["id"], "candidate": {"kind": "artifact", "files": files}})
    return lines


def main(arguments: list[str]) -> None:
    student = "--student" in arguments
    folders = [argument for argument in arguments if argument != "--student"]
    pack = Path(folders[0]) if folders else Path(__file__).resolve().parents[1] / "w2s-predictions"
    for line in bundle_lines(pack, student):
        print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv[1:])
