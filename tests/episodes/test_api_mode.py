"""`POST /api/v1/runs/` with a mode: "episodes" opens a live run and answers its benchmark
URL once; "bundle" (the default) is the run API as before; anything else is a 400."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from episodes.capabilities import secret_digest
from episodes.models import EpisodeRun
from packs.models import ContractVersion
from runs.models import Run, RunMode, RunSource
from tests.conftest import make_user
from tests.runs.pages.support import import_version

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_throttle_counters():
    # Throttle counters live in the cache, which outlives a test's database rollback.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def cv(make_pack) -> ContractVersion:
    return import_version(make_pack, "live", tasks=2)


def harness_for(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def harness() -> APIClient:
    return harness_for(make_user("harness", "submitter"))


def create(client: APIClient, **fields: Any):
    body = {"pack": "live", "version": 1, "agent_name": "api-agent", **fields}
    return client.post("/api/v1/runs/", body, format="json")


def cube_info(url: str) -> dict[str, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "cube/info"})
    response = Client().post(url, body, content_type="application/json")
    assert response.status_code == 200
    return response.json()


def test_mode_episodes_opens_a_live_run_and_answers_its_url_once(harness, cv):
    response = create(harness, mode="episodes", model_name="m-2")

    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    body = response.json()
    assert body["mode"] == "episodes" and body["model_name"] == "m-2"
    assert body["benchmark_url"].startswith("http://testserver/cube/runs/")
    assert body["expires_at"]
    run = Run.objects.get(pk=body["id"])
    assert (run.mode, run.source, run.origin) == (RunMode.EPISODES, RunSource.API, "agent")
    secret = body["benchmark_url"].rsplit("/", 1)[-1]
    assert EpisodeRun.objects.get(run=run).capability_hash == secret_digest(secret)
    # The URL works as given, and the run's later answers never repeat it.
    assert (
        cube_info(body["benchmark_url"].removeprefix("http://testserver"))["result"]["num_tasks"]
        == 2
    )
    detail = harness.get(f"/api/v1/runs/{run.pk}/")
    listing = harness.get("/api/v1/runs/")
    assert detail.json()["mode"] == "episodes" and "benchmark_url" not in detail.json()
    assert secret not in detail.content.decode() and secret not in listing.content.decode()


def test_the_default_mode_is_bundle(harness, cv):
    response = create(harness)

    assert response.status_code == 201
    body = response.json()
    assert body["mode"] == "bundle"
    assert "benchmark_url" not in body and "expires_at" not in body
    assert not EpisodeRun.objects.exists()


def test_an_unknown_mode_is_a_400_naming_the_field(harness, cv):
    response = create(harness, mode="live")

    assert response.status_code == 400
    assert list(response.json()) == ["mode"]
    assert not Run.objects.exists()


def test_a_viewer_cannot_open_an_episode_run(cv):
    response = create(harness_for(make_user("vic", "viewer")), mode="episodes")

    assert response.status_code == 403
    assert not Run.objects.exists()


def test_an_episode_run_takes_no_candidates_and_no_submit_through_the_api(harness, cv):
    run_id = create(harness, mode="episodes").json()["id"]
    item = {"task_id": "q1", "candidate": {"kind": "text", "text": "Answer: B"}}

    added = harness.post(
        f"/api/v1/runs/{run_id}/candidates/", {"candidates": [item]}, format="json"
    )
    submitted = harness.post(f"/api/v1/runs/{run_id}/submit/")

    assert added.status_code == 409 and "live episode run" in added.json()["detail"]
    assert submitted.status_code == 409 and "live episode run" in submitted.json()["detail"]
    run = Run.objects.get(pk=run_id)
    assert run.candidate_count == 0 and not run.is_submitted
