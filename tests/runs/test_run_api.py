"""The run API as a harness (token) or a browser (session) uses it, and as an attacker probes it."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import CandidateOrigin, Evaluation, ResultStatus, Run, RunSource, TaskResult
from runs.services import RunMetadata, run_submit_reference
from tests.conftest import mc_row
from tests.runs.conftest import wait_for

pytestmark = pytest.mark.django_db

MARK = "SECRET-LOG-MARK-5b1c"


@pytest.fixture(autouse=True)
def fresh_throttle_counters():
    # Throttle counters live in the cache, which outlives a test's database rollback.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def version(make_pack) -> ContractVersion:
    """Three multiple-choice tasks (answers B, C, A) and one deferred tool_call task."""
    folder = make_pack(
        {"id": "runs-api", "version": 1, "contract": {"budgets": {"tokens": 100}}},
        [
            mc_row("q1", "B"),
            mc_row("q2", "C"),
            mc_row("q3", "A"),
            {"id": "d1", "family": "tool_call", "input": {"goal": "x"}, "eval": {}},
        ],
    )
    return pack_import_folder(folder=folder).contract_version


def user_with(name: str, *codenames: str) -> User:
    """A user who may browse (packs.browse), with the given extra permissions."""
    user = User.objects.create_user(name, password="pw-for-tests-only")
    for codename in ("browse", *codenames):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        token = Token.objects.create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def harness() -> APIClient:
    return client_for(user_with("harness", "add_run"))


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def reader() -> APIClient:
    """A viewer's harness: reads runs and results, writes nothing."""
    return client_for(user_with("reader"))


def text(task_id: str, answer: str) -> dict[str, Any]:
    return {"task_id": task_id, "candidate": {"kind": "text", "text": f"Answer: {answer}"}}


def create_run(client: APIClient, **fields: Any) -> Any:
    body = {"pack": "runs-api", "version": 1, "agent_name": "my-agent", **fields}
    return client.post("/api/v1/runs/", body, format="json")


def add(client: APIClient, run_id: int, *items: Any) -> Any:
    return client.post(
        f"/api/v1/runs/{run_id}/candidates/", {"candidates": list(items)}, format="json"
    )


def submitted_run(client: APIClient, *items: Any) -> dict[str, Any]:
    run_id = create_run(client).json()["id"]
    if items:
        assert add(client, run_id, *items).status_code == 200
    return client.post(f"/api/v1/runs/{run_id}/submit/").json()


# --- create, add, submit ---------------------------------------------------------------------


def test_a_harness_creates_a_run_adds_batches_and_submits(harness, version):
    created = create_run(harness, model_name="m-1", usage={"input_tokens": 10})
    run_id = created.json()["id"]

    first = add(harness, run_id, text("q1", "B"), text("q2", "A"))
    second = add(harness, run_id, text("q3", "A"))
    submitted = harness.post(f"/api/v1/runs/{run_id}/submit/")

    assert created.status_code == 201
    assert created.json()["pack"] == "runs-api" and created.json()["version"] == 1
    assert created.json()["submitted"] is False and created.json()["source"] == "api"
    assert created.json()["urls"]["candidates"].endswith(f"/api/v1/runs/{run_id}/candidates/")
    assert created.json()["urls"]["page"] == f"http://testserver/runs/{run_id}/"
    assert first.json() == {"added": 2, "candidate_count": 2}
    assert second.json() == {"added": 1, "candidate_count": 3}
    assert submitted.status_code == 202
    assert submitted.json()["evaluation"] == 1 and submitted.json()["status"] == "queued"
    assert submitted.json()["status_url"].endswith(f"/api/v1/runs/{run_id}/evaluations/1/")
    run = Run.objects.get(pk=run_id)
    assert run.submitted_at is not None and run.source == RunSource.API
    assert run.agent_name == "my-agent" and run.model_name == "m-1"
    assert run.submitted_by.username == "harness"
    assert TaskResult.objects.filter(evaluation__run=run).count() == 4


