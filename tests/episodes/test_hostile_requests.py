"""Requests no honest client sends, in-process (Django's test client, the real endpoints and
database): each is answered with JSON-RPC, never the server's error page, and none leaves an
episode that the site can no longer finish or a sweep that stops for everyone."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from episodes import lifecycle
from episodes.models import Episode, EpisodeStatus
from episodes.services import OraclePrivilege, episodes_reap
from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import AuditAction, AuditEvent
from tests.conftest import EXAMPLES
from tests.episodes.test_lifecycle import call, error_code, open_run, result, spawn

pytestmark = [pytest.mark.django_db]

PARSE_ERROR = -32700
THROTTLED = -32004


@pytest.fixture(autouse=True)
def no_verdict_wait():
    with override_settings(SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS=0):
        yield


@pytest.fixture
def mc_version() -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / "arithmetic-mc").contract_version


def post_text(url: str, body: str) -> dict[str, Any]:
    """POST a body exactly as written (json.dumps would refuse what an attacker sends)."""
    response = Client(raise_request_exception=False).post(
        url, body, content_type="application/json"
    )
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    return response.json()


def first_task(version: ContractVersion) -> str:
    return version.tasks.order_by("position").first().task_id


# --- text that is not text ------------------------------------------------------------------


@pytest.mark.parametrize("where", ["benchmark", "nowhere"])
def test_an_unpaired_surrogate_in_the_request_id_is_a_parse_error(mc_version, where):
    _, url = open_run(mc_version)
    target = url if where == "benchmark" else "/cube/runs/x"

    answer = post_text(target, '{"jsonrpc": "2.0", "method": "cube/info", "id": "\\ud800"}')

    assert (error_code(answer), answer["id"]) == (PARSE_ERROR, None)
    assert "unpaired surrogate" in answer["error"]["message"]


def test_an_unpaired_surrogate_in_an_answer_is_refused_and_the_episode_still_finishes(
    mc_version,
):
    run, url = open_run(mc_version)
    task = spawn(url, first_task(mc_version))
    result(call(task, "cube/reset"))
    poisoned = (
        '{"jsonrpc": "2.0", "method": "cube/step", "id": 1, "params": '
        '{"name": "submit_answer", "arguments": {"answer": "B\\ud800"}}}'
    )

    assert error_code(post_text(task, poisoned)) == PARSE_ERROR
    result(call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}}))
    final = result(call(task, "cube/step", {"name": "final_step"}))

    assert final["done"] is True
    episode = Episode.objects.get(episode_run__run=run)
    assert (episode.candidate_text, episode.step_count) == ("B", 3)
    assert "result" in call(url, "cube/shutdown")


# --- numbers and characters no column holds ------------------------------------------------

INVALID_PARAMS = -32602


@pytest.mark.parametrize(
    "params",
    [{"offset": 10**30}, {"limit": 10**30}, {"offset": 2**31}, {"offset": -1}],
)
def test_an_offset_or_limit_past_any_column_is_invalid_params(mc_version, params):
    _, url = open_run(mc_version)

    answer = call(url, "cube/task_configs", params)

    assert error_code(answer) == INVALID_PARAMS
    assert "must be a whole number from 0 to 2,147,483,647" in answer["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("cube/task_configs", {"task_id": "arithmetic-mc/add\u0000"}),
        ("cube/tasks", {"task_id": "\u0000"}),
        ("cube/spawn", {"task_config": {"task_id": "a\u0000b"}}),
    ],
)
def test_a_nul_in_a_parameter_is_invalid_params(mc_version, method, params):
    _, url = open_run(mc_version)
    body = json.dumps({"jsonrpc": "2.0", "method": method, "id": 3, "params": params})

    answer = post_text(url, body)

    assert (error_code(answer), answer["id"]) == (INVALID_PARAMS, 3)
    assert "contains a NUL character" in answer["error"]["message"]


def test_a_nul_in_a_tool_argument_stays_the_tools_observation(mc_version):
    _, url = open_run(mc_version)
    task = spawn(url, first_task(mc_version))
    result(call(task, "cube/reset"))

    step = result(
        call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B\x00"}})
    )

    assert "NUL" in step["obs"]["error"]["exception_str"]


# --- the audit log is not a flood's sink ---------------------------------------------------


@override_settings(SECUREBENCH_EPISODE_STEPS_PER_SECOND=2)
def test_reads_of_a_reference_in_a_loop_are_throttled_before_they_flood_the_audit_log(
    mc_version,
):
    _, url = open_run(
        mc_version,
        oracle=OraclePrivilege(until=timezone.now() + timedelta(minutes=5), reason="loop test"),
    )
    task = spawn(url, first_task(mc_version))

    answers = [call(task, "cube/privileged_info") for _ in range(6)]  # well within a second

    codes = [error_code(answer) if "error" in answer else 0 for answer in answers]
    assert codes[:2] == [0, 0] and set(codes[2:]) == {THROTTLED}
    audited = AuditEvent.objects.filter(action=AuditAction.EPISODE_PRIVILEGED_INFO)
    assert audited.count() == 2


# --- sweeps go on past what they cannot handle ----------------------------------------------


def test_the_reaper_abandons_the_other_idle_episodes_past_one_it_cannot_finish(
    mc_version, monkeypatch, caplog
):
    episodes = []
    for _ in range(3):
        _, url = open_run(mc_version)
        task = spawn(url, first_task(mc_version))
        result(call(task, "cube/reset"))
        episodes.append(Episode.objects.order_by("-pk").first())
    Episode.objects.update(last_activity_at=timezone.now() - timedelta(hours=1))
    broken = episodes[1].pk
    finish = lifecycle.episode_finish

    def finish_but_one(episode: Episode, **kwargs: Any) -> bool:
        if episode.pk == broken:  # a row the site cannot handle, whatever the reason
            raise RuntimeError("this episode's data cannot be stored")
        return finish(episode, **kwargs)

    monkeypatch.setattr(lifecycle, "episode_finish", finish_but_one)

    with caplog.at_level(logging.ERROR, logger="episodes.services"):
        report = episodes_reap()

    assert report.abandoned == 2
    statuses = dict(Episode.objects.values_list("pk", "status"))
    assert statuses.pop(broken) == EpisodeStatus.OPEN  # left for the next sweep
    assert EpisodeStatus.OPEN not in statuses.values()
    assert f"could not abandon an idle episode (id {broken})" in caplog.text
