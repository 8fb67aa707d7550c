"""Episode runs: open one (a run served as a CUBE benchmark), spawn episodes in it, revoke
its URL, shut it down, and let the reaper expire what clients left behind."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from episodes import lifecycle
from episodes.capabilities import new_secret, secret_digest
from episodes.models import Episode, EpisodeRun, EpisodeStatus, Step, StepState
from episodes.progress import STALE_HEARTBEAT_SECONDS
from episodes.tools import served_live
from episodes.wire import BUSY, INVALID_PARAMS, NOT_PERMITTED, NOT_VALID, WRONG_STATE, RpcError
from packs.models import ContractVersion, Task
from runs.models import AuditAction, AuditEvent, CandidateOrigin, Run, RunMode
from runs.modes import OpenedRun, register_run_opener
from runs.services import RunMetadata, run_close_live, run_open_live

logger = logging.getLogger(__name__)
NOT_VALID_MESSAGE = "This URL is not valid: unknown, revoked, expired or closed."


@dataclass(frozen=True)
class OpenedEpisodeRun:
    episode_run: EpisodeRun
    secret: str  # shown once, to the one who opened the run; never stored

    @property
    def run(self) -> Run:
        return self.episode_run.run


@dataclass(frozen=True)
class OraclePrivilege:
    """Who may read references through the run's episodes, until when, and why."""

    until: datetime
    reason: str
    session_key: str = ""  # set for runs opened from the site: bound to that debug mode


def benchmark_path(secret: str) -> str:
    return f"/cube/runs/{secret}"


def episode_path(secret: str) -> str:
    return f"/cube/episodes/{secret}"


def episode_run_open(
    *,
    contract_version: ContractVersion,
    metadata: RunMetadata,
    source: str,
    user: Any = None,
    oracle: OraclePrivilege | None = None,
    ip_address: str | None = None,
) -> OpenedEpisodeRun:
    secret = new_secret()
    origin = CandidateOrigin.ORACLE if oracle is not None else CandidateOrigin.AGENT
    with transaction.atomic():
        run, _ = run_open_live(
            contract_version=contract_version,
            metadata=metadata,
            source=source,
            user=user,
            origin=origin,
        )
        episode_run = EpisodeRun.objects.create(
            run=run,
            capability_hash=secret_digest(secret),
            expires_at=timezone.now() + timedelta(hours=settings.SECUREBENCH_EPISODE_RUN_HOURS),
            privilege_until=oracle.until if oracle else None,
            privilege_session_key=oracle.session_key if oracle else "",
            opened_by_ip=ip_address,
            privilege_reason=oracle.reason if oracle else "",
        )
        if oracle is not None:
            _audit_oracle_open(episode_run, user, oracle, ip_address)
    return OpenedEpisodeRun(episode_run=episode_run, secret=secret)


def _audit_oracle_open(
    episode_run: EpisodeRun, user: Any, oracle: OraclePrivilege, ip_address: str | None
) -> None:
    version = episode_run.run.contract_version
    signed_in = user is not None and getattr(user, "is_authenticated", False)
    AuditEvent.objects.create(
        user=user if signed_in else None,
        username=user.get_username() if signed_in else "(command line)",
        action=AuditAction.ORACLE_EPISODE_RUN,
        object_type="run",
        object_id=str(episode_run.run_id),
        pack_id=version.pack.pack_id,
        version=version.version,
        resource=f"privilege until {oracle.until:%Y-%m-%d %H:%M:%S %Z}",
        reason=oracle.reason,
        ip_address=ip_address,
    )


def register_run_mode() -> None:
    register_run_opener(RunMode.EPISODES, _open_from_api)


def _open_from_api(
    *,
    contract_version: ContractVersion,
    metadata: RunMetadata,
    source: str,
    user: Any,
    base_url: str,
) -> OpenedRun:
    opened = episode_run_open(
        contract_version=contract_version, metadata=metadata, source=source, user=user
    )
    return OpenedRun(
        run=opened.run,
        extra={
            "benchmark_url": base_url.rstrip("/") + benchmark_path(opened.secret),
            "expires_at": opened.episode_run.expires_at,
        },
    )


# --- the capability ------------------------------------------------------------------------


def episode_run_by_secret(secret: str) -> EpisodeRun:
    """The run a benchmark URL names, if it may still be used; one answer for every refusal."""
    episode_run = (
        EpisodeRun.objects.select_related("run__contract_version__pack", "run__submitted_by")
        .filter(capability_hash=secret_digest(secret))
        .first()
    )
    if episode_run is None or not episode_run_usable(episode_run):
        raise RpcError(NOT_VALID, NOT_VALID_MESSAGE)
    return episode_run


