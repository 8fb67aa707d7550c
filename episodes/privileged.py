"""``cube/privileged_info``: a task's reference, for oracle episode runs only.

An oracle episode run is opened by a user with privilege on the pack, in debug mode (or from
the shell, already trusted, for a set time). Its episodes read the reference through the
evaluator's own lane reader; every read is audited with the reason the run was opened with.
Agent runs never get an answer, nor does an oracle run whose privilege has ended.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from episodes import wire
from episodes.models import Episode, EpisodeRun
from packs import access as pack_access
from packs.selectors import evaluator_task_lanes
from runs.models import AuditAction, AuditEvent, CandidateOrigin
from runs.privileged import session_debug_mode
from verifiers.oracle import oracle_candidate

REFUSED = "privileged information is only for oracle runs opened by a privileged user"


def privilege_holds(episode_run: EpisodeRun) -> bool:
    run = episode_run.run
    if run.origin != CandidateOrigin.ORACLE or episode_run.privilege_until is None:
        return False
    if episode_run.privilege_until <= timezone.now():
        return False
    if not episode_run.privilege_session_key:
        return True  # opened from the shell, for a set time
    user = run.submitted_by
    if user is None or not user.is_active:
        return False
    if not pack_access.can_view_privileged(user, run.contract_version.pack):
        return False
    return session_debug_mode(episode_run.privilege_session_key, user) is not None


def episode_privileged_info(episode: Episode, *, ip_address: str | None) -> dict[str, Any]:
    episode_run = episode.episode_run
    if episode_run.run.origin != CandidateOrigin.ORACLE:
        raise wire.RpcError(wire.NOT_PERMITTED, REFUSED)
    if not privilege_holds(episode_run):
        raise wire.RpcError(
            wire.NOT_PERMITTED,
            "this oracle run's privilege has ended (its debug mode ended, or its time ran out)",
        )
    task = episode.task
    _audit(episode, ip_address)
    reference = oracle_candidate(evaluator_task_lanes(task))
    if reference is None:
        return wire.text_content("This task has no reference solution.", name="reference")
    return wire.text_content(reference.text, name="reference")


def _audit(episode: Episode, ip_address: str | None) -> None:
    run = episode.episode_run.run
    user = run.submitted_by
    version = run.contract_version
    AuditEvent.objects.create(
        user=user,
        username=user.get_username() if user is not None else "(command line)",
        action=AuditAction.EPISODE_PRIVILEGED_INFO,
        object_type="episode",
        object_id=str(episode.pk),
        pack_id=version.pack.pack_id,
        version=version.version,
        task_id=episode.task.task_id[:200],
        resource="reference",
        reason=episode.episode_run.privilege_reason or "oracle episode run",
        ip_address=ip_address,
    )
