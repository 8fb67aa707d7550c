"""The w2s-predictions evaluations compute what their READMEs say.

Each program runs directly (no sandbox) on a temporary /evaluation + /candidates tree; every
expected number is counted here from the same files, without the programs' code.
"""

from __future__ import annotations

import json
import random
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.examples.harness import (
    EVALUATIONS,
    EXAMPLES,
    TaskCall,
    load_module,
    pack_rows,
    read_jsonl,
    reference_files,
    run_evaluation,
)

pytestmark = pytest.mark.database_independent

PACK = "w2s-predictions"
ROWS = pack_rows(PACK)
SPLITS = [row["input"]["split"] for row in ROWS]
# The only loose forms the weak teacher writes (checked below), so a comparison for this
# data needs no general normaliser: "42", " 42", "42.0", "1,680".
WEAK_FORM = re.compile(r"\A ?-?\d{1,3}(,\d{3})*(\.0)?\Z|\A ?-?\d+(\.0)?\Z")


def strong(split: str) -> dict[str, str]:
    path = EVALUATIONS / "w2s-exact-match" / "sealed" / "strong_labels" / f"{split}.jsonl"
    return {row["id"]: row["answer"] for row in read_jsonl(path)}


def weak(split: str) -> dict[str, str]:
    path = EXAMPLES / PACK / "assets" / split / "weak_labels.jsonl"
    return {row["id"]: row["weak_label"] for row in read_jsonl(path)}


def loose_equal(text: str | None, label: str) -> bool:
    """Value equality for the forms this data holds (WEAK_FORM and plain integers)."""
    if text is None:
        return False
    return Fraction(text.strip().replace(",", "")) == Fraction(label)


def example_candidates() -> dict[str, dict[str, dict[str, str]]]:
    """candidate name -> split -> its files: the oracle, the null, and the two examples."""
    bundle = load_module(EXAMPLES / "agents" / "w2s_bundle.py")
    candidates: dict[str, dict[str, dict[str, str]]] = {
        "oracle": {row["input"]["split"]: reference_files(PACK, row) for row in ROWS},
        "null": {split: {} for split in SPLITS},
    }
    for name, student in (("weak-copy", False), ("student", True)):
        lines = bundle.bundle_lines(EXAMPLES / PACK, student=student)
        candidates[name] = {
            line["task_id"].split("/")[1]: line["candidate"]["files"] for line in lines
        }
    return candidates


CANDIDATES = example_candidates()


