"""Live episodes leak nothing sealed: every CUBE method's answer, every page, partial and
download of episode runs, searched for the leak world's markers in every encoding.

An agent episode run on the marked pack attempts every task the site serves live (wrong
answers, so that the stored verifier output holds expected values), another is left open;
an oracle run (shell-opened, privileged) reads references. The JSON-RPC answers of the agent
run carry no marker and read no sealed value; the oracle run's reads go through the
evaluator's reader only, each audited; the crawl of every role's pages covers the episode
partials and trajectories.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client, override_settings
from django.utils import timezone

from episodes import services
from episodes.live_collection import workspace_collect
from episodes.models import Episode, EpisodeRun, Step
from episodes.services import OraclePrivilege, episode_run_open
from episodes.tools import served_live
from runs.models import AuditEvent
from runs.pipeline import evaluation_finish_if_done, score_results
from runs.services import RunMetadata
from tests.security.leak_crawl import assert_no_leak, crawl, schema_get_urls
from tests.security.leak_markers import leaks_in
from tests.security.leak_world import LeakWorld, leak_world_fixture
from tests.security.sealed_probe import EVALUATOR, describe, sealed_probe

# Once, on the embedded pass: the database part of these rules (capabilities, who reads a
# trajectory, oracle privilege) runs on PostgreSQL too, in tests/episodes/test_lifecycle.py.
pytestmark = [pytest.mark.django_db, pytest.mark.embedded_only]


@pytest.fixture(scope="module")
def leak_world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LeakWorld]:
    yield from leak_world_fixture(django_db_blocker, tmp_path_factory.mktemp("leak-episodes"))


@pytest.fixture(autouse=True)
def isolated_data_dir(leak_world):
    # The module's world keeps its own pack-file roots for every test, with fresh throttles.
    cache.clear()
    yield leak_world.root
    cache.clear()


def rpc(client: Client, path: str, method: str, params: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": 1}
    if params is not None:
        body["params"] = params
    response = client.post(path, json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    assert_no_leak(f"{method} on {path.split('/')[2]} endpoint", response)
    return response.json()


def result_of(answer: dict[str, Any]) -> Any:
    assert "result" in answer, answer
    return answer["result"]


def attempt_every_task(client: Client, url: str, *, answer: str | None) -> list[str]:
    """Spawn, reset, list tools, submit (a wrong answer), final_step, evaluate, status."""
    task_urls = []
    for config in result_of(rpc(client, url, "cube/task_configs")):
        spawned = rpc(client, url, "cube/spawn", {"task_config": config})
        if "error" in spawned:
            continue  # families served with live workspaces later
        task_url = result_of(spawned).removeprefix("http://testserver")
        task_urls.append(task_url)
        rpc(client, task_url, "tools/list")
        first = result_of(rpc(client, task_url, "cube/reset"))
        structured = [c for c in first["obs"]["contents"] if c["_type"].endswith("Structured")]
        assert structured or first["obs"]["contents"]
        evaluate_early = rpc(client, task_url, "cube/evaluate")
        assert evaluate_early["error"]["code"] == -32003
        refused = rpc(client, task_url, "cube/privileged_info")
        if answer is not None:
            tools = [t["name"] for t in result_of(rpc(client, task_url, "tools/list"))]
            submit = next((name for name in tools if name.startswith("submit_")), None)
            if submit is not None:
                argument = "code" if submit == "submit_code" else "answer"
                rpc(
                    client, task_url, "cube/step", {"name": submit, "arguments": {argument: answer}}
                )
        rpc(client, task_url, "cube/step", {"name": "final_step"})
        rpc(client, task_url, "cube/status")
        assert "error" in refused or answer is None
    return task_urls


def submit_references(client: Client, url: str, task_ids: list[str]) -> None:
    """An oracle agent: its trajectory holds references (markers), privileged wherever shown."""
    for task_id in task_ids:
        config = result_of(rpc_raw(client, url, "cube/task_configs", {"task_id": task_id}))[0]
        task_url = result_of(rpc_raw(client, url, "cube/spawn", {"task_config": config}))
        task_url = task_url.removeprefix("http://testserver")
        rpc_raw(client, task_url, "cube/reset")
        reference = result_of(rpc_raw(client, task_url, "cube/privileged_info"))["data"]
        tools = [t["name"] for t in result_of(rpc_raw(client, task_url, "tools/list"))]
        submit = "submit_code" if "submit_code" in tools else "submit_answer"
        argument = "code" if submit == "submit_code" else "answer"
        rpc_raw(client, task_url, "cube/step", {"name": submit, "arguments": {argument: reference}})
        rpc_raw(client, task_url, "cube/step", {"name": "final_step"})


def collect_workspaces(run: Any) -> None:
    """What the actions worker does after a workspace episode ends (no worker runs here: the
    resets of workspace tasks were answered "not run", so there is no workspace to read)."""
    for episode in Episode.objects.filter(
        episode_run__run=run, status="scoring", result__isnull=True
    ):
        workspace_collect(episode.pk)


def rpc_raw(client: Client, path: str, method: str, params: dict[str, Any] | None = None) -> Any:
    # For the oracle agent, whose answers hold references by design: not searched.
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": 1, "params": params or {}}
    response = client.post(path, json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    return response.json()


@pytest.fixture(scope="module")
def episode_world(leak_world: LeakWorld, django_db_blocker) -> Iterator[dict[str, Any]]:
    """Runs made through the CUBE endpoints, as a client would, then scored in-process."""
    client = Client()
    with django_db_blocker.unblock(), override_settings(SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS=0):
        opened = episode_run_open(
            contract_version=leak_world.contract_version,
            metadata=RunMetadata(agent_name="episode-agent"),
            source="api",
            user=leak_world.users["submitter"],
        )
        url = services.benchmark_path(opened.secret)
        task_urls = attempt_every_task(client, url, answer="D")
        rpc(client, url, "cube/shutdown")
        collect_workspaces(opened.run)
        open_run = episode_run_open(
            contract_version=leak_world.contract_version,
            metadata=RunMetadata(agent_name="episode-open"),
            source="api",
            user=leak_world.users["submitter"],
        )
        open_url = services.benchmark_path(open_run.secret)
        configs = result_of(rpc(client, open_url, "cube/task_configs", {"task_id": "mc"}))
        open_task = result_of(rpc(client, open_url, "cube/spawn", {"task_config": configs[0]}))
        rpc(client, open_task.removeprefix("http://testserver"), "cube/reset")
        oracle = episode_run_open(
            contract_version=leak_world.contract_version,
            metadata=RunMetadata(agent_name="episode-oracle"),
            source="command",
            oracle=OraclePrivilege(until=timezone.now() + timedelta(hours=1), reason="leak test"),
        )
        submit_references(client, services.benchmark_path(oracle.secret), ["mc", "cc-rich"])
        rpc_raw(client, services.benchmark_path(oracle.secret), "cube/shutdown")
        oracle_open = episode_run_open(
            contract_version=leak_world.contract_version,
            metadata=RunMetadata(agent_name="episode-oracle-open"),
            source="command",
            oracle=OraclePrivilege(until=timezone.now() + timedelta(hours=1), reason="leak test"),
        )
        for run in (opened.run, oracle.run):
            evaluation = run.evaluations.get()
            queued = list(evaluation.results.filter(status="queued").values_list("pk", flat=True))
            if queued:
                score_results(queued, worker="leak-test")
            evaluation_finish_if_done(evaluation.pk)
        yield {
            "agent": opened,
            "agent_url": url,
            "task_urls": task_urls,
            "open": open_run,
            "oracle": oracle,
            "oracle_url": services.benchmark_path(oracle_open.secret),
        }


def test_the_agent_run_attempted_the_tasks_served_live_and_was_scored(leak_world, episode_world):
    run = episode_world["agent"].run
    served = [t for t in leak_world.contract_version.tasks.all() if served_live(t.family)]
    episodes = Episode.objects.filter(episode_run__run=run)
    assert episodes.count() == len(served) >= 5
    # reset, final_step, and a submit wherever the family has a verifier
    assert Step.objects.filter(run=run).count() >= 2 * len(served) + 5
    run.refresh_from_db()
    assert run.is_submitted
    evaluation = run.evaluations.get()
    assert evaluation.is_done, list(evaluation.results.values_list("task__task_id", "status"))


def test_no_cube_answer_of_an_agent_run_shows_or_reads_a_sealed_value(leak_world, episode_world):
    client = Client()
    with sealed_probe() as probe, override_settings(SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS=0):
        url = episode_world["agent_url"]
        # The run is closed: its URL answers nothing but the uniform refusal.
        assert rpc(client, url, "cube/info")["error"]["code"] == -32001
        for task_url in episode_world["task_urls"]:
            assert rpc(client, task_url, "cube/evaluate")["error"]["code"] == -32001
        fresh = episode_run_open(
            contract_version=leak_world.contract_version,
            metadata=RunMetadata(agent_name="episode-probe"),
            source="api",
            user=leak_world.users["submitter"],
        )
        fresh_url = services.benchmark_path(fresh.secret)
        for method in ("cube/info", "cube/tasks", "cube/task_configs"):
            result_of(rpc(client, fresh_url, method))
        task_urls = attempt_every_task(client, fresh_url, answer="D")
        for task_url in task_urls:
            rpc(client, task_url, "cube/evaluate")
            rpc(client, task_url, "cube/close")
        rpc(client, fresh_url, "cube/shutdown")
    assert probe.reads == [], describe(probe.reads)
    assert probe.accessor_calls == []


def test_oracle_references_are_read_by_the_evaluator_reader_only_and_each_read_is_audited(
    leak_world, episode_world
):
    client = Client()
    url = episode_world["oracle_url"]
    configs = result_of(rpc(client, url, "cube/task_configs", {"task_id": "cc"}))
    task_url = result_of(rpc(client, url, "cube/spawn", {"task_config": configs[0]}))
    task_url = task_url.removeprefix("http://testserver")
    rpc(client, task_url, "cube/reset")
    before = AuditEvent.objects.filter(action="episode_privileged_info").count()
    with sealed_probe() as probe:
        body = {"jsonrpc": "2.0", "method": "cube/privileged_info", "id": 1}
        response = client.post(task_url, json.dumps(body), content_type="application/json")
    reference = response.json()["result"]
    assert reference["_type"] == "cube.core.TextContent" and reference["data"]
    assert leaks_in(reference["data"]), "the reference of the marked task carries its marker"
    assert probe.reads and probe.by_path(EVALUATOR) == probe.reads, describe(probe.reads)
    events = AuditEvent.objects.filter(action="episode_privileged_info")
    assert events.count() == before + 1
    assert events.first().task_id == "cc" and events.first().reason == "leak test"


@pytest.mark.parametrize("role", ["viewer", "submitter", "maintainer of another pack"])
def test_no_page_of_any_role_shows_or_reads_a_sealed_value_of_an_episode_run(
    leak_world, episode_world, role
):
    client = leak_world.client_for(role)
    runs = [episode_world["agent"].run, episode_world["open"].run, episode_world["oracle"].run]
    start = [f"/runs/{run.pk}/" for run in runs]
    with sealed_probe() as probe:
        seen = crawl(client, [*start, *schema_get_urls(leak_world)])
    assert probe.reads == [], describe(probe.reads)
    assert all(status < 500 for status in seen.statuses.values())
    agent, oracle = runs[0].pk, runs[2].pk
    for run_id in (agent, oracle):
        # 286: the table of a closed run, which tells htmx to stop polling.
        assert seen.statuses.get(f"/runs/{run_id}/episodes/") in (200, 286), role
    trajectories = [url for url in seen.statuses if "/trajectory/" in url]
    transcripts = [url for url in seen.statuses if url.endswith("/transcript.jsonl")]
    if role == "submitter":
        # The owner reads the agent run's trajectories and transcripts: crawled, no marker.
        assert any(url.startswith(f"/runs/{agent}/") for url in trajectories)
        assert any(url.startswith(f"/runs/{agent}/") for url in transcripts)
    # Nobody here reads an oracle run's trajectory (references): privileged, debug mode only.
    for url in [*trajectories, *transcripts]:
        if url.startswith(f"/runs/{oracle}/"):
            assert seen.statuses[url] in (403, 404), (role, url)


def test_an_oracle_runs_trajectory_holds_references_for_privileged_eyes_only(
    leak_world, episode_world
):
    oracle = episode_world["oracle"].run
    result = oracle.evaluations.get().results.get(task__task_id="mc")
    url = f"/runs/{oracle.pk}/results/{result.pk}/trajectory/"
    for role in ("viewer", "submitter", "maintainer of another pack", "reviewer"):
        response = leak_world.client_for(role).get(url, headers={"HX-Request": "true"})
        assert response.status_code in (403, 404), (role, response.status_code)
        assert_no_leak(f"GET {url} as {role}", response)
    reviewer = leak_world.client_for("reviewer")
    switched = reviewer.post("/debug-mode/", {"reason": "leak test", "next": "/runs/"})
    assert switched.status_code == 302
    shown = reviewer.get(url, headers={"HX-Request": "true"})
    assert shown.status_code == 200 and leaks_in(shown.content.decode())
    assert AuditEvent.objects.filter(action="view_candidate", object_id=str(result.pk)).exists()


def test_the_secret_of_no_url_is_stored_or_shown(leak_world, episode_world):
    secrets = [episode_world["agent"].secret, episode_world["oracle"].secret]
    stored = json.dumps(
        list(EpisodeRun.objects.values()) + list(Episode.objects.values()), default=str
    )
    for secret in secrets:
        assert secret not in stored
    client = leak_world.client_for("superuser")
    seen = crawl(client, [f"/runs/{episode_world['agent'].run.pk}/", "/admin/"])
    for body in seen.bodies.values():
        for secret in secrets:
            assert secret not in body
