"""What each role is offered, beyond what it may open: the upload entry points only for those
who may upload, and an oracle run's candidates (the pack's reference solutions) withheld even
from the user who submitted the run.

Fixtures and helpers come from tests/test_roles_and_debug_mode.py.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import Candidate, CandidateOrigin, Evaluation, Run, RunSource, TaskResult
from tests.test_roles_and_debug_mode import (  # noqa: F401 - cv and users are fixtures
    SOLUTION,
    client_as,
    cv,
    users,
)

pytestmark = pytest.mark.django_db

UPLOAD_LINK = f'href="{reverse("pack-upload")}"'


@pytest.mark.parametrize(("role", "offered"), [("viewer", False), ("maintainer", True)])
def test_only_users_who_may_upload_are_offered_the_upload_page(users, role, offered):  # noqa: F811
    client = client_as(users[role])
    can_open = client.get(reverse("pack-upload")).status_code == 200

    # The navigation bar, the home page's button and the pack list's button.
    pages = {url: client.get(url).content.decode() for url in ("/", reverse("packs:list"))}

    assert can_open is offered
    assert {url: UPLOAD_LINK in body for url, body in pages.items()} == dict.fromkeys(
        pages, offered
    )


def test_the_submitter_of_an_oracle_run_is_not_shown_its_reference_candidates(cv, users):  # noqa: F811
    submitter = users["submitter"]
    run = Run.objects.create(
        contract_version=cv,
        agent_name="oracle",
        origin=CandidateOrigin.ORACLE,
        source=RunSource.FORM,
        submitted_by=submitter,
        submitted_at=timezone.now(),
    )
    task = cv.tasks.get(task_id="add")
    candidate = Candidate.objects.create(run=run, task=task, kind="code", text=SOLUTION)
    evaluation = Evaluation.objects.create(
        run=run, number=1, evaluator="securebench@1", status="done", score=1.0
    )
    result = TaskResult.objects.create(
        evaluation=evaluation,
        task=task,
        candidate=candidate,
        family=task.family,
        position=task.position,
        queue="sandbox",
        status="passed",
    )

    page = client_as(submitter).get(reverse("runs:result", args=[run.pk, result.pk]))

    assert page.status_code == 200
    body = page.content.decode()
    assert "CANONICAL-MARK" not in body
    assert "Candidate withheld" in body
