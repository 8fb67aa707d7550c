"""``python -m tests.mutation.run [--fast] [--only ID ...] [--jobs N] [--report PATH]``

Applies each catalogued mutant to its own scratch copy of the working tree, runs the tests it
names, and writes a Markdown report (kill rate per module, every survivor with its
explanation, the time taken). Exit status 0 only when every mutant was killed or survived with
an explanation, no anchor is stale and every baseline passed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.mutation.catalogue import ADDED_TESTS, MUTANTS, PENDING
from tests.mutation.engine import (
    BASELINE_FAILED,
    BROKEN,
    DEFAULT_TIMEOUT_SECONDS,
    KILLED,
    REPO_ROOT,
    STALE,
    SURVIVED,
    Mutant,
    Outcome,
    PytestRun,
    anchor_count,
    baseline_problem,
    judge,
    make_copy,
    make_scratch_root,
    pytest_args,
    run_tests,
)

FULL_REPORT = REPO_ROOT / "tests" / "mutation" / "REPORT.md"
PARTIAL_REPORT = REPO_ROOT / "var" / "mutation" / "REPORT.md"


def select(fast: bool, only: Iterable[str]) -> list[Mutant]:
    wanted = set(only)
    unknown = wanted - {mutant.id for mutant in MUTANTS}
    if unknown:
        raise SystemExit(f"unknown mutant id(s): {', '.join(sorted(unknown))}")
    return [
        mutant
        for mutant in MUTANTS
        if (not wanted or mutant.id in wanted) and (not fast or mutant.fast)
    ]


def _log(message: str) -> None:
    print(message, flush=True)


class Runner:
    def __init__(self, scratch: Path, jobs: int, timeout: float) -> None:
        self.scratch, self.jobs, self.timeout = scratch, jobs, timeout
        # One snapshot of the working tree, taken now: every baseline and mutant starts from
        # the same code, even while someone keeps editing the checkout.
        self.snapshot = make_copy(scratch / "snapshot")

    def _in_copy(self, name: str, mutant: Mutant | None, args: list[str]) -> PytestRun:
        copy = make_copy(self.scratch / name, mutant, self.snapshot)
        try:
            return run_tests(copy, args, self.timeout)
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def baselines(self, mutants: list[Mutant]) -> dict[tuple[str, ...], str | None]:
        """Each distinct test set, run once on an unmutated copy: why it fails, or None."""
        test_sets = sorted({mutant.tests for mutant in mutants})

        def one(index_and_tests: tuple[int, tuple[str, ...]]) -> str | None:
            index, tests = index_and_tests
            run = self._in_copy(f"baseline-{index}", None, pytest_args(tests))
            problem = baseline_problem(run)
            _log(f"baseline {' '.join(tests)}: {problem or 'passed'} ({run.seconds:.0f} s)")
            if problem:
                _log(run.tail)
            return problem

        results = self._map(one, list(enumerate(test_sets)))
        return dict(zip(test_sets, results, strict=True))

    def mutant(self, mutant: Mutant) -> Outcome:
        outcome = judge(mutant, self._in_copy(mutant.id, mutant, mutant.test_args))
        shown = outcome.killer or outcome.detail
        _log(f"{mutant.id}: {outcome.status} {shown} ({outcome.run.seconds:.0f} s)")
        if outcome.status == BROKEN:
            _log(outcome.run.tail)
        return outcome

    def _map[T, R](self, function: Callable[[T], R], items: list[T]) -> list[R]:
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(function, items))

    def run(self, mutants: list[Mutant]) -> list[Outcome]:
        counts = {mutant.id: anchor_count(mutant, self.snapshot) for mutant in mutants}
        stale = [
            Outcome(m, STALE, detail=f"anchor found {counts[m.id]} times")
            for m in mutants
            if counts[m.id] != 1
        ]
        for outcome in stale:
            _log(f"{outcome.mutant.id}: STALE ({outcome.detail})")
        live = [m for m in mutants if counts[m.id] == 1]
        baselines = self.baselines(live)
        failed = [
            Outcome(m, BASELINE_FAILED, detail=str(baselines[m.tests]))
            for m in live
            if baselines[m.tests]
        ]
        runnable = [m for m in live if not baselines[m.tests]]
        outcomes = stale + failed + self._map(self.mutant, runnable)
        order = {mutant.id: index for index, mutant in enumerate(mutants)}
        return sorted(outcomes, key=lambda outcome: order[outcome.mutant.id])


def accepted(outcome: Outcome) -> bool:
    """Killed, or survived with an explanation in the catalogue."""
    if outcome.status == KILLED:
        return True
    return outcome.status == SURVIVED and bool(outcome.mutant.survivor_note)


def report(outcomes: list[Outcome], seconds: float, title: str) -> str:
    by_module: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_module[outcome.mutant.module].append(outcome)
    lines = [
        f"# Mutation report: {title}",
        "",
        "Written by `make mutation` (`python -m tests.mutation.run`); the mutants are listed in",
        "`tests/mutation/catalogue.py`. A mutant removes or weakens one defence in a scratch copy;",
        "it is killed when the tests it names fail there while they pass on an unmutated copy.",
        "",
        f"Mutants: {len(outcomes)}; killed: {_count(outcomes, KILLED)}; "
        f"survived: {_count(outcomes, SURVIVED)} "
        f"({sum(1 for o in outcomes if o.status == SURVIVED and o.mutant.survivor_note)} "
        "explained as equivalent); "
        f"other: {len(outcomes) - _count(outcomes, KILLED) - _count(outcomes, SURVIVED)}. "
        f"Wall time: {seconds / 60:.1f} min.",
        "",
        "## Kill rate per module",
        "",
        "| module | mutants | killed | survived | other | kill rate |",
        "|---|---|---|---|---|---|",
    ]
    for module, items in sorted(by_module.items()):
        killed, survived = _count(items, KILLED), _count(items, SURVIVED)
        rate = f"{100 * killed / len(items):.0f} %"
        other = len(items) - killed - survived
        lines.append(f"| `{module}` | {len(items)} | {killed} | {survived} | {other} | {rate} |")
    lines += ["", "## Mutants", "", "| id | defence removed | outcome | killed by | time |"]
    lines.append("|---|---|---|---|---|")
    for outcome in outcomes:
        run = outcome.run
        killer = outcome.killer.split(" ", 1)[-1] if outcome.killer else outcome.detail
        time_taken = f"{run.seconds:.0f} s" if run else "-"
        fast = " (fast)" if outcome.mutant.fast else ""
        lines.append(
            f"| `{outcome.mutant.id}`{fast} | {outcome.mutant.defence} | {outcome.status} "
            f"| {_cell(killer)} | {time_taken} |"
        )
    lines += ["", "## Survivors and other outcomes", ""]
    others = [outcome for outcome in outcomes if outcome.status != KILLED]
    if not others:
        lines.append("None: every mutant was killed.")
    for outcome in others:
        note = outcome.mutant.survivor_note or "UNEXPLAINED: write the missing test."
        if outcome.status != SURVIVED:
            note = f"{outcome.detail or outcome.status} — the tests could not judge this mutant."
        lines.append(f"- `{outcome.mutant.id}` ({outcome.status}): {note}")
    lines += ["", "## Tests written because a mutant survived", ""]
    lines += [f"- `{path}`: {why}" for path, why in ADDED_TESTS]
    lines += ["", "## Defences not yet in the catalogue", ""]
    lines += [f"- {where}: {defence}" for where, defence in PENDING]
    return "\n".join(lines) + "\n"


def _count(outcomes: Iterable[Outcome], status: str) -> int:
    return sum(1 for outcome in outcomes if outcome.status == status)


def _cell(text: str) -> str:
    return f"`{text}`" if text.startswith("tests/") else text.replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation.run", description=__doc__)
    parser.add_argument("--fast", action="store_true", help="only the subset CI runs")
    parser.add_argument("--only", nargs="+", default=[], metavar="ID", help="these mutants")
    parser.add_argument("--jobs", type=int, default=2, help="mutants at a time (default 2)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS)
    parser.add_argument("--scratch", type=Path, default=None, help="parent of scratch copies")
    parser.add_argument("--report", type=Path, default=None, help="where to write the report")
    parser.add_argument("--list", action="store_true", help="print the catalogue and stop")
    options = parser.parse_args(argv)

    mutants = select(options.fast, options.only)
    if options.list:
        for mutant in mutants:
            print(f"{mutant.id:40} {mutant.module:40} {mutant.defence}")
        return 0
    full = not options.fast and not options.only
    title = "full catalogue" if full else "fast subset" if options.fast else "selected mutants"
    scratch = make_scratch_root(options.scratch)
    started = time.monotonic()
    try:
        outcomes = Runner(scratch, max(1, options.jobs), options.timeout).run(mutants)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.monotonic() - started
    path = options.report or (FULL_REPORT if full else PARTIAL_REPORT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report(outcomes, seconds, title), encoding="utf-8")
    bad = [outcome for outcome in outcomes if not accepted(outcome)]
    _log(f"{len(outcomes) - len(bad)}/{len(outcomes)} accepted in {seconds / 60:.1f} min; {path}")
    for outcome in bad:
        _log(f"  {outcome.mutant.id}: {outcome.status} {outcome.detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
