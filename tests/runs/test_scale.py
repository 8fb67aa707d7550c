"""What keeps big runs fast without changing what anyone sees: verdicts written under their
claim, summaries written once when an evaluation finishes and read by its pages, and a
leaderboard shown a page of ranks at a time."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from packs.models import ContractVersion
from packs.selectors import evaluator_lanes_for_tasks
from packs.services import pack_import_folder
from runs import pipeline
from runs.bundle import BundleLine, ParsedBundle
from runs.models import Evaluation, EvaluationStatus, ResultStatus, Run, RunSource, TaskResult
from runs.progress import evaluation_progress
from runs.services import RunMetadata, run_submit_bundle
from runs.stats import wilson_interval
from runs.views import LEADERBOARD_ROWS_PER_PAGE, RESULTS_PER_PAGE
from tests.conftest import make_user, mc_row
from verifiers.scoring import verify
from verifiers.task import Candidate, TaskLanes

pytestmark = pytest.mark.django_db

TASKS = RESULTS_PER_PAGE + 10


@pytest.fixture
def cv(make_pack) -> ContractVersion:
    rows = [mc_row(f"q{i}") for i in range(TASKS)]
    return pack_import_folder(
        folder=make_pack({"id": "scale", "version": 1}, rows)
    ).contract_version


@pytest.fixture
def client(client):
    client.force_login(make_user("reader", "viewer"))
    return client


def submitted(cv: ContractVersion, answers: dict[str, str]) -> Evaluation:
    """A run answering the given tasks, submitted (its messages are not sent: no commit)."""
    lines = [
        BundleLine(line=n, task_id=task_id, candidate=Candidate.of_text(answer))
        for n, (task_id, answer) in enumerate(answers.items(), start=1)
    ]
    _, evaluation = run_submit_bundle(
        contract_version=cv,
        bundle=ParsedBundle(lines=lines),
        metadata=RunMetadata(agent_name="scale"),
        source=RunSource.API,
    )
    return evaluation


def result_ids(evaluation: Evaluation) -> list[int]:
    return list(
        TaskResult.objects.filter(evaluation=evaluation, status=ResultStatus.QUEUED)
        .order_by("position")
        .values_list("pk", flat=True)
    )


# --- verdicts and summaries ----------------------------------------------------------------------


def test_scored_results_are_written_and_the_summary_lists_failure_reasons(cv):
    # Every other task right ("B"), the rest wrong; the last one has no candidate at all.
    answers = {f"q{i}": "B" if i % 2 == 0 else "C" for i in range(TASKS - 1)}
    evaluation = submitted(cv, answers)

    scored = pipeline.score_results(result_ids(evaluation), worker="test")

    assert scored == TASKS - 1
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.DONE
    right = sum(1 for answer in answers.values() if answer == "B")
    assert (evaluation.passed, evaluation.failed) == (right, TASKS - right)
    assert evaluation.failure_reasons == ["missing_candidate", "wrong_answer"]
    results = list(TaskResult.objects.filter(evaluation=evaluation).order_by("position"))
    assert [r.status for r in results[:2]] == [ResultStatus.PASSED, ResultStatus.FAILED]
    assert results[1].failure_reason == "wrong_answer"
    assert results[0].details["match_strategy"] == "label"
    assert all(r.lease_token is None and r.lease_expires_at is None for r in results)
    assert all(r.finished_at is not None and r.attempts <= 1 for r in results)
    assert results[0].duration_seconds is not None


def test_a_verdict_is_not_written_over_a_lease_someone_else_took(cv):
    evaluation = submitted(cv, {f"q{i}": "B" for i in range(TASKS)})
    claim = pipeline.results_claim(result_ids(evaluation)[:3], worker="slow")
    taken, *mine = claim.results
    other = uuid.uuid4()
    TaskResult.objects.filter(pk=taken.pk).update(lease_token=other)  # the reaper's re-claim
    verdicts = [(r, verify(_lanes(r), Candidate.of_text("B"))) for r in claim.results]

    pipeline.results_record(claim.token, verdicts)

    taken.refresh_from_db()
    assert taken.status == ResultStatus.RUNNING and taken.lease_token == other
    for result in mine:
        result.refresh_from_db()
        assert result.status == ResultStatus.PASSED and result.lease_token is None


def _lanes(result: TaskResult) -> TaskLanes:
    return evaluator_lanes_for_tasks([result.task])[result.task_id]


# --- pages of a done evaluation ------------------------------------------------------------------


def test_the_run_page_of_a_done_evaluation_reads_its_summary_not_its_results(client, cv):
    evaluation = submitted(cv, {f"q{i}": "B" if i < 45 else "A" for i in range(TASKS)})
    pipeline.score_results(result_ids(evaluation), worker="test")
    url = reverse("runs:detail", args=[evaluation.run_id])

    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    # Read now: every request empties the connection's query log.
    over_results = [q["sql"] for q in queries if '"runs_taskresult"' in q["sql"]]
    body = response.content.decode()
    failed = client.get(url, {"status": "failed"}).content.decode()
    partial = client.get(url, {"page": 2}, HTTP_HX_REQUEST="true").content.decode()

    assert response.status_code == 200
    # Only the page of rows itself: no COUNT, GROUP BY or DISTINCT over the 60 results.
    assert len(over_results) == 1, over_results
    assert not re.search(r"COUNT|GROUP BY|DISTINCT", over_results[0])
    assert f"1–{RESULTS_PER_PAGE} of {TASKS}" in body
    assert f"45 / {TASKS}" in body
    assert '<option value="wrong_answer"' in body
    assert f"1–{TASKS - 45} of {TASKS - 45}" in failed
    assert f"{RESULTS_PER_PAGE + 1}–{TASKS} of {TASKS}" in partial


def test_the_progress_of_a_done_evaluation_matches_its_results(client, cv):
    evaluation = submitted(cv, {f"q{i}": "B" if i < 7 else "A" for i in range(TASKS - 2)})
    pipeline.score_results(result_ids(evaluation), worker="test")
    evaluation.refresh_from_db()

    progress = evaluation_progress(evaluation)

    assert progress.counts == {ResultStatus.PASSED: 7, ResultStatus.FAILED: TASKS - 7}
    assert progress.finished == progress.total == TASKS and progress.open == 0
    assert [s.status for s in progress.segments] == [ResultStatus.PASSED, ResultStatus.FAILED]
    assert progress.waiting == [] and progress.ahead == []


# --- the leaderboard -----------------------------------------------------------------------------


def test_the_leaderboard_shows_a_page_of_ranks_and_ranks_across_pages(client, cv):
    runs = LEADERBOARD_ROWS_PER_PAGE + 5
    for index in range(runs):
        run = Run.objects.create(
            contract_version=cv,
            agent_name=f"agent-{index:03d}",
            source=RunSource.API,
            submitted_at=timezone.now(),
        )
        passed = TASKS - index % TASKS  # scores fall with the index; ties every TASKS runs
        interval = wilson_interval(passed, TASKS)
        Evaluation.objects.create(
            run=run,
            number=1,
            evaluator="securebench@1",
            status=EvaluationStatus.DONE,
            finished_at=timezone.now(),
            total=TASKS,
            passed=passed,
            failed=TASKS - passed,
            score=passed / TASKS,
            ci_low=interval.low,
            ci_high=interval.high,
        )
    url = reverse("runs:leaderboard", args=["scale", 1])

    first = client.get(url).content.decode()
    second = client.get(url, {"page": 2}).content.decode()

    assert first.count("<tr") - 1 == LEADERBOARD_ROWS_PER_PAGE  # minus the header row
    assert f"1–{LEADERBOARD_ROWS_PER_PAGE} of {runs}" in first
    assert 'class="leader"' in first and 'class="leader"' not in second
    assert second.count("<tr") - 1 == runs - LEADERBOARD_ROWS_PER_PAGE
    # Ranks count every run before the page, ties included (1, 1, 3, 3, …).
    ranks = [int(n) for n in re.findall(r'<td class="num">(\d+)</td>\s*<td><a', second)]
    assert ranks == list(range(LEADERBOARD_ROWS_PER_PAGE + 1, runs + 1))
