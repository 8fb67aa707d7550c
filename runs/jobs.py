"""Background jobs (Celery tasks sent by name, so nothing imports this module): thin wrappers
that take ids; the work is in ``runs.pipeline``.

Messages carry only result ids. Acknowledged late, so a worker that dies mid-verification
leaves the message to the broker (Redis re-delivers it) and its lease to the reaper; either
way the conditional claim lets exactly one worker score each result.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from runs import pipeline, services

# Below the broker's redelivery timeout (settings.BROKER_VISIBILITY_TIMEOUT), so a slow
# verification is stopped before Redis hands its message to a second worker.
SANDBOX_SOFT_LIMIT = settings.SECUREBENCH_SANDBOX_TASK_SECONDS
SANDBOX_HARD_LIMIT = SANDBOX_SOFT_LIMIT + 60
TEXT_SOFT_LIMIT = 300
TEXT_HARD_LIMIT = TEXT_SOFT_LIMIT + 60


@shared_task(
    name="runs.score_text_results",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=TEXT_SOFT_LIMIT,
    time_limit=TEXT_HARD_LIMIT,
)
def score_text_results(result_ids: list[int]) -> int:
    return pipeline.score_results([int(pk) for pk in result_ids])


@shared_task(
    name="runs.score_sandbox_result",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=SANDBOX_SOFT_LIMIT,
    time_limit=SANDBOX_HARD_LIMIT,
)
def score_sandbox_result(result_id: int) -> int:
    return pipeline.score_results([int(result_id)])


@shared_task(
    name="runs.score_run_scope",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=SANDBOX_SOFT_LIMIT,
    time_limit=SANDBOX_HARD_LIMIT,
)
def score_run_scope(evaluation_id: int) -> bool:
    """An uploaded run-scope evaluation's one program call over the whole run."""
    return pipeline.run_scope_score(int(evaluation_id))


@shared_task(
    name="runs.fill_reference_runs",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=TEXT_SOFT_LIMIT,
    time_limit=TEXT_HARD_LIMIT,
)
def fill_reference_runs(run_ids: list[int]) -> int:
    """The candidates of one-click oracle and null runs, built where references may be read."""
    return sum(services.reference_run_fill(int(pk)) is not None for pk in run_ids)


@shared_task(name="runs.reap_leases", ignore_result=True, time_limit=TEXT_HARD_LIMIT)
def reap_leases() -> dict[str, int]:
    report = pipeline.leases_reap()
    return {
        "requeued": report.requeued,
        "exhausted": report.exhausted,
        "redispatched": report.redispatched,
        "reference_fills_resent": services.reference_fills_resend(),
    }


@shared_task(name="runs.remove_stale_sandboxes", ignore_result=True, time_limit=TEXT_HARD_LIMIT)
def remove_stale_sandboxes() -> int:
    return len(pipeline.stale_sandboxes_remove())
