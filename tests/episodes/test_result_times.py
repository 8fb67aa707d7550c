"""A result's times as a user reads them, each named for what it measured: the verifier's
("verified in …") and, for a live episode, the episode's own, never one bare duration that
passes the verifier's milliseconds off as the agent's time."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from episodes import lifecycle, services
from episodes.models import Episode
from tests.conftest import make_user
from tests.episodes.test_pages import cv, open_run, result_of, score_queued, signed_in  # noqa: F401
from tests.runs.pages.support import PASSED, make_evaluation, make_run

pytestmark = [pytest.mark.django_db, pytest.mark.embedded_only]


@pytest.fixture(autouse=True)
def verdicts_are_not_awaited(settings):
    settings.SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS = 0


def text_of(html: str) -> str:
    """The page's words, each element's apart (a term and its value are two)."""
    return re.sub(r"\s+", " ", unescape(strip_tags(re.sub(r"<", " <", html))))


def test_a_live_result_names_the_verification_and_the_episode_time(cv):  # noqa: F811
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    episode, _secret = services.episode_spawn(opened.episode_run, {"metadata": {"id": "q1"}})
    lifecycle.episode_reset(episode)
    episode.refresh_from_db()
    # The agent thought for two minutes between its reset and its answer.
    Episode.objects.filter(pk=episode.pk).update(
        first_reset_at=episode.first_reset_at - timedelta(minutes=2)
    )
    episode.refresh_from_db()
    lifecycle.episode_step(
        episode, method="cube/step", name="submit_answer", arguments={"answer": "B"}, action_id="c"
    )
    lifecycle.episode_step(
        episode, method="cube/step", name="final_step", arguments={}, action_id=None
    )
    score_queued(opened.run)
    result = result_of(opened.run, "q1")
    client = signed_in(owner)

    result_page = text_of(
        client.get(reverse("runs:result", args=[opened.run.pk, result.pk])).content.decode()
    )
    run_page = text_of(client.get(reverse("runs:detail", args=[opened.run.pk])).content.decode())

    time = re.compile(r"Time verified in (< 1 ms|\d+ ms|[\d.]+ s) · episode 12\d\.\d\d s")
    assert time.search(result_page), result_page
    assert re.search(r"verified in (< 1 ms|\d+ ms|[\d.]+ s) · episode 12\d\.\d\d s", run_page)


def test_a_bundle_result_names_its_time_as_the_verifiers(client, make_pack):
    from tests.runs.pages.support import import_version  # noqa: PLC0415

    client.force_login(make_user("reader", "viewer"))
    run = make_run(import_version(make_pack, "bundle", tasks=1))
    evaluation = make_evaluation(run, [PASSED])
    result = evaluation.results.get()

    page = text_of(client.get(reverse("runs:result", args=[run.pk, result.pk])).content.decode())

    assert "Time verified in 500 ms" in page  # 0.5 s, as the fixture's verifier took
    assert "episode" not in page.split("Time", 1)[1].split("Queue", 1)[0]
