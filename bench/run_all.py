"""`make bench`: every workload (issue 6's six, issue 11's episodes, issue 12's live
workspaces, issue 33's evaluation programs), each in a process of its own, then one table.

    python -m bench.run_all [--smoke] [--only import_pack,pages] [--json FILE] [--jobs N]

Each benchmark module starts its own site (`make run` on a free port, fresh data folder)
where it needs one, so workloads never see each other's data. The table printed at the end
is Markdown, ready for bench/RESULTS.md, headed by the machine it ran on. `--jobs 2` runs two
modules at once: only for `--smoke`, which checks the scripts (figures measured side by side
with another workload would mean nothing, so a real run refuses it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO_ROOT, Figure, machine, table

# In the order of the issues' workloads (the Celery half of workload 3 runs with 6; 7 is
# agents acting live, issue 11; 8 live workspaces, issue 12, on bwrap then Docker; 14
# evaluation programs that authors bring, issue 33).
MODULES = (
    "import_pack",
    "text_scoring",
    "code_scoring",
    "sandbox_floor",
    "pages",
    "concurrency",
    "episodes",
    "workspaces",
    "workspaces_docker",
    "pass_at_k",
    "evaluations",
)


def run_module(module: str, *, smoke: bool, folder: Path) -> tuple[list[Figure], str | None]:
    """Run one benchmark; its own table streams to the terminal as it goes."""
    output = folder / f"{module}.json"
    command = [sys.executable, "-m", f"bench.{module}", "--json", str(output)]
    if smoke:
        command.append("--smoke")
    print(f"\n== bench.{module}{' (smoke)' if smoke else ''}", flush=True)
    started = time.perf_counter()
    finished = subprocess.run(command, cwd=REPO_ROOT, check=False)
    print(f"   ({time.perf_counter() - started:.0f} s)", flush=True)
    if finished.returncode != 0 or not output.exists():
        return [], f"bench.{module} failed with exit code {finished.returncode}"
    return [Figure(**item) for item in json.loads(output.read_text())], None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the scripts")
    parser.add_argument("--only", default="", help="comma-separated module names")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--jobs", type=int, default=1, help="modules at once (--smoke only)")
    options = parser.parse_args()
    if options.jobs < 1 or (options.jobs > 1 and not options.smoke):
        parser.error("--jobs above 1 is only for --smoke: measurements run one at a time")
    chosen = [name for name in options.only.split(",") if name] or list(MODULES)
    unknown = sorted(set(chosen) - set(MODULES))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(MODULES)}")
    figures: list[Figure] = []
    failures: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="securebench-bench-") as tmp,
        concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool,
    ):
        runs = [
            pool.submit(run_module, module, smoke=options.smoke, folder=Path(tmp))
            for module in chosen
        ]
        for run in runs:  # in the workloads' order, whichever finished first
            found, failure = run.result()
            figures += found
            if failure:
                failures.append(failure)
    facts = machine()
    print("\n## Machine\n")
    print("\n".join(f"- {key}: {value}" for key, value in facts.items()))
    print("\n## Figures\n")
    print(table(figures))
    if options.json:
        options.json.write_text(
            json.dumps({"machine": facts, "figures": [f.__dict__ for f in figures]}, indent=1)
        )
    for failure in failures:
        print(f"\nFAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
