"""The gateway's forwarding, against the stand-in provider: only through a live capability,
only to the configured provider, provider faults never the agent's, streams as they arrive."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from bench import standin as stand
from bench.standin import StandinProvider
from episodes.models import EpisodeRun
from episodes.services import episode_run_revoke
from gateway import services
from gateway.models import CallStatus, ModelCall
from gateway.services import endpoint_revoke
from runs.models import Run
from runs.services import run_submit
from tests.gateway.conftest import (
    OPERATOR_KEY,
    api_for,
    budget_version,
    chat,
    harness_user,
    open_run,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def opened(make_pack, gateway_settings):
    budget_version(make_pack, {"tokens": 10_000})
    return open_run(api_for(harness_user()))


@pytest.fixture
def elsewhere():
    """A second server the gateway must never be made to reach."""
    with StandinProvider() as provider:
        yield provider


def test_a_call_is_forwarded_with_the_operators_key_and_metered(opened, standin):
    answer = chat(opened.endpoint)
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "Hello from the stand-in."
    [received] = standin.state.received
    assert received.path == "/v1/chat/completions"
    assert received.headers["Authorization"] == f"Bearer {OPERATOR_KEY}"
    call = ModelCall.objects.get()
    assert (call.status, call.key_source, call.model) == (CallStatus.OK, "operator", stand.MODEL)
    assert (call.input_tokens, call.output_tokens) == (stand.INPUT_TOKENS, stand.OUTPUT_TOKENS)
    assert call.usd is not None and call.usd > 0 and call.latency_ms > 0
    assert Run.objects.get(pk=opened.run_id).measured_usage["calls"] == 1


@pytest.mark.parametrize(
    "mangle",
    [
        lambda path: path.replace("/v1", "x/v1"),  # a secret that is not ours
        lambda path: "/gateway/short/v1",  # not even the shape of one
    ],
)
def test_a_wrong_capability_is_404_and_nothing_is_forwarded(opened, standin, mangle):
    answer = chat(mangle(opened.endpoint))
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"
    assert standin.state.received == [] and not ModelCall.objects.exists()


@pytest.mark.parametrize("how", ["endpoint", "episode run", "submitted"])
def test_a_revoked_or_closed_capability_is_404_and_nothing_is_forwarded(opened, standin, how):
    assert chat(opened.endpoint).status_code == 200
    run = Run.objects.get(pk=opened.run_id)
    if how == "endpoint":
        endpoint_revoke(run)
    elif how == "episode run":
        episode_run_revoke(EpisodeRun.objects.get(run=run))
    else:
        Run.objects.filter(pk=run.pk).update(submitted_at=run.created_at)
    answer = chat(opened.endpoint)
    assert answer.status_code == 404
    assert len(standin.state.received) == 1


def test_a_bundle_run_opened_ahead_has_an_endpoint_until_it_is_submitted(
    make_pack, gateway_settings, standin
):
    budget_version(make_pack, {"tokens": 10_000})
    opened = open_run(api_for(harness_user()), mode="bundle")
    assert chat(opened.endpoint, task="q2").status_code == 200
    run = Run.objects.get(pk=opened.run_id)
    run_submit(run)
    assert chat(opened.endpoint, task="q2").status_code == 404
    assert len(standin.state.received) == 1


@pytest.mark.parametrize("task", ["", "no-such-task"])
def test_a_call_must_name_one_of_the_runs_tasks(opened, standin, task):
    answer = chat(opened.endpoint, task=task)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] in ("missing_task", "unknown_task")
    assert standin.state.received == []


def test_the_path_cannot_name_another_url(opened, standin, elsewhere):
    other = elsewhere.base_url
    tails = [
        f"/chat/completions/{other}/chat/completions",
        f"/{other}/chat/completions",
        "/chat/completions/../../models",
        "/chat/%2e%2e/%2e%2e/models",
        "/models",
    ]
    for tail in tails:
        assert chat(opened.endpoint, path=tail).status_code == 404, tail
    assert standin.state.received == [] and elsewhere.state.received == []


def test_headers_and_body_cannot_redirect_the_call(opened, standin, elsewhere, settings):
    settings.ALLOWED_HOSTS = ["*"]
    host = elsewhere.base_url.removeprefix("http://").removesuffix("/v1")
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "base_url": elsewhere.base_url,
        "api_base": elsewhere.base_url,
        "url": elsewhere.base_url + "/chat/completions",
    }
    headers = {"Host": host, "X-Forwarded-Host": host, "X-Original-URL": elsewhere.base_url}
    answer = chat(opened.endpoint, body=body, headers=headers)
    assert answer.status_code == 200
    assert [r.path for r in standin.state.received] == ["/v1/chat/completions"]
    assert elsewhere.state.received == []
    # None of the agent's headers is passed on.
    assert "X-Forwarded-Host" not in standin.state.received[0].headers


def test_a_provider_redirect_is_not_followed(opened, standin, elsewhere):
    standin.state.mode, standin.state.location = "redirect", elsewhere.base_url
    answer = chat(opened.endpoint)
    assert answer.status_code == 502
    assert elsewhere.state.received == []


@pytest.mark.parametrize("fault", ["fail", "slow", "unreachable"])
def test_a_provider_fault_is_502_recorded_as_an_error_and_not_counted(
    opened, standin, settings, fault
):
    if fault == "unreachable":
        standin.server.server_close()  # nothing listens on its port any more
        standin.state.release.set()
    standin.state.mode, standin.state.delay = fault, 2.0
    settings.SECUREBENCH_GATEWAY_TIMEOUT_SECONDS = 0.3
    answer = chat(opened.endpoint)
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["code"] == "provider_error"
    assert "not counted against the agent" in error["message"]
    call = ModelCall.objects.get()
    assert call.status == CallStatus.ERROR and call.input_tokens is None
    run = Run.objects.get(pk=opened.run_id)
    assert run.measured_usage == {} and not run.over_budget


def test_a_stream_passes_through_chunk_by_chunk_as_it_arrives(opened, standin):
    standin.state.mode = "hold"  # the stand-in sends one chunk, then waits for release
    answer = chat(opened.endpoint, stream=True)
    assert answer.status_code == 200 and answer.streaming
    chunks = iter(answer.streaming_content)
    first = next(chunks)
    assert b"Hello" in first and not standin.state.release.is_set()
    assert not ModelCall.objects.exists()  # recorded once the stream has ended
    standin.state.release.set()
    rest = b"".join(chunks)
    assert b"[DONE]" in rest and b" stand-in" in rest
    assert standin.state.received[0].body["stream_options"] == {"include_usage": True}
    call = ModelCall.objects.get()
    assert call.stream and call.status == CallStatus.OK
    assert (call.input_tokens, call.output_tokens) == (stand.INPUT_TOKENS, stand.OUTPUT_TOKENS)
    assert call.first_byte_ms is not None and call.first_byte_ms <= call.latency_ms


def test_a_model_the_price_table_does_not_know_has_no_price(opened, standin):
    standin.state.model = "stand-in-model-nobody-prices"
    body = {"model": "stand-in-model-nobody-prices", "messages": []}
    assert chat(opened.endpoint, body=body).status_code == 200
    call = ModelCall.objects.get()
    assert call.usd is None and call.input_tokens == stand.INPUT_TOKENS
    measured = Run.objects.get(pk=opened.run_id).measured_usage
    assert measured["usd"] == 0 and measured["unpriced_calls"] == 1


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_are_metered_too(opened, standin, stream):
    body = {"model": "gpt-4o-mini", "max_tokens": 50, "messages": [], "stream": stream}
    answer = chat(opened.endpoint, body=body, path="/messages")
    assert answer.status_code == 200
    if stream:
        b"".join(answer.streaming_content)
    [received] = standin.state.received
    assert received.path == "/v1/messages" and received.headers["x-api-key"] == OPERATOR_KEY
    call = ModelCall.objects.get()
    assert (call.api, call.input_tokens, call.output_tokens) == (
        "messages",
        stand.INPUT_TOKENS,
        stand.OUTPUT_TOKENS,
    )


def test_a_refusal_speaks_the_apis_error_shape(opened):
    answer = Client().get(opened.endpoint + "/chat/completions")
    assert answer.status_code == 405
    assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    answer = Client().get(opened.endpoint + "/messages")
    assert answer.json()["type"] == "error"


def test_a_call_with_no_key_anywhere_is_refused(opened, standin, settings):
    settings.SECUREBENCH_GATEWAY_API_KEY = ""
    answer = chat(opened.endpoint)
    assert answer.status_code == 401 and "X-Provider-Key" in answer.json()["error"]["message"]
    assert standin.state.received == []


def test_no_endpoint_is_issued_without_a_provider(make_pack, settings):
    settings.SECUREBENCH_GATEWAY_BASE_URL = ""
    budget_version(make_pack, {"tokens": 10})
    answer = api_for(harness_user()).post(
        "/api/v1/runs/",
        {"pack": "gateway-pack", "version": 1, "mode": "episodes", "agent_name": "x"},
        format="json",
    )
    assert answer.status_code == 201 and "model_endpoint_url" not in answer.json()
    assert json.loads(answer.content)["benchmark_url"]


def test_an_agent_that_hangs_up_mid_stream_is_still_charged_the_whole_answer(opened, standin):
    standin.state.mode = "hold"
    endpoint = services.endpoint_by_secret(opened.endpoint.split("/")[2])
    record = services.CallRecord(
        target=services.call_target(endpoint, "q1"),
        api="chat_completions",
        model=stand.MODEL,
        stream=True,
        key_source=services.OPERATOR_KEY,
        started=time.monotonic(),
    )
    relay = services.call_forward(record, {"model": stand.MODEL, "stream": True}, "key")
    assert relay.chunks is not None and b"Hello" in next(relay.chunks)
    standin.state.release.set()  # the provider goes on; the agent does not read it
    relay.chunks.close()  # the agent hangs up: the server closes the answer's iterator
    call = ModelCall.objects.get()
    assert call.status == CallStatus.OK and "hung up" in call.note
    assert (call.input_tokens, call.output_tokens) == (stand.INPUT_TOKENS, stand.OUTPUT_TOKENS)
    assert Run.objects.get(pk=opened.run_id).measured_usage["calls"] == 1
