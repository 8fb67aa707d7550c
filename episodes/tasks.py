"""Celery tasks of the episodes layer: thin, taking ids; the work is in episodes.actions and
episodes.services."""

from __future__ import annotations

from celery import shared_task

from episodes import actions, services

ACTION_SOFT_LIMIT = 60
REAP_LIMIT = 300


@shared_task(
    acks_late=False,
    ignore_result=True,
    soft_time_limit=ACTION_SOFT_LIMIT,
    time_limit=ACTION_SOFT_LIMIT + 30,
)
def run_step_action(step_id: int) -> bool:
    # Not acknowledged late: an action redelivered after the agent's answer window would run
    # for nobody. A lost one is reported to the agent as not run (episodes.actions).
    return actions.step_action_run(int(step_id))


@shared_task(ignore_result=True, time_limit=REAP_LIMIT)
def reap_episodes() -> dict[str, int]:
    report = services.episodes_reap()
    actions.expired_steps_sweep()
    return {
        "abandoned": report.abandoned,
        "synced": report.synced,
        "runs_closed": report.runs_closed,
    }
