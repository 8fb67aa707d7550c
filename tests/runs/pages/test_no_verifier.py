"""Results of a family with no verifier yet (a deferred family such as tool_call) as a user
reads them: counted apart as "no verifier", never as failures; a run with only such tasks has
no score and is not judged valid, on every page and in the API."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from packs.services import pack_import_folder
from runs.models import Run
from runs.services import RunMetadata, run_create, run_submit
from tests.conftest import EXAMPLES
from tests.runs.pages.support import FAILED, PASSED, PENDING, make_evaluation, make_run, page

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _broker(broker: Any) -> None:
    """Submitting sends Celery messages on commit; keep them in a broker of the test's own."""


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", strip_tags(html))


@pytest.fixture
def deferred_run() -> Run:
    """A submitted run of the example pack whose one task is a tool_call (no verifier)."""
    version = pack_import_folder(
        folder=EXAMPLES / "deferred-tool-call", source_name="deferred-tool-call"
    ).contract_version
    run = run_create(contract_version=version, metadata=RunMetadata("tooler"), source="api")
    evaluation = run_submit(run)
    assert evaluation.is_done and evaluation.pending == 1  # scored by the real pipeline
    return run


def test_a_run_of_a_family_without_a_verifier_has_no_score_and_no_verdict_of_validity(
    client, deferred_run
):
    text = text_of(page(client, reverse("runs:detail", args=[deferred_run.pk])))

    assert "No score. No result of this evaluation can be verified" in text
    assert "no score — no verifier" in text  # the evaluations table
    assert "1 no verifier" in text
    assert "0 / 1" not in text and "0 % · 0/1" not in text and "0 of 1 passed" not in text
    assert "not judged — the run has no candidate" in text
    assert "every candidate keeps the contract" not in text


def test_runs_list_board_and_home_page_do_not_count_it_as_failed(client, deferred_run):
    version = deferred_run.contract_version
    pages = {
        "runs list": page(client, reverse("runs:list")),
        "home": page(client, "/"),
        "leaderboard": page(
            client, reverse("runs:leaderboard", args=[version.pack.pack_id, version.version])
        ),
    }
    for name, body in pages.items():
        text = text_of(body)
        assert "no verifier" in text, name
        assert "0 / 1" not in text, name
    assert "not judged" in text_of(pages["runs list"])
    board = text_of(pages["leaderboard"])
    # No score, so no rank: listed apart under "Not scored", never as rank 1.
    assert "Not scored These runs have no score" in board
    assert "No ranked runs yet" in board


def test_the_api_says_there_is_no_score_and_why(client, deferred_run):
    status = client.get(f"/api/v1/runs/{deferred_run.pk}/evaluations/1/").json()
    detail = client.get(f"/api/v1/runs/{deferred_run.pk}/").json()
    listed = client.get("/api/v1/runs/").json()["results"][0]

    assert status["score"] is None and status["scored"] == 0 and status["no_verifier"] == 1
    assert status["no_score_reason"].startswith("no verifier: no result can be verified")
    assert detail["evaluations"][0]["no_score_reason"] == status["no_score_reason"]
    assert detail["validity"] == listed["validity"] == "not judged"


def test_a_mixed_run_counts_its_pending_results_apart(client, cv):
    # Four verifiable tasks and one tool_call task (tests/runs/pages/conftest.py).
    run = make_run(cv, "mixed")
    make_evaluation(run, [PASSED, PASSED, PASSED, FAILED, PENDING])

    text = text_of(page(client, reverse("runs:detail", args=[run.pk])))

    assert "3 / 4 · 1 no verifier" in text  # passed of the scored results
    assert "tool_call: no verifier yet, not scored" in text  # the family chart
    assert "No score." not in text
