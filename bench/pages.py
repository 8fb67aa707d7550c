"""Workload 5: pages under load.

The site `make run` starts (SQLite, its Celery worker) holds the 14,042-row generated
multiple-choice pack, one run of 14,042 candidates submitted through the API and scored by the
real worker, and 1,000 more done runs on the same version. Then, over real HTTP with a
signed-in session, 200 requests each (after a few warm-up requests) to:

* the run page of the 14k run;
* its results table (the htmx partial the page's pager and filters load), on pages spread over
  the whole 14k results, every other request filtered to failed results;
* the version's leaderboard (1,001 runs);
* the pack version page with its visibility matrix (14,042 tasks);
* the runs list;
* the home page (``/``), with nothing in progress.

Then 10 more submitted agent runs are added, each with one evaluation in progress (50 results
each: passed, failed, running and queued), and the same number of requests go to:

* the home page's "Now running" partial (``/home/now-running/``, the one htmx polls: HTTP
  200 while anything runs, 286 once nothing does; both count);
* the home page again, now with its "Now running" section full: the figure that matters
  most, as the page is mostly opened while something is being scored.

Figures are client-measured round trips (they bound the server time); target p95 <= 200 ms.

The 1,000 extra runs are written in-process through the ORM against the site's own database:
each a submitted agent run with one done evaluation whose summary (counts, score, interval,
per-family counts) is what the worker writes when an evaluation finishes. They have no
per-task rows — 1,000 x 14k results would be 14 million rows — which the pages measured here
never read for runs other than the one being shown.

The evaluations in progress are written the same way, with their per-task rows as the worker
leaves them mid-way: finished results with their verdicts, running ones claimed (started, a
lease far in the future) and queued ones dispatched, so that neither the reaper (expired
leases, lost messages) nor the worker (no message is sent) touches them while they are read.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import requests
from django.utils import timezone
from django_htmx.http import HTMX_STOP_POLLING

from bench.common import Figure, at_most, django_setup, main, mc_pack_archive, median, p95
from bench.site import Site
from bench.text_scoring import PACK_ID, candidates_bundle, submit_and_wait, upload_pack
from runs.stats import wilson_interval

WORKLOAD = "5 pages under load"
FULL = {"rows": 14_042, "runs": 1_000, "requests": 200, "in_progress": 10, "tasks_each": 50}
SMOKE = {"rows": 300, "runs": 20, "requests": 10, "in_progress": 3, "tasks_each": 8}
WARM_UP = 3
TARGET_MS = 200.0
RESULTS_PER_PAGE = 50  # runs.views.RESULTS_PER_PAGE
# Statuses of an in-progress evaluation's results, by position (shifted per evaluation).
IN_PROGRESS_STATUSES = ("passed", "passed", "failed", "running", "queued")
# Longer than any measurement: the reaper never finds these leases expired.
LEASE = timedelta(days=1)


def add_done_runs(data_dir: Path, count: int) -> None:
    """``count`` submitted agent runs on the pack's version, each with a done evaluation."""
    django_setup(data_dir)
    from packs.models import ContractVersion  # noqa: PLC0415 - Django app loading: after django_setup()
    from runs.models import Evaluation, EvaluationStatus, Run, RunSource  # noqa: PLC0415 - Django app loading: after django_setup()

    version = ContractVersion.objects.get(pack__pack_id=PACK_ID, version=1)
    total = version.task_count
    rng = random.Random(5)
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
            over_budget=index % 50 == 0,
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
                evaluator="securebench@1",
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


def add_running_evaluations(data_dir: Path, count: int, tasks_each: int) -> None:
    """``count`` submitted agent runs on the pack's version, each with one evaluation in
    progress: ``tasks_each`` results spread over passed, failed, running and queued."""
    django_setup(data_dir)
    from packs.models import ContractVersion  # noqa: PLC0415 - Django app loading: after django_setup()
    from runs.models import (  # noqa: PLC0415 - Django app loading: after django_setup()
        Evaluation,
        EvaluationStatus,
        ResultStatus,
        Run,
        RunSource,
        TaskResult,
        WorkQueue,
    )

    version = ContractVersion.objects.get(pack__pack_id=PACK_ID, version=1)
    tasks = list(version.tasks.order_by("position")[:tasks_each])
    now = timezone.now()
    runs = Run.objects.bulk_create(
        Run(
            contract_version=version,
            agent_name=f"live-agent-{index}",
            agent_version="2.0",
            model_name=f"model-{index % 7}",
            source=RunSource.API,
            submitted_at=now,
            candidate_count=len(tasks),
        )
        for index in range(count)
    )
    evaluations = Evaluation.objects.bulk_create(
        Evaluation(
            run=run,
            number=1,
            evaluator="securebench@1",
            status=EvaluationStatus.RUNNING,
            started_at=now,
            total=len(tasks),
        )
        for run in runs
    )
    results = []
    for shift, evaluation in enumerate(evaluations):
        for task in tasks:
            status = IN_PROGRESS_STATUSES[(task.position + shift) % len(IN_PROGRESS_STATUSES)]
            final = status in (ResultStatus.PASSED, ResultStatus.FAILED)
            claimed = status != ResultStatus.QUEUED
            results.append(
                TaskResult(
                    evaluation=evaluation,
                    task=task,
                    family=task.family,
                    position=task.position,
                    queue=WorkQueue.TEXT,
                    status=status,
                    score=1.0 if status == ResultStatus.PASSED else 0.0,
                    failure_reason="wrong_answer" if status == ResultStatus.FAILED else "",
                    attempts=1 if claimed else 0,
                    lease_expires_at=now + LEASE if status == ResultStatus.RUNNING else None,
                    worker="bench:0" if claimed else "",
                    dispatched_at=now,
                    started_at=now if claimed else None,
                    finished_at=now if final else None,
                    duration_seconds=0.01 if final else None,
                )
            )
    TaskResult.objects.bulk_create(results, batch_size=500)