def episode_by_secret(secret: str) -> Episode:
    """The episode a task URL names, while it and its run may still be used."""
    episode = (
        Episode.objects.select_related(
            "episode_run__run__contract_version__pack", "episode_run__run__submitted_by", "task"
        )
        .filter(capability_hash=secret_digest(secret))
        .first()
    )
    if (
        episode is None
        or episode.closed_at is not None
        or not episode_run_usable(episode.episode_run)
    ):
        raise RpcError(NOT_VALID, NOT_VALID_MESSAGE)
    return episode


def episode_run_usable(episode_run: EpisodeRun) -> bool:
    owner = episode_run.run.submitted_by
    return (
        episode_run.revoked_at is None
        and episode_run.closed_at is None
        and episode_run.expires_at > timezone.now()
        # A deactivated account's URLs stop with it (the reaper closes its runs on expiry).
        and (owner is None or owner.is_active)
    )


def episode_run_revoke(episode_run: EpisodeRun) -> None:
    """The URL stops working at once; what its episodes hold is scored, as at shutdown."""
    EpisodeRun.objects.filter(pk=episode_run.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    episode_run_shutdown(episode_run.pk, reason="the run's URL was revoked")


# --- spawning and shutting down ------------------------------------------------------------


def episode_spawn(episode_run: EpisodeRun, task_config: Any) -> tuple[Episode, str]:
    """A new episode for the task the config names (by id only: nothing else is trusted)."""
    task = _task_from_config(episode_run, task_config)
    if not served_live(task.family):
        raise RpcError(
            NOT_PERMITTED,
            f"task {task.task_id!r} is a {task.family} task, which needs a live workspace: "
            "not served as an episode yet; submit a bundle for it instead",
        )
    attempts = _attempt_budget(episode_run)
    secret = new_secret()
    with transaction.atomic():
        locked = EpisodeRun.objects.select_for_update().get(pk=episode_run.pk)
        if not episode_run_usable(locked):
            raise RpcError(NOT_VALID, NOT_VALID_MESSAGE)
        earlier = list(Episode.objects.filter(episode_run=locked, task=task))
        for episode in earlier:
            lifecycle.episode_sync_verdict(episode)
        if any(e.status in (EpisodeStatus.OPEN, EpisodeStatus.SCORING) for e in earlier):
            raise RpcError(
                BUSY,
                f"task {task.task_id!r} already has an episode in progress in this run: "
                "finish or close it (and let it be scored) before starting another",
            )
        if len(earlier) >= attempts:
            raise RpcError(
                WRONG_STATE,
                f"task {task.task_id!r} has used its {attempts} attempt"
                f"{'s' if attempts != 1 else ''} in this run (contract budgets.attempts)",
            )
        episode = Episode.objects.create(
            episode_run=locked,
            task=task,
            attempt=len(earlier) + 1,
            capability_hash=secret_digest(secret),
            last_activity_at=timezone.now(),
        )
    return episode, secret


def _task_from_config(episode_run: EpisodeRun, task_config: Any) -> Task:
    task_id = None
    if isinstance(task_config, dict):
        metadata = task_config.get("metadata")
        if isinstance(metadata, dict):
            task_id = metadata.get("id")
        task_id = task_id if task_id is not None else task_config.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise RpcError(
            INVALID_PARAMS,
            "task_config must be one of the objects cube/task_configs returned "
            "(its metadata.id names the task)",
        )
    version = episode_run.run.contract_version
    task = Task.objects.filter(contract_version=version, task_id=task_id[:200]).first()
    if task is None:
        raise RpcError(
            INVALID_PARAMS,
            f"no task {task_id[:200]!r} in {version.pack.pack_id} v{version.version}",
        )
    return task


def _attempt_budget(episode_run: EpisodeRun) -> int:
    budgets = (episode_run.run.contract_version.contract or {}).get("budgets") or {}
    attempts = budgets.get("attempts") if isinstance(budgets, dict) else None
    return attempts if isinstance(attempts, int) and attempts >= 1 else 1


def episode_run_shutdown(episode_run_id: int, *, reason: str = "") -> bool:
    """Close the run: open episodes are scored as they stand (abandoned), tasks never
    attempted fail with missing_candidate, and the evaluation finishes. False when it was
    closed already."""
    with transaction.atomic():
        locked = EpisodeRun.objects.select_for_update().get(pk=episode_run_id)
        if locked.closed_at is not None:
            return False
        locked.closed_at = timezone.now()
        locked.save(update_fields=["closed_at"])
    for episode in Episode.objects.filter(episode_run_id=episode_run_id, status=EpisodeStatus.OPEN):
        _each(
            "abandon an episode of a closing run",
            episode.pk,
            partial(
                lifecycle.episode_finish,
                episode,
                ending=EpisodeStatus.ABANDONED,
                note=reason or "open when the run closed",
            ),
        )
    Episode.objects.filter(episode_run_id=episode_run_id, closed_at__isnull=True).update(
        closed_at=timezone.now()
    )
    episode_run_close_if_collected(episode_run_id)
    return True


def episode_run_close_if_collected(episode_run_id: int) -> bool:
    """Close a shut-down run's evaluation once every episode's candidate is recorded.

    A live workspace's candidate is collected on a worker after its episode ends (it may
    need a sandbox): until it is recorded, the task must not be failed as never attempted.
    The collection calls this again when it is done (and so does the reaper)."""
    if not EpisodeRun.objects.filter(pk=episode_run_id, closed_at__isnull=False).exists():
        return False
    uncollected = Episode.objects.filter(
        episode_run_id=episode_run_id, status=EpisodeStatus.SCORING, result__isnull=True
    )
    if uncollected.exists():
        return False
    run = Run.objects.get(episode_run__pk=episode_run_id)
    run_close_live(run, extra_budget_notes=lifecycle.truncation_notes(episode_run_id))
    return True


# --- the reaper ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeReapReport:
    abandoned: int
    synced: int
    runs_closed: int


def episodes_reap(*, now: datetime | None = None) -> EpisodeReapReport:
    """Idle episodes are scored as they stand (abandoned), verdicts that landed are copied to
    their episodes, and runs whose URL expired close themselves."""
    now = now or timezone.now()
    idle_since = now - timedelta(minutes=settings.SECUREBENCH_EPISODE_IDLE_MINUTES)
    idle = Episode.objects.filter(status=EpisodeStatus.OPEN, last_activity_at__lt=idle_since)
    # A workspace command still running (its worker beating) is not idleness.
    beating = Step.objects.filter(
        state=StepState.RUNNING,
        heartbeat_at__gte=now - timedelta(seconds=STALE_HEARTBEAT_SECONDS),
    )
    idle = idle.exclude(pk__in=beating.values("episode_id"))
    note = f"idle for {settings.SECUREBENCH_EPISODE_IDLE_MINUTES} minutes"
    abandoned = sum(
        1
        for episode in idle
        if _each(
            "abandon an idle episode",
            episode.pk,
            partial(lifecycle.episode_finish, episode, ending=EpisodeStatus.ABANDONED, note=note),
        )
    )
    synced = sum(
        1
        for episode in Episode.objects.filter(status=EpisodeStatus.SCORING)
        if _each("copy a verdict to its episode", episode.pk, partial(_verdict_landed, episode))
    )
    expired = EpisodeRun.objects.filter(closed_at__isnull=True, expires_at__lt=now)
    runs_closed = sum(
        1
        for episode_run_id in expired.values_list("pk", flat=True)
        if _each(
            "close an expired run",
            episode_run_id,
            partial(episode_run_shutdown, episode_run_id, reason="the run's URL expired"),
        )
    )
    # Shut down while a workspace was being collected, and that collection's own close lost.
    waiting = EpisodeRun.objects.filter(closed_at__isnull=False, run__submitted_at__isnull=True)
    for episode_run_id in waiting.values_list("pk", flat=True):
        _each(
            "close a collected run",
            episode_run_id,
            partial(episode_run_close_if_collected, episode_run_id),
        )
    if abandoned or runs_closed:
        logger.info(
            "episode reaper: %d idle episodes abandoned, %d runs closed on expiry",
            abandoned,
            runs_closed,
        )
    return EpisodeReapReport(abandoned=abandoned, synced=synced, runs_closed=runs_closed)


def _verdict_landed(episode: Episode) -> bool:
    return lifecycle.episode_sync_verdict(episode).status != EpisodeStatus.SCORING


def _each(what: str, pk: int, work: Callable[[], Any]) -> bool:
    """One unit of a sweep: a row that cannot be handled (a bug of ours, a database that
    refuses its data) is logged and left for the next sweep, and never holds back the
    other runs' episodes behind it."""
    try:
        return bool(work())
    except Exception:  # noqa: BLE001 - logged with its traceback; the sweep goes on
        logger.exception("episode reaper: could not %s (id %s); left for the next sweep", what, pk)
        return False
