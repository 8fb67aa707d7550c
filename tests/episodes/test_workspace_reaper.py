"""The reaper's part for live workspaces, at the database level: folders of ended episodes left
behind (a worker that died mid-step, a late step writing after the end) are removed while
live ones stay; a collection that was lost is sent again, then given up (the task scored with
no candidate) so that a shut-down run still finishes its evaluation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import override_settings
from django.utils import timezone

from episodes import live_collection, live_workspaces, services
from episodes.models import Episode, EpisodeStatus
from episodes.services import episode_run_open
from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import ResultStatus, TaskResult
from runs.services import RunMetadata
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(tmp_path: Path):
    folder = tmp_path / "episode-workspaces"
    folder.mkdir()
    with override_settings(SECUREBENCH_EPISODE_WORKSPACE_DIR=folder):
        yield folder


@pytest.fixture
def version() -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / "terminal-files").contract_version


def episodes_of(version: ContractVersion, count: int) -> list[Episode]:
    opened = episode_run_open(
        contract_version=version, metadata=RunMetadata(agent_name="reaper"), source="command"
    )
    made = []
    for task in version.tasks.order_by("position")[:count]:
        episode, _ = services.episode_spawn(opened.episode_run, {"metadata": {"id": task.task_id}})
        made.append(episode)
    return made


def with_folder(root: Path, episode: Episode, **fields) -> Path:
    name = live_workspaces.new_folder_name(episode.pk)
    Episode.objects.filter(pk=episode.pk).update(workspace_folder=name, **fields)
    folder = root / name
    folder.mkdir()
    (folder / "snapshot.tar").write_bytes(b"not really a tar")
    return folder


def test_folders_of_ended_or_unknown_episodes_go_and_live_ones_stay(root, version):
    open_one, collecting, ended = episodes_of(version, 3)
    live_folder = with_folder(root, open_one)
    # Ended, its candidate not yet collected: the collection still needs the snapshot.
    pending = with_folder(root, collecting, status=EpisodeStatus.SCORING)
    left = with_folder(root, ended, status=EpisodeStatus.DONE, ending=EpisodeStatus.DONE)
    orphan = root / "999999-0123456789abcdef"  # an episode deleted since (its run removed)
    orphan.mkdir()
    report = live_collection.workspaces_reap()
    assert report.folders_removed == 2
    assert live_folder.is_dir() and pending.is_dir()
    assert not left.exists() and not orphan.exists()


def test_a_lost_collection_is_sent_again_then_given_up_and_the_run_finishes(root, version):
    (first,) = episodes_of(version, 1)
    folder = with_folder(
        root,
        first,
        status=EpisodeStatus.SCORING,
        ending=EpisodeStatus.ABANDONED,
        ended_at=timezone.now() - timedelta(minutes=2),
    )
    services.episode_run_shutdown(first.episode_run_id)
    run = first.episode_run.run
    run.refresh_from_db()
    assert not run.is_submitted, "the run waits for the workspace's candidate"
    assert live_collection.workspaces_reap().collections_resent == 1
    Episode.objects.filter(pk=first.pk).update(ended_at=timezone.now() - timedelta(hours=1))
    report = live_collection.workspaces_reap()
    assert report.collections_given_up == 1
    episode = Episode.objects.get(pk=first.pk)
    assert (episode.status, episode.verdict_status) == ("abandoned", "failed")
    assert episode.verdict_reason == "missing_candidate"
    assert not folder.exists()
    run.refresh_from_db()
    assert run.is_submitted
    results = TaskResult.objects.filter(evaluation__run=run)
    assert results.count() == version.task_count
    assert not results.exclude(status=ResultStatus.FAILED).exists()