def test_submitting_twice_answers_409_and_changes_nothing(harness, version):
    run_id = create_run(harness).json()["id"]
    add(harness, run_id, text("q1", "B"))

    first = harness.post(f"/api/v1/runs/{run_id}/submit/")
    second = harness.post(f"/api/v1/runs/{run_id}/submit/")
    late_batch = add(harness, run_id, text("q2", "C"))

    assert first.status_code == 202
    assert second.status_code == 409 and "already submitted" in second.json()["detail"]
    assert late_batch.status_code == 409
    assert Evaluation.objects.filter(run_id=run_id).count() == 1
    assert Run.objects.get(pk=run_id).candidate_count == 1


def test_a_run_over_its_token_budget_is_accepted_and_flagged(harness, version):
    run_id = create_run(harness, usage={"input_tokens": 300, "output_tokens": 200}).json()["id"]
    add(harness, run_id, text("q1", "B"))

    submitted = harness.post(f"/api/v1/runs/{run_id}/submit/").json()

    assert submitted["over_budget"] is True
    assert "over the budget of 400 for 4 tasks" in submitted["budget_notes"][0]


# --- create: validation and permissions ---------------------------------------------------------


def test_unknown_pack_or_version_is_a_400_naming_the_field(harness, version):
    no_pack = create_run(harness, pack="nope")
    no_version = create_run(harness, version=7)

    assert no_pack.status_code == 400
    assert no_pack.json() == {"pack": ["There is no pack 'nope'."]}
    assert no_version.status_code == 400
    assert no_version.json() == {"version": ["Pack 'runs-api' has no version 7 (it has: 1)."]}
    assert not Run.objects.exists()


def test_create_names_missing_unknown_and_invalid_fields(harness, version):
    missing = harness.post("/api/v1/runs/", {"pack": "runs-api", "version": 1}, format="json")
    typo = create_run(harness, agent="x")
    bad_usage = create_run(harness, usage={"tokens": 5, "usd": -1})

    assert missing.status_code == 400 and "agent_name" in missing.json()
    assert typo.status_code == 400 and typo.json() == {"agent": ["Unknown field."]}
    assert bad_usage.status_code == 400
    assert "is not a usage key" in bad_usage.json()["usage"]["tokens"][0]
    assert bad_usage.json()["usage"]["usd"] == ["must be a non-negative number"]
    assert not Run.objects.exists()


def test_creating_a_run_needs_a_signed_in_user_with_permission(anonymous, version):
    no_perm = client_for(user_with("reader"))

    anonymous_answer = create_run(anonymous)
    no_perm_answer = create_run(no_perm)

    assert anonymous_answer.status_code == 403
    assert "credentials were not provided" in anonymous_answer.json()["detail"]
    assert no_perm_answer.status_code == 403
    assert "permission" in no_perm_answer.json()["detail"]
    assert not Run.objects.exists()


def test_a_signed_in_browser_session_creates_runs_only_with_a_csrf_token(version):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(user_with("session-user", "add_run"))
    browser.get("/accounts/login/")
    token = browser.cookies["csrftoken"].value
    body = {"pack": "runs-api", "version": 1, "agent_name": "browser"}

    forged = browser.post("/api/v1/runs/", body, format="json")
    genuine = browser.post("/api/v1/runs/", body, format="json", HTTP_X_CSRFTOKEN=token)

    assert forged.status_code == 403
    assert genuine.status_code == 201
    assert Run.objects.count() == 1


# --- batches: errors ----------------------------------------------------------------------------


def test_an_unknown_task_id_is_named_by_its_item_and_nothing_is_stored(harness, version):
    run_id = create_run(harness).json()["id"]

    response = add(harness, run_id, text("q1", "B"), text("q9", "B"))

    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["item"] == 2 and error["field"] == "task_id"
    assert "'q9' is not a task of runs-api v1" in error["message"]
    assert Run.objects.get(pk=run_id).candidate_count == 0


