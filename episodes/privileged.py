"""``cube/privileged_info``: a task's reference, for oracle episode runs only.

An oracle episode run is opened by a user with privilege on the pack, in debug mode (or from
the shell, already trusted, for a set time). Its episodes read the reference through the
evaluator's own lane reader; every read is audited with the reason the run was opened with.
Agent runs never get an answer, nor does an oracle run whose privilege has ended.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from episodes import wire
from episodes.models import Episode, EpisodeRun
from packs import access as pack_access
from packs.selectors import evaluator_task_lanes
from runs.models import AuditAction, AuditEvent, CandidateOrigin
from runs.privileged import session_debug_mode
from verifiers import live
from verifiers.oracle import oracle_candidate
from verifiers.task import Candidate, TaskLanes

# Two readings of one debug mode's end (a float timestamp in the session, a database
# datetime) agree to well within this; two debug modes of one session never do.
SAME_MODE = timedelta(milliseconds=5)
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
    mode = session_debug_mode(episode_run.privilege_session_key, user)
    # The very debug mode that opened the run (its end is the run's privilege_until), not a
    # later one of the same session: that one has a reason of its own, which this run's
    # audit rows would not carry.
    return mode is not None and abs(mode.expires_at - episode_run.privilege_until) < SAME_MODE


def episode_privileged_info(episode: Episode, *, ip_address: str | None) -> dict[str, Any]:
    episode_run = episode.episode_run
    if episode_run.run.origin != CandidateOrigin.ORACLE:
        raise wire.RpcError(wire.NOT_PERMITTED, REFUSED)
    if not privilege_holds(episode_run):
        raise wire.RpcError(
            wire.NOT_PERMITTED,
            "this oracle run's privilege has ended (its debug mode ended, or its time ran out)",
        )
    if _reads_in_the_last_second(episode) >= settings.SECUREBENCH_EPISODE_STEPS_PER_SECOND:
        # Every read writes an audit row: a client in a loop must not flood the audit log.
        raise wire.RpcError(
            wire.THROTTLED, "too many reads of this task's reference in the last second"
        )
    task = episode.task
    _audit(episode, ip_address)
    lanes = evaluator_task_lanes(task)
    reference = oracle_candidate(lanes)
    if reference is None:
        return wire.text_content("This task has no reference solution.", name="reference")
    if reference.kind in ("workspace", "artifact"):
        return wire.structured_content(
            _workspace_reference(reference, lanes.family), name="reference"
        )
    if reference.kind == "patch":
        return wire.structured_content(_patch_reference(lanes, reference), name="reference")
    return wire.text_content(reference.text, name="reference")


def _workspace_reference(reference: Candidate, family: str) -> dict[str, Any]:
    """A terminal task's expected state, or an artifact task's reference artifact, as the
    files an oracle agent writes by acting."""
    return {
        "family": family,
        "files": {
            path: file.content.decode("utf-8", "replace")
            for path, file in sorted(reference.files.items())
        },
        "how": "Write each file (paths relative to the workspace) with write_file or bash, "
        "then call final_step.",
    }


def _patch_reference(lanes: TaskLanes, reference: Candidate) -> dict[str, Any]:
    """A repository task's gold patch, and where the repository is in the workspace."""
    return {
        "family": "repo_patch",
        "patch": reference.text,
        "repo_dir": repository_folder(lanes),
        "how": "Apply the patch in repo_dir (e.g. write it to a file outside the repository "
        "and run `git apply`), then call final_step.",
    }


def repository_folder(lanes: TaskLanes) -> str:
    """The repository's folder relative to the workspace root ("." when it is the root), as
    the live workspace lays it out."""
    try:
        plan = live.plan_live_workspace(
            lanes, "docker", Path("/nonexistent"), live.WorkspaceLimits()
        )
    except live.WorkspaceUnsupported:
        return "."
    return plan.repo_path or "."


def _reads_in_the_last_second(episode: Episode) -> int:
    return AuditEvent.objects.filter(
        action=AuditAction.EPISODE_PRIVILEGED_INFO,
        object_type="episode",
        object_id=str(episode.pk),
        created_at__gte=timezone.now() - timedelta(seconds=1),
    ).count()


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
