"""The issue's scenario: a scripted agent spends tokens through the gateway against the
stand-in provider until its token budget stops it. Measured tokens and dollars are the
stand-in's usage summed and priced from LiteLLM's table; the agent's own key is in no log,
page or database row."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from django.db import connection
from django.test import Client

from bench import standin as stand
from episodes.models import Episode
from gateway.models import CallStatus, ModelCall
from gateway.prices import price_table_path
from runs.models import Run
from tests.gateway.conftest import (
    api_for,
    budget_version,
    chat,
    cube,
    harness_user,
    open_run,
    spawn_episode,
)

pytestmark = pytest.mark.django_db
CALL_TOKENS = stand.INPUT_TOKENS + stand.OUTPUT_TOKENS
BUDGET = 500  # tokens per task: the 4th call takes q1 past it, the 5th is refused


def table_usd(input_tokens: int, output_tokens: int) -> float:
    """The stand-in model's price read straight from the file LiteLLM ships."""
    entry = json.loads(price_table_path().read_text())[stand.MODEL]
    return input_tokens * entry["input_cost_per_token"] + (
        output_tokens * entry["output_cost_per_token"]
    )


def database_text() -> str:
    """Every row of every table, as text."""
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - names from the schema
            rows += [repr(row) for row in cursor.fetchall()]
    return "\n".join(rows)


def test_a_scripted_agent_spends_its_token_budget_then_is_refused_and_truncated(
    make_pack, gateway_settings, standin, caplog
):
    caplog.set_level(logging.DEBUG)
    budget_version(make_pack, {"tokens": BUDGET})
    owner = harness_user()
    opened = open_run(api_for(owner))
    task_url = spawn_episode(opened.benchmark, "q1")
    own_key = f"sk-own-{uuid.uuid4().hex}"

    answers = []
    for turn in range(10):  # the scripted agent: call until the gateway says stop
        answer = chat(opened.endpoint, stream=turn % 2 == 1, headers={"X-Provider-Key": own_key})
        body = b"".join(answer.streaming_content) if answer.streaming else answer.content
        answers.append((answer.status_code, body))
        if answer.status_code != 200:
            break

    calls_made = len(answers) - 1
    assert calls_made == -(-(BUDGET + 1) // CALL_TOKENS)  # the first call past the budget
    status, body = answers[-1]
    assert status == 402
    error = json.loads(body)["error"]
    assert error["code"] == "budget_exceeded" and "Budget exhausted" in error["message"]
    # The refused call never reached the provider; every other one did, with the own key.
    assert len(standin.state.received) == calls_made
    assert {r.headers["Authorization"] for r in standin.state.received} == {f"Bearer {own_key}"}

    run = Run.objects.get(pk=opened.run_id)
    measured = run.measured_usage
    assert measured["input_tokens"] == calls_made * stand.INPUT_TOKENS
    assert measured["output_tokens"] == calls_made * stand.OUTPUT_TOKENS
    expected_usd = table_usd(calls_made * stand.INPUT_TOKENS, calls_made * stand.OUTPUT_TOKENS)
    assert measured["usd"] == pytest.approx(expected_usd, rel=1e-9)
    assert measured["tasks"]["q1"]["calls"] == calls_made
    assert run.over_budget and any("q1" in note for note in run.budget_notes)
    episode = Episode.objects.get(episode_run__run=run, task__task_id="q1")
    assert episode.ending == "truncated" and "tokens" in episode.end_note
    statuses = list(ModelCall.objects.filter(run=run).values_list("status", flat=True))
    assert statuses == [CallStatus.OK] * calls_made + [CallStatus.REFUSED]
    # The refused task's next call is refused too, and the other task still has its budget.
    assert chat(opened.endpoint, headers={"X-Provider-Key": own_key}).status_code == 402
    assert chat(opened.endpoint, task="q2").status_code == 200
    assert cube(task_url, "cube/status")  # the episode URL still answers its status

    # The own key: in no log line, no page, no database row.
    owner_browser = Client()
    owner_browser.force_login(owner)
    pages = [owner_browser.get(f"/runs/{run.pk}/"), owner_browser.get(f"/api/v1/runs/{run.pk}/")]
    assert all(page.status_code == 200 for page in pages)
    assert "Usage measured" in pages[0].content.decode()
    assert own_key not in "\n".join(page.content.decode() for page in pages)
    assert own_key not in caplog.text
    assert own_key not in "\n".join(str(record.__dict__) for record in caplog.records)
    assert own_key not in database_text()


def test_dollars_bind_like_tokens(make_pack, gateway_settings, standin):
    per_call = table_usd(stand.INPUT_TOKENS, stand.OUTPUT_TOKENS)
    budget_version(make_pack, {"usd": per_call * 1.5})
    opened = open_run(api_for(harness_user()), mode="bundle")  # a bundle run opened ahead
    assert chat(opened.endpoint).status_code == 200
    assert chat(opened.endpoint).status_code == 200  # spent 1 call's worth: still under
    refused = chat(opened.endpoint)
    assert refused.status_code == 402 and "USD" in refused.json()["error"]["message"]
    assert len(standin.state.received) == 2
    run = Run.objects.get(pk=opened.run_id)
    assert run.over_budget
    assert run.measured_usage["usd"] == pytest.approx(2 * per_call)


def test_a_run_refused_exactly_at_its_budget_stays_over_budget_once_submitted(
    make_pack, gateway_settings, standin
):
    budget_version(make_pack, {"tokens": 2 * CALL_TOKENS})  # two calls spend it exactly
    api = api_for(harness_user())
    opened = open_run(api, mode="bundle")
    assert [chat(opened.endpoint).status_code for _ in range(3)] == [200, 200, 402]
    candidate = {"task_id": "q1", "candidate": {"kind": "text", "text": "B"}}
    added = api.post(
        f"/api/v1/runs/{opened.run_id}/candidates/", {"candidates": [candidate]}, "json"
    )
    assert added.status_code == 200, added.json()

    submitted = api.post(f"/api/v1/runs/{opened.run_id}/submit/")

    # Spent to the token, never past it: the refusal is what put the run over its budget,
    # and submitting (which recomputes the budget notes) must not forget it.
    assert submitted.status_code == 202, submitted.json()
    assert submitted.json()["over_budget"] is True
    run = Run.objects.get(pk=opened.run_id)
    assert run.over_budget and any("refused" in note for note in run.budget_notes)
