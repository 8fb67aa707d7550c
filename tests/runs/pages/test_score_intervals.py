"""Scores as a user reads them: the score, then the two ends of its 95 % Wilson interval
("1.00 [0.21, 1.00]" for 1 of 1 passed) on every page that shows one, and never "score ± half
width", which misstates one end of an interval that is not symmetric around the score."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from runs.stats import wilson_interval
from tests.runs.pages.support import FAILED, PASSED, make_evaluation, make_run, page, run_url

pytestmark = pytest.mark.django_db


def shown(passed: int, total: int) -> str:
    """What a page shows for ``passed`` of ``total``: the score and its interval's ends."""
    interval = wilson_interval(passed, total)
    assert interval is not None
    return f"{passed / total:.2f} [{interval.low:.2f}, {interval.high:.2f}]"


def visible_text(html: str) -> str:
    """The page's text as a browser shows it: no tags, whitespace collapsed."""
    return re.sub(r"\s+", " ", strip_tags(html))


def test_one_of_one_passed_reads_as_its_whole_asymmetric_interval():
    # The numbers the issue names, from the interval the worker stores.
    assert shown(1, 1) == "1.00 [0.21, 1.00]"
    assert shown(4, 4) == "1.00 [0.51, 1.00]"


def test_the_run_page_shows_the_score_with_both_ends_of_its_interval(client, cv):
    run = make_run(cv, "lucky")
    make_evaluation(run, [PASSED])

    body = page(client, run_url(run))
    text = visible_text(body)

    assert "1.00 [0.21, 1.00]" in text  # the evaluations table and the score card
    assert "Score [95 % CI]" in text
    assert "±" not in text
    # On hover: what the bracket is, with one more decimal.
    assert 'title="95 % Wilson interval: from 0.207 to 1.000"' in body
    assert "#how-a-run-is-scored" in body  # the guide says how the interval is read


def test_the_runs_list_leaderboard_and_home_page_show_the_same_interval(client, cv):
    run = make_run(cv, "steady")
    make_evaluation(run, [PASSED, PASSED, PASSED, FAILED])
    expected = shown(3, 4)

    pages = {
        "runs list": page(client, reverse("runs:list")),
        "leaderboard": page(client, reverse("runs:leaderboard", args=["demo", 1])),
        "home": page(client, "/"),
    }

    for name, body in pages.items():
        text = visible_text(body)
        assert expected in text, name
        assert "±" not in text, name
    assert "pass_rate [95 % CI]" in visible_text(pages["leaderboard"])
    assert "Score [95 % CI]" in visible_text(pages["runs list"])