def check_shows_in_progress(session: requests.Session, url: str) -> None:
    """The partial lists the evaluations just added (else its figure would time the idle one)."""
    answer = session.get(url, headers={"HX-Request": "true"}, timeout=60)
    if answer.status_code != 200 or "live-agent-0" not in answer.text:
        raise RuntimeError(f"GET {url}: {answer.status_code}, no evaluation in progress shown")


def timed_gets(
    session: requests.Session,
    urls: Callable[[int], str],
    count: int,
    *,
    htmx: bool = False,
    ok: tuple[int, ...] = (200,),
) -> list[float]:
    """Milliseconds of each of ``count`` GETs (after warm-up), each checked to answer one of
    the ``ok`` statuses (a 200 unless told)."""
    headers = {"HX-Request": "true"} if htmx else {}
    times: list[float] = []
    for index in range(-WARM_UP, count):
        url = urls(index)
        started = time.perf_counter()
        answer = session.get(url, headers=headers, timeout=60)
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status_code not in ok:
            raise RuntimeError(f"GET {url}: {answer.status_code}")
        if index >= 0:
            times.append(elapsed)
    return times


def run(*, smoke: bool) -> list[Figure]:
    sizes = SMOKE if smoke else FULL
    rows, requests_each = sizes["rows"], sizes["requests"]
    folder = Path(tempfile.mkdtemp(prefix="securebench-pages-"))
    archive = mc_pack_archive(folder, rows, pack_id=PACK_ID)
    bundle = candidates_bundle(folder, rows)
    with Site() as site:
        api = requests.Session()
        api.headers["Authorization"] = f"Token {site.admin_token()}"
        upload_pack(site, api, archive)
        _, status = submit_and_wait(site, api, bundle)
        run_id = status["run"]
        add_done_runs(site.data_dir, sizes["runs"])
        browser = site.admin_session()
        pages = -(-rows // RESULTS_PER_PAGE)
        rng = random.Random(3)

        def results_url(index: int) -> str:
            page = rng.randint(1, pages)
            if index % 2:
                # Failed results are about 30 %: a page within their count.
                return f"{site.url}/runs/{run_id}/?status=failed&page={max(1, page // 3)}"
            return f"{site.url}/runs/{run_id}/?page={page}"

        measured = {
            "run page (14k results)": timed_gets(
                browser, lambda _: f"{site.url}/runs/{run_id}/", requests_each
            ),
            "results table partial (htmx)": timed_gets(
                browser, results_url, requests_each, htmx=True
            ),
            f"leaderboard ({sizes['runs'] + 1:,} runs)": timed_gets(
                browser, lambda _: f"{site.url}/leaderboards/{PACK_ID}/v1/", requests_each
            ),
            f"pack version page ({rows:,} tasks)": timed_gets(
                browser, lambda _: f"{site.url}/packs/{PACK_ID}/v1/", requests_each
            ),
            "runs list": timed_gets(browser, lambda _: f"{site.url}/runs/", requests_each),
            "home page (nothing in progress)": timed_gets(
                browser, lambda _: f"{site.url}/", requests_each
            ),
        }
        in_progress = sizes["in_progress"]
        add_running_evaluations(site.data_dir, in_progress, sizes["tasks_each"])
        partial = f"{site.url}/home/now-running/"
        check_shows_in_progress(browser, partial)
        measured[f"now-running partial ({in_progress} evaluations in progress)"] = timed_gets(
            browser,
            lambda _: partial,
            requests_each,
            htmx=True,
            ok=(200, HTMX_STOP_POLLING),
        )
        measured[f"home page ({in_progress} evaluations in progress)"] = timed_gets(
            browser, lambda _: f"{site.url}/", requests_each
        )
    figures = []
    for name, times in measured.items():
        note = f"median {median(times):.1f} ms, {len(times)} requests"
        figures.append(
            Figure(
                WORKLOAD,
                f"{name}: p95 round trip",
                p95(times),
                "ms",
                target=f"<= {TARGET_MS:.0f} ms",
                met=None if smoke else at_most(p95(times), TARGET_MS),
                note=note,
            )
        )
    return figures


if __name__ == "__main__":
    main(run)