def first_predictions(files: dict[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in files.get("predictions.jsonl", "").splitlines():
        row = json.loads(line)
        found.setdefault(row["id"], row["answer"])
    return found


def call(split: str, files: dict[str, str]) -> TaskCall:
    row = next(row for row in ROWS if row["input"]["split"] == split)
    return TaskCall(task_id=row["id"], input=row["input"], files=files)


# --- the data ----------------------------------------------------------------------------------


def test_the_generator_rewrites_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    load_module(EXAMPLES / "generators" / "w2s_math.py").generate(tmp_path)
    written = sorted(path for path in tmp_path.rglob("*") if path.is_file())
    assert len(written) == 26  # 3 splits x 8 files, tasks.jsonl, ceiling.json
    for path in written:
        relative = path.relative_to(tmp_path)
        assert (EXAMPLES / relative).read_bytes() == path.read_bytes(), relative


def test_the_weak_labels_are_public_and_the_strong_labels_are_not() -> None:
    for split in SPLITS:
        public = EXAMPLES / PACK / "assets" / split
        sealed_copy = EVALUATIONS / "w2s-pgr" / "sealed" / "weak_labels" / f"{split}.jsonl"
        # w2s-pgr reads its own sealed copy: it must be the pack's public file, unchanged.
        assert sealed_copy.read_bytes() == (public / "weak_labels.jsonl").read_bytes()
        for name in ("w2s-exact-match-v2", "w2s-pgr"):
            other = EVALUATIONS / name / "sealed" / "strong_labels" / f"{split}.jsonl"
            assert (
                other.read_bytes()
                == (
                    EVALUATIONS / "w2s-exact-match" / "sealed" / "strong_labels" / f"{split}.jsonl"
                ).read_bytes()
            )
        assert list(strong(split)) == list(weak(split))
        assert 30 <= len(strong(split)) <= 60
        assert all(WEAK_FORM.match(text) for text in weak(split).values())
        public_text = "".join(path.read_text() for path in public.iterdir())
        assert '"answer"' not in public_text
    size = sum(path.stat().st_size for path in (EXAMPLES / PACK).rglob("*") if path.is_file())
    assert size < 200_000


# --- exact match, versions 1 and 2 ---------------------------------------------------------------


@pytest.mark.parametrize("candidate", sorted(CANDIDATES))
@pytest.mark.parametrize("split", SPLITS)
def test_exact_match_v1_and_v2_count_right_answers(
    candidate: str, split: str, tmp_path: Path
) -> None:
    files = CANDIDATES[candidate][split]
    labels, predictions = strong(split), first_predictions(files)
    strict = sum(predictions.get(item) == label for item, label in labels.items())
    loose = sum(loose_equal(predictions.get(item), label) for item, label in labels.items())
    coverage = sum(item in predictions for item in labels) / len(labels)

    v1 = run_evaluation("w2s-exact-match", [call(split, files)], tmp_path / "v1")["metrics"]
    v2 = run_evaluation("w2s-exact-match-v2", [call(split, files)], tmp_path / "v2")["metrics"]

    assert v1["accuracy"] == pytest.approx(strict / len(labels), abs=1e-9)
    assert v2["accuracy"] == pytest.approx(loose / len(labels), abs=1e-9)
    assert v1["coverage"] == v2["coverage"] == pytest.approx(coverage, abs=1e-9)
    if candidate == "oracle":
        assert v1["accuracy"] == v2["accuracy"] == 1.0
    if candidate == "null":
        assert v1 == v2 == {"accuracy": 0.0, "coverage": 0.0}


def test_the_weak_copy_scores_differently_under_the_two_versions(tmp_path: Path) -> None:
    # What the site shows: the same artifact, two versions of one evaluation, two numbers.
    files = CANDIDATES["weak-copy"]["arithmetic"]
    v1 = run_evaluation("w2s-exact-match", [call("arithmetic", files)], tmp_path / "v1")
    v2 = run_evaluation("w2s-exact-match-v2", [call("arithmetic", files)], tmp_path / "v2")
    assert v1["metrics"]["accuracy"] < v2["metrics"]["accuracy"]


def crafted_predictions(labels: dict[str, str]) -> tuple[str, int, int, int]:
    """A predictions.jsonl whose every line's fate is known by construction.
    Returns (text, right under v1, right under v2, items answered)."""
    items = list(labels.items())
    lines: list[str] = []
    v1 = v2 = answered = 0

    def predict(item: str, answer: object) -> None:
        lines.append(json.dumps({"id": item, "answer": answer}))

    for index, (item, label) in enumerate(items):
        value = int(label)
        group = index % 9
        answered += group not in (6, 7)
        if group == 0:  # exact: right for both
            predict(item, label)
            v1, v2 = v1 + 1, v2 + 1
        elif group == 1:  # spaces around: v2 only
            predict(item, f"  {label} ")
        elif group == 2:  # a decimal zero: v2 only
            predict(item, f"{value}.0")
        elif group == 3:  # a sign and a trailing full stop, or a ratio: v2 only
            predict(item, f"+{value}." if index % 2 else f"{2 * value}/2")
        elif group == 4:  # off by one: wrong for both
            predict(item, str(value + 1))
        elif group == 5:  # a wrong first line, then the right one: the first counts
            predict(item, str(value - 1))
            predict(item, label)
        elif group == 6:  # not an answer string: ignored, so missing
            predict(item, value)
        elif group == 7:  # a broken line: missing
            lines.append('{"id": "' + item + '", "answer": ')
        else:  # words and case: "Answer" text is not a number, wrong for both
            predict(item, f"The answer is {label}")
        v2 += group in (1, 2, 3)
    lines.append(json.dumps({"id": "not-an-item", "answer": "1"}))
    return "\n".join(lines) + "\n", v1, v2, answered


def test_a_crafted_file_scores_as_each_version_documents(tmp_path: Path) -> None:
    labels = strong("word_problems")
    text, right_v1, right_v2, answered = crafted_predictions(labels)
    files = {"predictions.jsonl": text, "run_manifest.json": "{}"}
    task = [call("word_problems", files)]
    v1 = run_evaluation("w2s-exact-match", task, tmp_path / "v1")["metrics"]
    v2 = run_evaluation("w2s-exact-match-v2", task, tmp_path / "v2")["metrics"]
    assert right_v1 < right_v2
    assert v1["accuracy"] == pytest.approx(right_v1 / len(labels), abs=1e-9)
    assert v2["accuracy"] == pytest.approx(right_v2 / len(labels), abs=1e-9)
    assert v1["coverage"] == v2["coverage"] == pytest.approx(answered / len(labels), abs=1e-9)


# --- PGR ---------------------------------------------------------------------------------------


def expected_pgr(pairs: list[tuple[bool, bool]], ceiling: float) -> dict[str, Any]:
    """PGR and its bootstrap interval, from w2s-pgr's README: seed 20260410, 2000 resamples
    of randrange(n) draws, nearest-rank 2.5th/97.5th percentiles, widened to the value."""

    def values(sample: list[tuple[bool, bool]]) -> tuple[float, float, float]:
        candidate = sum(c for c, _ in sample) / len(sample)
        weak_share = sum(w for _, w in sample) / len(sample)
        return (candidate - weak_share) / (ceiling - weak_share), candidate, weak_share

    point, accuracy, weak_share = values(pairs)
    rng = random.Random(20260410)  # noqa: S311 - the README's seed
    pgrs, accuracies = [], []
    for _ in range(2000):
        sample = [pairs[rng.randrange(len(pairs))] for _ in range(len(pairs))]
        accuracies.append(sum(c for c, _ in sample) / len(sample))
        if sum(w for _, w in sample) / len(sample) < ceiling:
            pgrs.append(values(sample)[0])

    def ends(value: float, draws: list[float]) -> dict[str, float]:
        ordered = sorted(draws)
        low = ordered[-(-25 * len(ordered) // 1000) - 1]
        high = ordered[-(-975 * len(ordered) // 1000) - 1]
        return {"value": value, "ci_low": min(low, value), "ci_high": max(high, value)}

    return {
        "pgr": ends(point, pgrs),
        "accuracy": ends(accuracy, accuracies),
        "weak_accuracy": weak_share,
    }


def assert_metrics_equal(found: dict[str, Any], expected: dict[str, Any]) -> None:
    assert set(found) == set(expected)
    for name, value in expected.items():
        if isinstance(value, dict):
            for key in value:
                assert found[name][key] == pytest.approx(value[key], abs=1e-9), (name, key)
        else:
            assert found[name] == pytest.approx(value, abs=1e-9), name


def pooled_pairs(
    candidate: dict[str, dict[str, str]], splits: list[str]
) -> list[tuple[bool, bool]]:
    pairs = []
    for split in splits:
        predictions, teacher = first_predictions(candidate[split]), weak(split)
        for item, label in strong(split).items():
            pairs.append(
                (loose_equal(predictions.get(item), label), loose_equal(teacher[item], label))
            )
    return pairs


CEILING = json.loads((EVALUATIONS / "w2s-pgr" / "sealed" / "ceiling.json").read_text())[
    "strong_ceiling_accuracy"
]


@pytest.mark.parametrize("candidate", sorted(CANDIDATES))
def test_pgr_pools_every_task_of_the_run(candidate: str, tmp_path: Path) -> None:
    files = CANDIDATES[candidate]
    tasks = [call(split, files[split]) for split in SPLITS]
    found = run_evaluation("w2s-pgr", tasks, tmp_path)["metrics"]
    assert_metrics_equal(found, expected_pgr(pooled_pairs(files, SPLITS), CEILING))
    if candidate == "weak-copy":
        assert found["pgr"]["value"] == 0.0  # the weak teacher recovers nothing, by definition


def test_pgr_counts_each_sample_and_a_missing_artifact_as_wrong(tmp_path: Path) -> None:
    student, oracle = CANDIDATES["student"], CANDIDATES["oracle"]
    tasks = [
        call("algebra", oracle["algebra"]),
        TaskCall(**{**call("algebra", student["algebra"]).__dict__, "sample": 1}),
        call("word_problems", {}),
    ]
    found = run_evaluation("w2s-pgr", tasks, tmp_path)["metrics"]
    pairs = (
        pooled_pairs(oracle, ["algebra"])
        + pooled_pairs(student, ["algebra"])
        + pooled_pairs({"word_problems": {}}, ["word_problems"])
    )
    assert_metrics_equal(found, expected_pgr(pairs, CEILING))
