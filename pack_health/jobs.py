"""Background jobs of pack health (Celery tasks sent by name, so nothing imports this module):
thin wrappers that take ids; the work is in ``pack_health.services``. Each is idempotent (the
report's status is checked under a lock), so a duplicated or re-sent message changes nothing."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from pack_health import services

# Starting reads every task's lanes and writes every health run's candidates: for a large
# pack that is minutes, not the seconds of a text verdict.
START_SOFT_LIMIT = settings.SECUREBENCH_SANDBOX_TASK_SECONDS
START_HARD_LIMIT = START_SOFT_LIMIT + 60
FINISH_SOFT_LIMIT = 600
FINISH_HARD_LIMIT = FINISH_SOFT_LIMIT + 60


@shared_task(
    name="pack_health.start_health_checks",
    ignore_result=True,
    soft_time_limit=START_SOFT_LIMIT,
    time_limit=START_HARD_LIMIT,
)
def start_health_checks(report_id: int) -> bool:
    return services.health_start(int(report_id))


@shared_task(
    name="pack_health.finish_health_report",
    ignore_result=True,
    soft_time_limit=FINISH_SOFT_LIMIT,
    time_limit=FINISH_HARD_LIMIT,
)
def finish_health_report(report_id: int) -> bool:
    return services.health_finish_if_done(int(report_id))


@shared_task(
    name="pack_health.sweep_health_reports",
    ignore_result=True,
    soft_time_limit=FINISH_SOFT_LIMIT,
    time_limit=FINISH_HARD_LIMIT,
)
def sweep_health_reports() -> dict[str, int]:
    return services.health_sweep()
