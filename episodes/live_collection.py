"""The ending of a live workspace episode, on a worker: its candidate is collected from the
workspace — the snapshot's files for a terminal task, the files the agent created or changed
for an artifact task, the diff against the base commit for a repository — checked against the
contract's surfaces, recorded through the run's pipeline, and the folder is destroyed. And the
reaper's part: lost collections, leftover folders.

This sits above episodes.services (a shut-down run closes once its last candidate is
recorded) and episodes.lifecycle (the verdict is copied onto the episode); where a workspace
lives and how a step runs in it are in episodes.live_workspaces, below both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from episodes import lifecycle, services
from episodes.live_workspaces import (
    await_quiet,
    destroy_workspace,
    folder_of,
    send_collect,
    workspace_of,
    workspace_root,
)
from episodes.models import Episode, EpisodeStatus
from episodes.tools import WORKSPACE_KINDS
from packs.selectors import evaluator_task_lanes
from runs.pipeline import worker_sandbox
from runs.services import LiveRefusal, run_record_live_candidate
from verifiers import live
from verifiers.contract_check import ContractViolation, candidate_violations
from verifiers.families import FAMILIES
from verifiers.sandbox import SandboxUnavailable
from verifiers.task import Candidate
from verifiers.verdict import Reason

logger = logging.getLogger(__name__)
# The reaper sends a lost collection again after this, and gives up (missing candidate)
# after the second.
COLLECT_RETRY_SECONDS = 60
COLLECT_GIVE_UP_SECONDS = 600
WORKSPACE_FAMILIES = tuple(
    name for name, spec in FAMILIES.items() if spec.candidate_kind in WORKSPACE_KINDS
)


# --- the candidate, its surfaces, the record -------------------------------------------------


@dataclass(frozen=True)
class Collected:
    candidate: Candidate | None
    changed: list[str]
    notes: list[str]


def workspace_collect(episode_id: int) -> bool:
    """Build the ended episode's candidate from its workspace and record it (once); then
    destroy the workspace. False when there was nothing to do or it must be tried again."""
    episode = Episode.objects.select_related("task", "episode_run__run__contract_version").get(
        pk=episode_id
    )
    if episode.status != EpisodeStatus.SCORING or episode.result_id is not None:
        destroy_workspace(episode)
        return False
    await_quiet(episode.pk, except_step=None)
    try:
        collected = _collected(episode)
    except (SandboxUnavailable, live.LiveWorkspaceError):
        logger.warning("episode %s: workspace not collected", episode.pk, exc_info=True)
        return False  # the reaper sends the collection again (and gives up in the end)
    _record(episode, collected)
    destroy_workspace(episode)
    services.episode_run_close_if_collected(episode.episode_run_id)
    return True


def _collected(episode: Episode) -> Collected:
    folder = folder_of(episode)
    if folder is None or not (folder / live.layout.SNAPSHOT).is_file():
        return Collected(None, [], ["the workspace was never laid out"])
    lanes = evaluator_task_lanes(episode.task)
    inner = worker_sandbox()
    if inner is None:
        raise SandboxUnavailable("no sandbox on this worker")
    ws = workspace_of(episode, lanes, inner.name)
    if episode.task.family == "repo_patch":
        patch, changed = live.repo_diff(inner, ws, lanes)
        candidate = Candidate.of_patch(patch) if patch.strip() else None
        return Collected(candidate, list(changed), [])
    if episode.task.family == "artifact_task":
        artifact, changed, notes = live.artifact_candidate(ws)
        return Collected(artifact, changed, list(notes))
    candidate, notes = live.workspace_candidate(ws)
    return Collected(candidate, live.changed_paths(ws), list(notes))


def _record(episode: Episode, collected: Collected) -> None:
    contract = episode.episode_run.run.contract_version.contract or {}
    refusal = None
    violations: list[ContractViolation] = []
    if collected.candidate is not None:
        # The live workspace knows exactly which paths changed (its seed files are not
        # changes); required_outputs are looked for in the whole collected candidate.
        #
        # output_late (a file produced after the budget ran out) is never named here, and
        # that is the truth rather than a gap: a live workspace is held to its budgets as it
        # runs, so its files at the ending are the files as of the last step within budget.
        # A step past the steps budget, or begun past the wall time, is never run
        # (episodes.lifecycle); on the worker, a command is killed and a write refused at the
        # wall-time budget's end as the helper's clock reads it, however long the workspace
        # took to be copied in (verifiers.live); an action stopped by the ending keeps
        # nothing. So no file of the workspace can have been written after the budget, and
        # produced_after_budget stays empty (a step's files_written and times are recorded,
        # but nothing recorded could be late).
        violations = candidate_violations(
            contract, episode.task.family, collected.candidate, changed_paths=collected.changed
        )
    if violations:
        refusal = LiveRefusal(
            reason=Reason.CONTRACT_VIOLATION,
            details={
                "contract_violations": [violation.as_dict() for violation in violations],
                "changed_paths": len(collected.changed),
            },
        )
    with transaction.atomic():
        locked = Episode.objects.select_for_update().select_related("episode_run__run", "task")
        locked = locked.get(pk=episode.pk)
        if locked.status != EpisodeStatus.SCORING or locked.result_id is not None:
            return
        usage = {"wall_seconds": round(locked.wall_seconds or 0.0, 3)}
        usage["steps"] = float(locked.step_count)
        result = run_record_live_candidate(
            locked.episode_run.run, locked.task, collected.candidate, usage=usage, refusal=refusal
        )
        locked.result = result
        locked.candidate_kind = collected.candidate.kind if collected.candidate else ""
        locked.candidate_text = _candidate_text(collected)
        if refusal is not None:
            broken = "; ".join(violation.message for violation in violations)
            note = f"contract violation: {broken}"
            locked.end_note = (f"{locked.end_note}; {note}" if locked.end_note else note)[:300]
        lifecycle.copy_verdict(locked, result)
        locked.save()


def _candidate_text(collected: Collected) -> str:
    candidate = collected.candidate
    if candidate is None:
        return ""
    if candidate.kind == "patch":
        return candidate.text
    return "\n".join(sorted(candidate.files))  # a workspace or an artifact: its files, by path


def collect_give_up(episode: Episode) -> None:
    """A collection that never succeeded: the episode is scored with no candidate."""
    _record(episode, Collected(None, [], ["the workspace could not be collected"]))
    destroy_workspace(episode)


# --- the reaper's part -----------------------------------------------------------------------


@dataclass(frozen=True)
class WorkspaceReapReport:
    collections_resent: int
    collections_given_up: int
    folders_removed: int


def workspaces_reap(*, now: datetime | None = None) -> WorkspaceReapReport:
    """Collections that were lost are sent again (or given up); folders of ended episodes
    left behind (a worker died mid-step, a late step wrote after the end) are removed."""
    now = now or timezone.now()
    stuck = Episode.objects.filter(
        status=EpisodeStatus.SCORING,
        result__isnull=True,
        task__family__in=WORKSPACE_FAMILIES,
        ended_at__lt=now - timedelta(seconds=COLLECT_RETRY_SECONDS),
    ).select_related("task", "episode_run__run__contract_version")
    resent = given_up = 0
    for episode in stuck:
        if episode.ended_at and episode.ended_at < now - timedelta(seconds=COLLECT_GIVE_UP_SECONDS):
            collect_give_up(episode)
            services.episode_run_close_if_collected(episode.episode_run_id)
            given_up += 1
        elif send_collect(episode.pk):
            resent += 1
    return WorkspaceReapReport(resent, given_up, _remove_leftover_folders())


def _remove_leftover_folders() -> int:
    root = workspace_root()
    if not root.is_dir():
        return 0
    names = {entry.name: entry for entry in root.iterdir() if not entry.name.startswith(".")}
    if not names:
        return 0
    keep = set(
        Episode.objects.filter(workspace_folder__in=list(names))
        .filter(status=EpisodeStatus.OPEN)
        .values_list("workspace_folder", flat=True)
    )
    # Ended but not yet collected: the collection still needs the snapshot.
    keep |= set(
        Episode.objects.filter(
            workspace_folder__in=list(names), status=EpisodeStatus.SCORING, result__isnull=True
        ).values_list("workspace_folder", flat=True)
    )
    removed = 0
    for name, entry in names.items():
        if name in keep:
            continue
        try:
            live.destroy(entry)
            removed += 1
        except OSError:
            logger.warning("could not remove the workspace folder %s", entry, exc_info=True)
    return removed
