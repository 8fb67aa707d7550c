"""Writes the data of the w2s-predictions example pack and of its three evaluations.

Run from the repository root: `python examples/generators/w2s_math.py [EXAMPLES_DIR]`.
Everything comes from fixed seeds, so a second run rewrites the committed files byte for
byte (tests/examples checks that). The strong labels are the true answers; the weak teacher
is right with a fixed probability per split and writes about a quarter of its answers in a
loose number format ("42.0", " 42", "1,680"), so exact match v1 and v2 score it differently.

What goes where:
- the pack, public: assets/<split>/prompts.jsonl and weak_labels.jsonl; tasks.jsonl;
- the pack, hidden: hidden/<split>/reference/ (the oracle's artifact: the strong labels as
  predictions, and a run manifest);
- each evaluation's sealed/: strong_labels/<split>.jsonl; w2s-pgr also weak_labels/ (a copy
  of the public files) and ceiling.json.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DATASET_VERSION = "w2s-math-mini@2026-04-10"
SCHEMA_VERSION = "1"
ITEMS_PER_SPLIT = 45
# The strong student's accuracy when trained on ground truth. In a real benchmark the
# evaluation's authors measure it; here it is a made-up constant for the example.
STRONG_CEILING = 0.95
NAMES = ("Maya", "Omar", "Lena", "Ravi", "Ines", "Tomas", "Aiko", "Zara")
THINGS = ("apples", "marbles", "stickers", "pencils", "shells", "cards")


@dataclass(frozen=True)
class Item:
    id: str
    prompt: str
    answer: int


@dataclass(frozen=True)
class Split:
    name: str
    prefix: str
    title: str
    weak_accuracy: float  # the chance the weak teacher is right on one item
    make: Callable[[random.Random], tuple[str, int]]


def _arithmetic(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    op = rng.choice("+-*")
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    return f"What is {a} {op} {b}?", answer


def _algebra(rng: random.Random) -> tuple[str, int]:
    x, a = rng.randint(-12, 12), rng.randint(2, 9)
    if rng.random() < 0.5:
        b = rng.choice([n for n in range(-20, 21) if n != 0])
        sign = "+" if b > 0 else "-"
        return f"Solve for x: {a}x {sign} {abs(b)} = {a * x + b}", x
    b = rng.randint(1, 9)
    return f"Solve for x: {a}(x + {b}) = {a * (x + b)}", x


def _word_problem(rng: random.Random) -> tuple[str, int]:
    name, things = rng.choice(NAMES), rng.choice(THINGS)
    kind = rng.randrange(4)
    if kind == 0:
        a, b = rng.randint(5, 60), rng.randint(3, 40)
        text = f"{name} has {a} {things} and gets {b} more. How many {things} now?"
        return text, a + b
    if kind == 1:
        a, b = rng.randint(12, 48), rng.randint(15, 60)
        return f"A box holds {a} {things}. How many {things} are in {b} boxes?", a * b
    if kind == 2:
        b = rng.randint(3, 40)
        a = b + rng.randint(1, 50)
        return f"{name} had {a} {things} and gave away {b}. How many are left?", a - b
    b, q = rng.randint(2, 9), rng.randint(3, 25)
    return f"{b * q} {things} are shared equally by {b} friends. How many each?", q


SPLITS = (
    Split("arithmetic", "arith", "Arithmetic", 0.8, _arithmetic),
    Split("algebra", "alg", "Linear equations", 0.6, _algebra),
    Split("word_problems", "word", "Word problems", 0.5, _word_problem),
)


def make_items(split: Split, seed: int) -> list[Item]:
    # Seeded on purpose: the data must come out the same on every run.
    rng = random.Random(seed)  # noqa: S311
    items = []
    for number in range(1, ITEMS_PER_SPLIT + 1):
        prompt, answer = split.make(rng)
        items.append(Item(f"{split.prefix}-{number:03d}", prompt, answer))
    return items


def weak_answer(item: Item, split: Split, rng: random.Random) -> str:
    """The weak teacher's answer text: sometimes wrong, sometimes loosely formatted."""
    value = item.answer
    if rng.random() >= split.weak_accuracy:
        value += rng.choice([-10, -2, -1, 1, 2, 10])
    style = rng.random()
    if style < 0.1:
        return f"{value}.0"
    if style < 0.2:
        return f" {value}"
    if style < 0.25 and abs(value) >= 1000:
        return f"{value:,}"
    return str(value)


def jsonl(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def task_row(split: Split) -> dict[str, object]:
    instructions = (
        f"{split.title}: predict the answer to every prompt in data/prompts.jsonl. A weak"
        " teacher's answers are in data/weak_labels.jsonl; some of them are wrong. Write"
        ' predictions.jsonl with one line {"id": ..., "answer": ...} per prompt (the answer'
        " as a string) and run_manifest.json with run_id, dataset_version and"
        " schema_version. reasoning_traces.jsonl is optional and kept for audit only."
    )
    return {
        "id": f"w2s-predictions/{split.name}",
        "family": "artifact_task",
        "input": {
            "instructions": instructions,
            "split": split.name,
            "items": ITEMS_PER_SPLIT,
            "dataset_version": DATASET_VERSION,
            "schema_version": SCHEMA_VERSION,
        },
        "assets": [{"path": split.name, "mount": "data"}],
        "eval": {"reference_artifact": {"path": f"{split.name}/reference"}},
        "metadata": {"split": split.name, "weak_teacher_accuracy_target": split.weak_accuracy},
    }


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def generate(examples: Path) -> None:
    pack = examples / "w2s-predictions"
    evaluations = examples / "evaluations"
    rows = []
    for index, split in enumerate(SPLITS):
        items = make_items(split, seed=1000 + index)
        teacher = random.Random(2000 + index)  # noqa: S311 - seeded, reproducible
        prompts = [{"id": item.id, "prompt": item.prompt} for item in items]
        weak = [{"id": item.id, "weak_label": weak_answer(item, split, teacher)} for item in items]
        strong = [{"id": item.id, "answer": str(item.answer)} for item in items]
        write(pack / "assets" / split.name / "prompts.jsonl", jsonl(prompts))
        write(pack / "assets" / split.name / "weak_labels.jsonl", jsonl(weak))
        reference = pack / "hidden" / split.name / "reference"
        write(reference / "predictions.jsonl", jsonl(strong))
        manifest = {
            "run_id": "reference",
            "dataset_version": DATASET_VERSION,
            "schema_version": SCHEMA_VERSION,
        }
        write(reference / "run_manifest.json", json.dumps(manifest, indent=2) + "\n")
        for name in ("w2s-exact-match", "w2s-exact-match-v2", "w2s-pgr"):
            write(
                evaluations / name / "sealed" / "strong_labels" / f"{split.name}.jsonl",
                jsonl(strong),
            )
        write(
            evaluations / "w2s-pgr" / "sealed" / "weak_labels" / f"{split.name}.jsonl", jsonl(weak)
        )
        rows.append(task_row(split))
    write(pack / "tasks.jsonl", jsonl(rows))
    ceiling = {"strong_ceiling_accuracy": STRONG_CEILING}
    write(evaluations / "w2s-pgr" / "sealed" / "ceiling.json", json.dumps(ceiling) + "\n")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
