"""Workload 10 (issue 14): a version's health report against one oracle run of it.

The full HumanEval pack is imported into the site `make run` starts (bubblewrap sandboxes, its
Celery worker). In the same script run: one oracle run, timed from submission until its
evaluation is done (median of 3), then a health report of the same version (oracle, repeat,
null, the built-in attacks, the static leak audit), timed from the request until the report is
done. The report must say "healthy"; the target is a report within 2x of the oracle run.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bench.common import Figure, at_most, main, median
from bench.oracle_runs import EVALUATION_TIMEOUT, code_version, submit_oracle, wait_done
from bench.site import Site


def _report_seconds(version: Any) -> tuple[float, Any]:
    """Seconds from a health request until its report is done, and the report."""
    from pack_health.models import HealthReport, ReportStatus  # noqa: PLC0415 - Django app loading: after django_setup()
    from pack_health.services import health_request  # noqa: PLC0415 - Django app loading: after django_setup()

    started = time.perf_counter()
    report = health_request(version)
    while time.perf_counter() - started < EVALUATION_TIMEOUT:
        report = HealthReport.objects.get(pk=report.pk)
        if report.status == ReportStatus.DONE:
            return time.perf_counter() - started, report
        time.sleep(0.05)
    raise RuntimeError(f"health report {report.pk} not done after {EVALUATION_TIMEOUT} s")


def _verifications(report: Any) -> dict[str, int]:
    """Per check, how many of its results had a candidate to verify (a null code candidate is
    empty, so its verifier refuses it before any sandbox starts)."""
    from runs.models import TaskResult  # noqa: PLC0415 - Django app loading: after django_setup()

    counts: dict[str, int] = {}
    for health_run in report.health_runs.all():
        verified = TaskResult.objects.filter(
            evaluation__run_id=health_run.run_id, evaluation__number=1, candidate__isnull=False
        ).count()
        counts[health_run.check_name] = counts.get(health_run.check_name, 0) + verified
    return counts


def run(*, smoke: bool) -> list[Figure]:
    repetitions = 1 if smoke else 3
    with Site(env={"SECUREBENCH_SANDBOX": "bwrap"}) as site:
        version = code_version(site, smoke=smoke)
        tasks = version.task_count
        oracle = median(
            [wait_done([submit_oracle(version, f"oracle-{n}")]) for n in range(repetitions)]
        )
        report_seconds, report = _report_seconds(version)
        verifications = _verifications(report)
    ratio = report_seconds / oracle
    healthy = report.verdict == "healthy" and not report.error
    label = f"({tasks} tasks, bwrap, through Celery)"
    return [
        Figure("10 pack health", f"one oracle run {label}", oracle, "s"),
        Figure(
            "10 pack health",
            f"health report {label}",
            report_seconds,
            "s",
            target="healthy",
            met=healthy,
            note=f"verdict {report.verdict or report.error!r}; candidates per check: "
            + ", ".join(f"{k} {v}" for k, v in sorted(verifications.items())),
        ),
        Figure(
            "10 pack health",
            "health report / oracle run",
            ratio,
            "x",
            target="<= 2x",
            met=None if smoke else at_most(ratio, 2.0),
        ),
    ]


if __name__ == "__main__":
    sys.exit(main(run))
