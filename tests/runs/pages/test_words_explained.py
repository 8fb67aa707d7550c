"""The site's words explained where they stand: a "?" beside a term (validity, oracle and
null runs, an interval, a draft) links to the guide's section on it, and every such section
exists; no word only the team uses ("seed 004", "Source: form", "oracle (reference
solutions)" beside "oracle")."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from runs.models import CandidateOrigin, Run, RunSource
from tests.runs.pages.support import PASSED, make_evaluation, make_run, page, run_url

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[3] / "templates"
GUIDE_Q = re.compile(r'<a class="guide-link" href="/docs/(\w+)/#([\w-]+)"[^>]*aria-label="([^"]+)"')


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(strip_tags(re.sub(r"<", " <", html))))


def explained(body: str) -> dict[str, str]:
    """The "?" links of a page: anchor → what it answers."""
    return {anchor: label for _guide, anchor, label in GUIDE_Q.findall(body)}


def test_a_reference_runs_page_names_its_candidates_and_source_in_plain_words(client, cv):
    run = make_run(cv, "oracle", origin=CandidateOrigin.ORACLE)
    make_evaluation(run, [PASSED])

    body = page(client, run_url(run))
    text = text_of(body)

    # A one-click reference run was asked for on its version page, not the submit page.
    assert "Submitted through the version page's reference button" in text
    assert "via the version page's reference button" in text
    assert "Source form" not in text and "via form" not in text
    assert "Candidates reference solutions · 0" in text
    assert "oracle (reference solutions)" not in text
    links = explained(body)
    assert links["oracle-null-and-repeat"] == "What are oracle and null runs?"
    assert links["budgets-and-validity"] == "What makes a run valid?"


def test_the_runs_list_and_the_board_explain_intervals_validity_and_reference_runs(client, cv):
    make_evaluation(make_run(cv, "oracle", origin=CandidateOrigin.ORACLE), [PASSED])

    runs = page(client, reverse("runs:list"))
    board = page(client, reverse("runs:leaderboard", args=["demo", 1]))

    assert {"how-a-run-is-scored", "budgets-and-validity"} <= set(explained(runs))
    assert "reference solutions" in text_of(runs)
    assert {"oracle-null-and-repeat", "budgets-and-validity"} <= set(explained(board))


def test_every_explained_term_lands_on_a_section_of_its_guide(client):
    anchors: set[tuple[str, str]] = set()
    for template in TEMPLATES.rglob("*.html"):
        for guide, anchor in re.findall(
            r"\{% url 'dashboard:guide' '(\w+)' %\}#([\w-]+)\"[^>]*aria-label", template.read_text()
        ):
            anchors.add((guide, anchor))
    assert len(anchors) >= 5

    for guide, anchor in sorted(anchors):
        body = client.get(reverse("dashboard:guide", args=[guide])).content.decode()
        assert f'id="{anchor}"' in body, f"{guide}#{anchor}"


def test_no_page_template_speaks_of_seeds_of_the_design():
    for template in TEMPLATES.rglob("*.html"):
        assert not re.search(r"seed \d{3}", template.read_text(), re.IGNORECASE), template


@pytest.mark.parametrize(
    ("mode", "origin", "words"),
    [
        ("bundle", CandidateOrigin.AGENT, "the submit page"),
        ("bundle", CandidateOrigin.NULL, "the version page's reference button"),
    ],
)
def test_a_run_made_through_a_form_names_the_form(client, cv, mode, origin, words):
    run = make_run(cv, "agent", origin=origin)
    Run.objects.filter(pk=run.pk).update(source=RunSource.FORM, mode=mode)

    text = text_of(page(client, run_url(run)))

    assert f"Submitted through {words}" in text and f"via {words}" in text
