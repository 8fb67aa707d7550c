"""Values no column, sum or page can hold, sent to the run API, bundles and forms: each is a
400 naming the field (never a 500), and nothing is stored that a later step cannot handle
(a run stuck for good because its submission always failed)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from runs.models import AuditEvent, Candidate, Run
from tests.conftest import make_user
from tests.runs import test_run_api as api_tests
from tests.runs.test_run_api import add, create_run, jsonl, post_bundle, text

harness = api_tests.harness  # a token holder with runs.add_run
version = api_tests.version  # runs-api v1: three multiple-choice tasks, a tokens budget

pytestmark = pytest.mark.django_db


def usage_line(task_id: str, **usage: Any) -> dict[str, Any]:
    return {**text(task_id, "B"), "usage": usage}


def raw_json(client: APIClient, url: str, body: str) -> Any:
    return client.post(url, body, content_type="application/json")


# --- usage figures ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines",
    [
        [usage_line("q1", wall_seconds=10**400)],  # does not even convert to a float
        [usage_line("q1", input_tokens=1e308), usage_line("q2", input_tokens=1e308)],  # sum: inf
    ],
    ids=["a-400-digit-figure", "figures-summing-to-infinity"],
)
def test_a_bundle_with_usage_no_sum_can_hold_is_refused_and_stores_nothing(harness, version, lines):
    response = post_bundle(harness, jsonl(*lines), agent_name="a")

    assert response.status_code == 400, response.content[:500]
    assert "must be a finite number of at most 1e+15" in response.content.decode()
    assert not Run.objects.exists() and not Candidate.objects.exists()


def test_an_api_run_whose_candidate_usage_is_refused_can_still_be_submitted(harness, version):
    run_id = create_run(harness).json()["id"]

    refused = add(harness, run_id, usage_line("q1", input_tokens=10**400))
    accepted = add(harness, run_id, usage_line("q1", input_tokens=10))
    submitted = harness.post(f"/api/v1/runs/{run_id}/submit/")

    assert refused.status_code == 400 and "input_tokens" in refused.content.decode()
    assert accepted.status_code == 200
    assert submitted.status_code == 202


def test_a_run_level_usage_of_infinity_is_refused(harness, version):
    body = '{"pack": "runs-api", "version": 1, "agent_name": "a", "usage": {"usd": 1e400}}'

    response = raw_json(harness, "/api/v1/runs/", body)

    assert response.status_code == 400
    assert response.json()["usage"]["usd"] == ["must be a finite number of at most 1e+15"]
    assert not Run.objects.exists()


# --- text that is not text --------------------------------------------------------------------


def test_an_api_body_holding_an_unpaired_surrogate_is_a_400(harness, version):
    body = '{"pack": "runs-api", "version": 1, "agent_name": "a", "\\ud800": 1}'

    response = raw_json(harness, "/api/v1/runs/", body)

    assert response.status_code == 400
    assert "unpaired surrogate" in response.json()["detail"]
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "line",
    [
        {"task_id": "q\ud800", "candidate": {"kind": "text", "text": "B"}},
        {"run": {"agent_name": "x\ud800"}},
        {**text("q1", "B"), "\ud800": 1},
    ],
    ids=["task-id", "run-metadata", "a-key"],
)
def test_a_bundle_line_holding_an_unpaired_surrogate_is_refused(harness, version, line):
    content = (jsonl(line).decode().replace("\\\\ud800", "\\ud800")).encode()

    response = post_bundle(harness, content, agent_name="a")

    assert response.status_code == 400, response.content[:500]
    assert "unpaired surrogate escape" in response.content.decode()
    assert not Run.objects.exists()


# --- forms and query strings ------------------------------------------------------------------


def test_a_nul_in_a_query_string_is_a_400_on_every_database(version):
    client = Client()
    client.force_login(make_user("sub", "submitter"))

    response = client.get("/runs/submit/?pack=%00&version=1")

    assert response.status_code == 400
    assert "NUL" in response.content.decode()


@pytest.mark.parametrize(
    "path",
    [
        "/packs/x%00y/",
        "/packs/x%00y/compare/",
        "/packs/runs-api/v1/tasks/q%001",
        "/packs/runs-api/v1/files/assets/a%00.txt",
        "/leaderboards/x%00y/v1/",
        "/packs/x%00y/versions/1/health/",
        "/api/v1/packs/x%00y/",
        "/api/v1/packs/runs-api/versions/1/files/a%00b",
    ],
)
def test_a_nul_in_the_path_names_nothing_on_every_database(version, path):
    client = Client(raise_request_exception=False)
    client.force_login(make_user("reader", "viewer"))

    response = client.get(path)

    assert response.status_code == 404
    assert "NUL" in response.content.decode()


def test_a_debug_mode_reason_with_a_control_character_is_refused():
    client = Client()
    client.force_login(make_user("rev", "reviewer"))

    response = client.post("/debug-mode/", {"reason": "looking\x00at it"}, follow=True)

    assert "without control characters" in response.content.decode()
    assert not AuditEvent.objects.exists()
    assert "securebench_debug_mode" not in client.session