def test_a_candidate_of_the_wrong_kind_for_its_family_is_refused(harness, version):
    run_id = create_run(harness).json()["id"]
    code = {"task_id": "q1", "candidate": {"kind": "code", "code": "def f(): ..."}}

    response = add(harness, run_id, code)

    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error == {
        "item": 1,
        "field": "candidate.kind",
        "message": "task 'q1' is multiple_choice, which takes a text candidate, not code",
    }


def test_a_task_given_in_an_earlier_batch_or_twice_in_one_is_refused(harness, version):
    run_id = create_run(harness).json()["id"]
    add(harness, run_id, text("q1", "B"))

    again = add(harness, run_id, text("q2", "C"), text("q1", "A"))
    twice = add(harness, run_id, text("q3", "A"), text("q3", "B"))

    assert again.status_code == 400
    assert again.json()["errors"][0]["item"] == 2
    assert "'q1' already has a candidate in this run" in again.json()["errors"][0]["message"]
    assert twice.status_code == 400
    assert twice.json()["errors"][0]["item"] == 2
    assert "'q3' already has a candidate" in twice.json()["errors"][0]["message"]
    assert Run.objects.get(pk=run_id).candidate_count == 1


def test_malformed_candidates_are_refused_with_item_and_field(harness, version):
    run_id = create_run(harness).json()["id"]

    response = add(
        harness,
        run_id,
        "not an object",
        {"task_id": "q1"},
        {"task_id": "q2", "candidate": {"kind": "binary"}},
        {"task_id": "q3", "candidate": {"kind": "text", "text": 42}},
        {"task_id": "q1", "candidate": {"kind": "text", "text": "A"}, "usage": {"usd": -1}},
    )

    assert response.status_code == 400
    found = {(e["item"], e["field"]) for e in response.json()["errors"]}
    assert found == {
        (1, ""),
        (2, "candidate"),
        (3, "candidate.kind"),
        (4, "candidate.text"),
        (5, "usage.usd"),
    }
    assert Run.objects.get(pk=run_id).candidate_count == 0


def test_a_batch_must_be_a_non_empty_list_of_at_most_1000_items(harness, version):
    run_id = create_run(harness).json()["id"]

    empty = add(harness, run_id)
    too_many = add(harness, run_id, *[text("q1", "B")] * 1001)
    not_a_list = harness.post(
        f"/api/v1/runs/{run_id}/candidates/", {"candidates": {"q1": "B"}}, format="json"
    )

    assert empty.status_code == 400 and "candidates" in empty.json()
    assert too_many.status_code == 400
    assert "no more than 1000 elements" in too_many.json()["candidates"][0]
    assert not_a_list.status_code == 400 and "candidates" in not_a_list.json()


def test_a_batch_body_over_the_size_cap_is_refused_with_413(harness, version, settings):
    settings.SECUREBENCH_MAX_BATCH_BYTES = 2000
    run_id = create_run(harness).json()["id"]

    response = add(harness, run_id, text("q1", "B" * 3000))

    assert response.status_code == 413
    assert "larger than" in response.json()["detail"]
    assert Run.objects.get(pk=run_id).candidate_count == 0


