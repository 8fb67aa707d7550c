"""Background jobs of the episodes layer (Celery tasks sent by name, so nothing imports this
module): thin, taking ids; the work is in episodes.actions, episodes.live_collection and
episodes.services."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from episodes import actions, live_collection, services

# An action may be a workspace command of the longest allowed length, plus the sandbox's
# start, the workspace's tar in and out, and waiting for a reset's predecessor to stop.
ACTION_SOFT_LIMIT = settings.SECUREBENCH_EPISODE_COMMAND_MAX_SECONDS + 120
COLLECT_LIMIT = 600
REAP_LIMIT = 300


@shared_task(
    name="episodes.run_step_action",
    acks_late=False,
    ignore_result=True,
    soft_time_limit=ACTION_SOFT_LIMIT,
    time_limit=ACTION_SOFT_LIMIT + 30,
)
def run_step_action(step_id: int) -> bool:
    # Not acknowledged late: an action redelivered after the agent's answer window would run
    # for nobody. A lost one is reported to the agent as not run (episodes.actions).
    return actions.step_action_run(int(step_id))


@shared_task(
    name="episodes.collect_workspace",
    acks_late=False,
    ignore_result=True,
    soft_time_limit=COLLECT_LIMIT,
    time_limit=COLLECT_LIMIT + 30,
)
def collect_workspace(episode_id: int) -> bool:
    # Idempotent (an episode's candidate is recorded once); a lost message is sent again by
    # the reaper.
    return live_collection.workspace_collect(int(episode_id))


@shared_task(name="episodes.reap_episodes", ignore_result=True, time_limit=REAP_LIMIT)
def reap_episodes() -> dict[str, int]:
    report = services.episodes_reap()
    actions.expired_steps_sweep()
    spaces = live_collection.workspaces_reap()
    return {
        "abandoned": report.abandoned,
        "synced": report.synced,
        "runs_closed": report.runs_closed,
        "collections_resent": spaces.collections_resent,
        "collections_given_up": spaces.collections_given_up,
        "workspace_folders_removed": spaces.folders_removed,
    }
