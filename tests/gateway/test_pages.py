"""Where the model endpoint URL is shown (once, to the one who opens the run) and where the
measured usage is shown (the run page, beside the reported usage)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from gateway.models import ModelEndpoint
from runs.models import Run
from tests.gateway.conftest import PACK, budget_version, chat, harness_user

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
