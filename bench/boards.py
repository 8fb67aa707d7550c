"""Workload 15: a leaderboard with its score-against-cost chart at 1,000 runs (issue 34).

In-process Django against a fresh SQLite database (the site's settings, the Django test
client signed in as an admin): a generated 200-task multiple-choice pack imported twice, as
two versions of their own, one with 1,000 done agent runs and one with 100 (the anchor: a
board whose runs all fit on one page). Every run has a done evaluation as the worker leaves
it, and cost figures as the two sources write them: a third measured by the model gateway
(``Run.measured_usage`` with a per-task entry each), the others reported by the agent
(``Run.usage``); a tenth have neither, so the "no cost figure" list is drawn too.

Each axis (dollars, tokens, wall time, steps) is requested 200 times after 3 warm-up
requests; figures are the p95 and median of the server-side round trip through the test
client (no network), and the ratio of the 1,000-run board's median to the 100-run board's,
measured in the same run. Target: p95 <= 200 ms at 1,000 runs.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

from django.utils import timezone

from bench.common import Figure, at_most, django_setup, main, mc_pack_archive, median, p95
from runs.stats import wilson_interval

WORKLOAD = "15 cost-accuracy boards"
FULL = {"tasks": 200, "runs": 1_000, "anchor_runs": 100, "requests": 200}
SMOKE = {"tasks": 20, "runs": 30, "anchor_runs": 5, "requests": 5}
WARM_UP = 3
TARGET_MS = 200.0
AXES = ("usd", "tokens", "wall", "steps")


def import_version(folder: Path, pack_id: str, tasks: int) -> object:
    from django.core.management import call_command  # noqa: PLC0415 - Django app loading: after django_setup()

    from packs.models import ContractVersion  # noqa: PLC0415 - Django app loading: after django_setup()

    call_command("import_pack", str(mc_pack_archive(folder, tasks, pack_id=pack_id)))
    return ContractVersion.objects.get(pack__pack_id=pack_id, version=1)


def seed_runs(version: object, count: int, seed: int) -> None:
    """``count`` done agent runs with realistic cost figures, measured or reported."""
    from runs.evaluators import DEFAULT_EVALUATOR  # noqa: PLC0415 - Django app loading: after django_setup()
    from runs.models import Evaluation, EvaluationStatus, Run, RunSource  # noqa: PLC0415 - Django app loading: after django_setup()

    rng = random.Random(seed)
    total = version.task_count  # type: ignore[attr-defined]
    now = timezone.now()
    runs = Run.objects.bulk_create(
        Run(
            contract_version=version,
            agent_name=f"agent-{index % 40}",
            agent_version=f"1.{index}",
            model_name=f"model-{index % 7}",
            source=RunSource.API,
            submitted_at=now,
            candidate_count=total,
            **costs(rng, index, total),
        )
        for index in range(count)
    )
    evaluations = []
    for run in runs:
        passed = rng.randint(0, total)
        interval = wilson_interval(float(passed), total)
        evaluations.append(
            Evaluation(
                run=run,
                number=1,
                evaluator=DEFAULT_EVALUATOR,  # the scorer the board shows by default
                status=EvaluationStatus.DONE,
                started_at=now,
                finished_at=now,
                total=total,
                passed=passed,
                failed=total - passed,
                score=passed / total,
                ci_low=interval.low if interval else None,
                ci_high=interval.high if interval else None,
                family_summary={
                    "multiple_choice": {
                        "total": total,
                        "passed": passed,
                        "failed": total - passed,
                        "error": 0,
                        "pending": 0,
                    }
                },
            )
        )
    Evaluation.objects.bulk_create(evaluations, batch_size=500)


def costs(rng: random.Random, index: int, tasks: int) -> dict[str, object]:
    if index % 10 == 9:
        return {}  # no figure: listed under the chart
    input_tokens, output_tokens = rng.randint(200, 40_000), rng.randint(50, 8_000)
    usd = round(input_tokens * 3e-6 + output_tokens * 1.5e-5, 6)
    if index % 3 == 0:
        per_task = {
            "input_tokens": input_tokens // tasks,
            "output_tokens": output_tokens // tasks,
            "usd": usd / tasks,
            "calls": 2,
        }
        return {
            "measured_usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "usd": usd,
                "calls": 2 * tasks,
                "tasks": {f"task-{n}": per_task for n in range(tasks)},
            }
        }
    return {
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "usd": usd,
            "wall_seconds": round(rng.uniform(5, 900), 2),
            "steps": rng.randint(tasks, 30 * tasks),
        }
    }


def timed_gets(client: object, url: str, count: int) -> list[float]:
    times = []
    for index in range(-WARM_UP, count):
        started = time.perf_counter()
        answer = client.get(url)  # type: ignore[attr-defined]
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status_code != 200 or b'class="cost-board"' not in answer.content:
            raise RuntimeError(f"GET {url}: {answer.status_code}, or no cost chart")
        if index >= 0:
            times.append(elapsed)
    return times


def run(*, smoke: bool) -> list[Figure]:
    sizes = SMOKE if smoke else FULL
    folder = Path(tempfile.mkdtemp(prefix="securebench-boards-"))
    # No health checks to wait for and no gate: the versions publish on import.
    os.environ["SECUREBENCH_HEALTH_ON_UPLOAD"] = "0"
    os.environ["SECUREBENCH_PUBLISH_GATE"] = "0"
    django_setup()  # a fresh, migrated database of its own
    from django.contrib.auth.models import User  # noqa: PLC0415 - Django app loading: after django_setup()
    from django.test import Client  # noqa: PLC0415 - Django app loading: after django_setup()
    from django.test.utils import setup_test_environment  # noqa: PLC0415 - Django app loading

    setup_test_environment()  # the test client's host is allowed
    big = import_version(folder, "boards-big", sizes["tasks"])
    anchor = import_version(folder, "boards-anchor", sizes["tasks"])
    seed_runs(big, sizes["runs"], seed=15)
    seed_runs(anchor, sizes["anchor_runs"], seed=16)
    client = Client()
    client.force_login(User.objects.create_superuser("bench", password=None))
    figures = []
    for axis in AXES:
        big_times = timed_gets(
            client, f"/leaderboards/boards-big/v1/?axis={axis}", sizes["requests"]
        )
        anchor_times = timed_gets(
            client, f"/leaderboards/boards-anchor/v1/?axis={axis}", sizes["requests"]
        )
        # As it goes: on a shared machine the whole run can take a while.
        print(
            f"axis {axis}: p95 {p95(big_times):.1f} ms, median {median(big_times):.1f} ms; "
            f"anchor median {median(anchor_times):.1f} ms",
            flush=True,
        )
        figures += [
            Figure(
                WORKLOAD,
                f"board with plot, {sizes['runs']:,} runs, axis {axis}: p95",
                p95(big_times),
                "ms",
                target=f"<= {TARGET_MS:.0f} ms",
                met=None if smoke else at_most(p95(big_times), TARGET_MS),
                note=f"median {median(big_times):.1f} ms, {len(big_times)} requests",
            ),
            Figure(
                WORKLOAD,
                f"axis {axis}: {sizes['runs']:,} runs / {sizes['anchor_runs']:,} runs (median)",
                median(big_times) / median(anchor_times),
                "x",
                note=f"anchor median {median(anchor_times):.1f} ms, same run",
            ),
        ]
    return figures


if __name__ == "__main__":
    main(run)