def test_a_create_body_over_the_request_cap_is_refused_with_413(harness, version, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = create_run(harness, notes="n" * 2000)

    assert response.status_code == 413
    assert not Run.objects.exists()


def test_an_oversized_candidate_is_refused_by_name(harness, version, settings):
    settings.SECUREBENCH_MAX_CANDIDATE_BYTES = 100
    run_id = create_run(harness).json()["id"]

    response = add(harness, run_id, text("q1", "B" * 200))

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "candidate.text"
    assert "larger than" in response.json()["errors"][0]["message"]


def test_deeply_nested_or_broken_json_is_a_400(harness, version):
    run_id = create_run(harness).json()["id"]
    url = f"/api/v1/runs/{run_id}/candidates/"

    nested = harness.post(url, '{"candidates": ' + "[" * 100_000, content_type="application/json")
    broken = harness.post(url, '{"candidates": [', content_type="application/json")

    assert nested.status_code == 400 and "JSON parse error" in nested.json()["detail"]
    assert broken.status_code == 400 and "JSON parse error" in broken.json()["detail"]


# --- batches and submit: who may write --------------------------------------------------------


def test_only_the_runs_creator_may_add_candidates_or_submit(harness, anonymous, version):
    run_id = create_run(harness).json()["id"]
    stranger = client_for(user_with("stranger", "add_run"))

    stranger_add = add(stranger, run_id, text("q1", "B"))
    stranger_submit = stranger.post(f"/api/v1/runs/{run_id}/submit/")
    anonymous_add = add(anonymous, run_id, text("q1", "B"))
    anonymous_submit = anonymous.post(f"/api/v1/runs/{run_id}/submit/")
    missing = add(harness, 999_999, text("q1", "B"))

    # A draft is its creator's alone: to anyone else it does not exist.
    assert stranger_add.status_code == 404 and stranger_submit.status_code == 404
    assert anonymous_add.status_code == 403 and anonymous_submit.status_code == 403
    assert missing.status_code == 404
    run = Run.objects.get(pk=run_id)
    assert run.candidate_count == 0 and run.submitted_at is None
    # Once submitted, others may read the run but still not write to it.
    assert harness.post(f"/api/v1/runs/{run_id}/submit/").status_code == 202
    late = stranger.post(f"/api/v1/runs/{run_id}/submit/")
    assert late.status_code == 403
    assert "Only the user who created this run" in late.json()["detail"]


def test_a_creator_whose_permission_was_withdrawn_can_no_longer_write(version):
    user = user_with("revoked", "add_run")
    client = client_for(user)
    run_id = create_run(client).json()["id"]
    user.user_permissions.clear()

    response = add(client, run_id, text("q1", "B"))

    assert response.status_code == 403


# --- reading progress and results ---------------------------------------------------------------


def test_the_status_counts_results_in_one_aggregate_query(
    harness, reader, version, django_assert_num_queries
):
    queued = submitted_run(harness, text("q1", "B"), text("q2", "A"))

    # The token and its user, the user's and their groups' permissions (may they browse?),
    # then the evaluation and one aggregate over its results.
    with django_assert_num_queries(5):
        status = reader.get(queued["status_url"]).json()

    assert status["done"] is False and status["status"] == "queued"
    assert status["counts"] == {
        "queued": 2,
        "running": 0,
        "passed": 0,
        "failed": 1,  # q3 has no candidate
        "error": 0,
        "pending": 1,  # d1 is a deferred family
    }
    assert status["score"] is None and status["total"] == 4
    assert status["results_url"].endswith("/evaluations/1/results/")


def poll_until_done(client: APIClient, url: str, timeout: float = 60) -> dict[str, Any]:
    wait_for(lambda: client.get(url).json()["done"], timeout, f"{url} to say done")
    return client.get(url).json()


@pytest.mark.django_db(transaction=True)
def test_a_worker_scores_a_submitted_run_and_the_status_says_done(
    workers, harness, reader, version
):
    workers.start()
    queued = submitted_run(harness, text("q1", "B"), text("q2", "A"))

    status = poll_until_done(reader, queued["status_url"])
    results = reader.get(queued["results_url"]).json()["results"]

    assert status["status"] == "done"
    assert status["counts"] == {
        "queued": 0,
        "running": 0,
        "passed": 1,
        "failed": 2,
        "error": 0,
        "pending": 1,
    }
    assert status["score"] == pytest.approx(1 / 3)
    assert 0 <= status["ci_low"] < status["score"] < status["ci_high"] <= 1
    assert [(r["task_id"], r["status"], r["failure_reason"]) for r in results] == [
        ("q1", "passed", ""),
        ("q2", "failed", "wrong_answer"),
        ("q3", "failed", "missing_candidate"),
        ("d1", "pending", "no_verifier"),
    ]
    assert results[0]["attempts"] == 1


def test_results_list_verdicts_and_never_logs_or_detail_strings(harness, reader, version):
    queued = submitted_run(harness, text("q1", "B"), text("q2", "A"))
    TaskResult.objects.filter(task__task_id="q1").update(
        status=ResultStatus.FAILED,
        failure_reason="wrong_answer",
        stdout=f"stdout {MARK}",
        stderr=f"stderr {MARK}",
        details={
            "error": f"expected {MARK}",
            "notes": [MARK],
            "nested": {"answer": MARK},
            "answered_choice_index": 7,
            "choice_count": 3,
            "tests_exit_code": 1,
            "timed_out": False,
        },
        duration_seconds=0.5,
    )

    page = reader.get(queued["results_url"])
    everything = [
        page,
        reader.get(queued["status_url"]),
        reader.get(f"/api/v1/runs/{queued['run']}/"),
        reader.get("/api/v1/runs/"),
        reader.get(f"/api/v1/runs/{queued['run']}/evaluations/"),
    ]

    assert page.status_code == 200 and page.json()["count"] == 4
    first = page.json()["results"][0]
    assert first == {
        "task_id": "q1",
        "sample": 0,
        "family": "multiple_choice",
        "status": "failed",
        "score": 0.0,
        "failure_reason": "wrong_answer",
        "duration_seconds": 0.5,
        "sandbox_backend": "",
        "attempts": 0,
        "waiting_for": "",
        "counts": {"choice_count": 3, "tests_exit_code": 1, "timed_out": False},
    }
    for response in everything:
        assert response.status_code == 200
        assert MARK not in response.content.decode()
        assert "answered_choice_index" not in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_an_oracle_runs_results_do_not_reveal_the_answers(workers, reader, version):
    workers.start()
    run, _ = run_submit_reference(
        contract_version=version,
        origin=CandidateOrigin.ORACLE,
        metadata=RunMetadata(agent_name="oracle"),
        source=RunSource.COMMAND,
    )
    poll_until_done(reader, f"/api/v1/runs/{run.pk}/evaluations/1/")
    # The verifier recorded which choice each oracle answer named: the answer key itself.
    recorded = TaskResult.objects.filter(
        evaluation__run=run, details__has_key="answered_choice_index"
    )
    assert recorded.count() == 3

    page = reader.get(f"/api/v1/runs/{run.pk}/evaluations/1/results/").json()

    scored = [r for r in page["results"] if r["family"] == "multiple_choice"]
    assert [r["status"] for r in scored] == ["passed", "passed", "passed"]
    assert all(r["counts"] == {} for r in page["results"])
    assert "answered_choice_index" not in json.dumps(page) and "Answer:" not in json.dumps(page)


def test_results_filter_by_status_and_family_and_refuse_unknown_status(harness, reader, version):
    url = submitted_run(harness, text("q1", "B"))["results_url"]

    failed = reader.get(url, {"status": "failed"}).json()
    deferred = reader.get(url, {"family": "tool_call"}).json()
    bad = reader.get(url, {"status": "won"})

    assert [r["task_id"] for r in failed["results"]] == ["q2", "q3"]
    assert [r["task_id"] for r in deferred["results"]] == ["d1"]
    assert deferred["results"][0]["status"] == "pending"
    assert bad.status_code == 400 and "status" in bad.json()


def test_an_unknown_evaluation_or_run_is_404(harness, reader, version):
    queued = submitted_run(harness, text("q1", "B"))

    assert reader.get(f"/api/v1/runs/{queued['run']}/evaluations/2/").status_code == 404
    assert reader.get("/api/v1/runs/999999/evaluations/1/results/").status_code == 404
    assert reader.get("/api/v1/runs/999999/").status_code == 404


def test_runs_are_listed_newest_first_and_filtered(harness, reader, version, make_pack):
    other = make_pack({"id": "runs-api", "version": 2}, [mc_row("q1")])
    pack_import_folder(folder=other)
    create_run(harness, agent_name="alpha")
    create_run(harness, agent_name="beta", version=2)

    everything = harness.get("/api/v1/runs/").json()
    by_version = harness.get("/api/v1/runs/", {"pack": "runs-api", "version": 2}).json()
    by_agent = harness.get("/api/v1/runs/", {"agent": "ALPHA"}).json()
    bad = harness.get("/api/v1/runs/", {"version": "two"})
    # Drafts (not submitted yet) are listed for their creator only.
    assert reader.get("/api/v1/runs/").json()["count"] == 0

    assert [r["agent_name"] for r in everything["results"]] == ["beta", "alpha"]
    assert [r["agent_name"] for r in by_version["results"]] == ["beta"]
    assert [r["agent_name"] for r in by_agent["results"]] == ["alpha"]
    assert bad.status_code == 400 and "version" in bad.json()


def test_a_run_shows_its_evaluations_newest_first(harness, reader, version):
    queued = submitted_run(harness, text("q1", "B"))
    reviewer = client_for(user_with("reviewer", "add_evaluation"))
    reviewer.post(f"/api/v1/runs/{queued['run']}/evaluations/")

    detail = reader.get(f"/api/v1/runs/{queued['run']}/").json()

    assert detail["submitted"] is True and detail["candidate_count"] == 1
    assert [e["number"] for e in detail["evaluations"]] == [2, 1]
    assert detail["evaluations"][0]["status_url"].endswith("/evaluations/2/")
    assert detail["evaluations"][1]["counts"] == {
        "queued": 1,
        "running": 0,
        "passed": 0,
        "failed": 2,
        "error": 0,
        "pending": 1,
    }


# --- re-evaluation --------------------------------------------------------------------------------


def test_re_evaluating_needs_the_add_evaluation_permission(harness, anonymous, version):
    run_id = submitted_run(harness, text("q1", "B"))["run"]
    reviewer = client_for(user_with("reviewer", "add_evaluation"))

    by_harness = harness.post(f"/api/v1/runs/{run_id}/evaluations/")
    by_anonymous = anonymous.post(f"/api/v1/runs/{run_id}/evaluations/")
    by_reviewer = reviewer.post(f"/api/v1/runs/{run_id}/evaluations/")

    assert by_harness.status_code == 403 and by_anonymous.status_code == 403
    assert by_reviewer.status_code == 202 and by_reviewer.json()["evaluation"] == 2
    evaluation = Evaluation.objects.get(run_id=run_id, number=2)
    assert evaluation.created_by.username == "reviewer"


def test_an_unsubmitted_run_cannot_be_re_evaluated(harness, version):
    owner = client_for(user_with("owner", "add_run", "add_evaluation"))
    run_id = create_run(owner).json()["id"]
    reviewer = client_for(user_with("reviewer", "add_evaluation"))

    response = owner.post(f"/api/v1/runs/{run_id}/evaluations/")
    # Someone else's draft does not exist for them.
    other = reviewer.post(f"/api/v1/runs/{run_id}/evaluations/")

    assert response.status_code == 409 and "not submitted" in response.json()["detail"]
    assert other.status_code == 404
    assert not Evaluation.objects.exists()


# --- one-shot bundle upload ---------------------------------------------------------------------


def jsonl(*lines: Any) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def post_bundle(client: APIClient, content: bytes, name: str = "c.jsonl", **fields: Any) -> Any:
    body = {"pack": "runs-api", "version": 1, **fields}
    body["bundle"] = SimpleUploadedFile(name, content)
    return client.post("/api/v1/runs/bundle/", body, format="multipart")


def test_a_bundle_upload_creates_a_run_and_queues_its_evaluation(harness, version):
    run_line = {"run": {"agent_name": "from-bundle", "model_name": "m", "usage": {"usd": 0.5}}}

    response = post_bundle(harness, jsonl(run_line, text("q1", "B"), text("q2", "C")))

    assert response.status_code == 201
    body = response.json()
    assert body["run"]["agent_name"] == "from-bundle" and body["run"]["submitted"] is True
    assert body["run"]["candidate_count"] == 2
    assert body["evaluation"]["evaluation"] == 1
    run = Run.objects.get(pk=body["run"]["id"])
    assert run.usage["usd"] == 0.5 and run.source == RunSource.API
    assert run.evaluations.count() == 1


def test_bundle_form_fields_win_over_the_run_line_and_archives_work(harness, version):
    lines = jsonl({"run": {"agent_name": "inner"}}, text("q1", "B"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("my-run/candidates.jsonl", lines)

    response = post_bundle(harness, buffer.getvalue(), "run.zip", agent_name="outer")

    assert response.status_code == 201
    assert response.json()["run"]["agent_name"] == "outer"


def test_bundle_errors_name_file_line_and_field_and_store_nothing(harness, version):
    content = jsonl(text("q1", "B"), {"task_id": "q2", "candidate": {"kind": "text"}})

    response = post_bundle(harness, content, agent_name="a")

    assert response.status_code == 400
    assert response.json()["errors"][0] == {
        "file": "c.jsonl",
        "line": 2,
        "field": "candidate.text",
        "message": "is required and must be a string",
    }
    assert not Run.objects.exists()


def test_a_bundle_with_an_unknown_task_is_refused_whole(harness, version):
    response = post_bundle(harness, jsonl(text("q1", "B"), text("zz", "B")), agent_name="a")

    assert response.status_code == 400
    assert response.json()["errors"][0]["line"] == 2
    assert "'zz' is not a task" in response.json()["errors"][0]["message"]
    assert not Run.objects.exists()


def test_a_bundle_without_an_agent_name_anywhere_is_refused(harness, version):
    response = post_bundle(harness, jsonl(text("q1", "B")))

    assert response.status_code == 400
    assert "agent_name" in response.json()
    assert not Run.objects.exists()


def test_a_bundle_over_the_size_limit_is_refused_with_413(harness, version, settings):
    settings.SECUREBENCH_MAX_BUNDLE_BYTES = 1000

    response = post_bundle(harness, jsonl(text("q1", "B" * 2000)), agent_name="a")

    assert response.status_code == 413
    assert "larger than" in response.json()["detail"]
    assert not Run.objects.exists()


def test_bundle_uploads_need_permission(anonymous, version):
    no_perm = client_for(user_with("reader"))

    assert post_bundle(anonymous, jsonl(text("q1", "B")), agent_name="a").status_code == 403
    assert post_bundle(no_perm, jsonl(text("q1", "B")), agent_name="a").status_code == 403
    assert not Run.objects.exists()


# --- throttling and schema ------------------------------------------------------------------------


def test_writes_are_throttled_per_user_and_reads_are_not(harness, reader, version, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"run_writes": "2/minute", "run_candidates": "1/minute"},
    }
    other = client_for(user_with("other", "add_run"))

    answers = [create_run(harness).status_code for _ in range(3)]
    run_id = Run.objects.first().pk
    batches = [add(harness, run_id, text(t, "B")).status_code for t in ("q1", "q2")]

    assert answers == [201, 201, 429]
    assert batches == [200, 429]
    assert create_run(other).status_code == 201
    assert all(reader.get("/api/v1/runs/").status_code == 200 for _ in range(5))
    assert Run.objects.count() == 3


def test_the_default_write_rate_stops_a_flood_of_runs(harness, version):
    answers = [create_run(harness).status_code for _ in range(61)]

    assert answers[:60] == [201] * 60
    assert answers[60] == 429
    assert Run.objects.count() == 60


def test_the_schema_documents_the_run_endpoints(anonymous):
    schema = anonymous.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()

    assert "/api/v1/runs/{run_id}/candidates/" in schema["paths"]
    assert "/api/v1/runs/{run_id}/evaluations/{number}/results/" in schema["paths"]
    assert "post" in schema["paths"]["/api/v1/runs/bundle/"]
