"""Where the model endpoint URL is shown (once, to the one who opens the run) and where the
measured usage is shown (the run page, beside the reported usage)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from gateway.models import ModelEndpoint
from runs.models import Run
from tests.gateway.conftest import PACK, api_for, budget_version, chat, harness_user, open_run

pytestmark = pytest.mark.django_db
ENDPOINT_IN_PAGE = re.compile(r"http://testserver(/gateway/[A-Za-z0-9_-]{43}/v1)")


def test_the_page_that_opens_an_episode_run_shows_the_endpoint_once(
    make_pack, gateway_settings, standin
):
    budget_version(make_pack, {"tokens": 10_000})
    owner = harness_user()
    browser = Client()
    browser.force_login(owner)

    opened = browser.post(reverse("episodes:open", args=[PACK, 1]), {"agent_name": "paged"})

    assert opened.status_code == 201 and "no-store" in opened["Cache-Control"]
    [endpoint] = set(ENDPOINT_IN_PAGE.findall(opened.content.decode()))
    run = Run.objects.get(agent_name="paged")
    assert ModelEndpoint.objects.get(run=run).capability_hash not in opened.content.decode()
    assert chat(endpoint).status_code == 200
    run_page = browser.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert endpoint not in run_page
    assert "Usage reported" in run_page and "Usage measured" in run_page
    assert 'id="measured-usage"' in run_page


def test_a_run_without_gateway_calls_says_so(make_pack, gateway_settings):
    budget_version(make_pack, {"tokens": 10_000})
    owner = harness_user()
    browser = Client()
    browser.force_login(owner)
    browser.post(reverse("episodes:open", args=[PACK, 1]), {"agent_name": "quiet"})
    run = Run.objects.get(agent_name="quiet")
    page = browser.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "No model call went through the site" in page


def test_a_runs_model_calls_are_listed_filtered_and_only_for_those_who_see_the_run(
    make_pack, gateway_settings, standin
):
    from bench import standin as stand  # noqa: PLC0415 - the stand-in's fixed usage

    budget_version(make_pack, {"tokens": stand.INPUT_TOKENS + stand.OUTPUT_TOKENS})
    owner = harness_user()
    opened = open_run(api_for(owner), mode="bundle")
    own_key = "sk-own-listed-nowhere"
    codes = [chat(opened.endpoint, headers={"X-Provider-Key": own_key}).status_code]
    codes += [chat(opened.endpoint).status_code, chat(opened.endpoint, task="q2").status_code]
    assert codes == [200, 402, 200]
    browser = Client()
    browser.force_login(owner)
    url = reverse("gateway:run-calls", args=[opened.run_id])

    page = browser.get(url).content.decode()
    refused = browser.get(url, {"status": "refused"}).content.decode()
    q2 = browser.get(url, {"task": "q2"}).content.decode()
    none = browser.get(url, {"task": "q9"}).content.decode()
    stranger = Client()
    stranger.force_login(harness_user("stranger"))

    counts = re.sub(r"<[^>]+>", "", page.split('data-testid="call-counts">')[1].split("</p>")[0])
    assert counts == "ok 2 · refused (over budget) 1"
    assert page.count("<tr>") == 1 + 3 and "the agent's own" in page
    assert refused.count("<tr>") == 1 + 1 and "budget" in refused
    assert q2.count("<tr>") == 1 + 1 and ">q2<" in q2 and ">q1<" not in q2
    assert "No model call of this run matches" in none
    assert own_key not in page
    assert stranger.get(url).status_code == 404
    run_page = browser.get(reverse("runs:detail", args=[opened.run_id])).content.decode()
    assert url in run_page
