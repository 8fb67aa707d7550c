"""Episode rules at the database level, through the CUBE endpoints with Django's test client:
fast enough for the mutation proof. Verdicts are scored in this process by the real pipeline
(no worker: final_step's wait is zero, so it answers "scoring" and the test scores).

The live-site suites (test_live_episodes.py, test_episode_attacks.py) drive the same rules
with the real client, web server and worker.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from episodes import services
from episodes.models import Episode, EpisodeRun, Step
from episodes.services import OraclePrivilege, episode_run_open, episodes_reap
from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import AuditAction, AuditEvent, ResultStatus, Run, TaskResult
from runs.pipeline import score_results
from runs.privileged import session_debug_mode
from runs.services import RunMetadata
from tests.conftest import EXAMPLES, make_user, mc_row

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_verdict_wait")]


@pytest.fixture
def no_verdict_wait():
    with override_settings(SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS=0):
        yield


def call(url: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": 7}
    if params is not None:
        body["params"] = params
    response = Client().post(url, json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    return response.json()


def result(answer: dict[str, Any]) -> Any:
    assert "result" in answer, answer
    return answer["result"]


def error_code(answer: dict[str, Any]) -> int:
    assert "error" in answer, answer
    return answer["error"]["code"]


def open_run(version: ContractVersion, **kwargs: Any) -> tuple[Run, str]:
    opened = episode_run_open(
        contract_version=version,
        metadata=RunMetadata(agent_name="lifecycle"),
        source="command",
        **kwargs,
    )
    return opened.run, services.benchmark_path(opened.secret)


def spawn(url: str, task_id: str) -> str:
    configs = result(call(url, "cube/task_configs", {"task_id": task_id}))
    answer = call(url, "cube/spawn", {"task_config": configs[0]})
    return result(answer).removeprefix("http://testserver")


def score_queued(run: Run) -> None:
    queued = list(
        TaskResult.objects.filter(evaluation__run=run, status=ResultStatus.QUEUED).values_list(
            "pk", flat=True
        )
    )
    if queued:
        score_results(queued, worker="lifecycle-test")


def budget_pack(make_pack, budgets: dict[str, Any]) -> ContractVersion:
    folder = make_pack(
        {"id": "budgeted", "version": 1, "contract": {"budgets": budgets}},
        [mc_row("q1", "B"), mc_row("q2", "C")],
    )
    return pack_import_folder(folder=folder).contract_version


@pytest.fixture
def mc_version() -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / "arithmetic-mc").contract_version


def test_the_evaluation_waits_for_shutdown_then_fails_the_tasks_never_attempted(mc_version):
    run, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.order_by("position").first().task_id)
    call(task, "cube/reset")
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})
    done = result(call(task, "cube/step", {"name": "final_step"}))
    assert done["done"] is True and done["info"]["status"] == "scoring"
    score_queued(run)
    evaluation = run.evaluations.get()
    evaluation.refresh_from_db()
    # Every result there is is final, but more episodes may come: not done.
    assert not evaluation.is_done
    assert result(call(task, "cube/evaluate"))["info"]["status"] in ("passed", "failed")

    assert result(call(url, "cube/shutdown")) is None

    evaluation.refresh_from_db()
    assert evaluation.is_done and evaluation.total == mc_version.task_count
    reasons = list(evaluation.results.values_list("failure_reason", flat=True))
    assert reasons.count("missing_candidate") == mc_version.task_count - 1
    assert error_code(call(url, "cube/info")) == -32001
    assert error_code(call(task, "cube/status")) == -32001


def test_the_step_that_crosses_the_step_budget_ends_the_episode_truncated(make_pack):
    version = budget_pack(make_pack, {"steps": 3})
    run, url = open_run(version)
    task = spawn(url, "q1")
    call(task, "cube/reset")  # step 1
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})

    crossing = result(
        call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "A"}})
    )

    assert crossing["done"] is True and crossing["truncated"] is True
    assert "budget of 3 steps" in crossing["info"]["note"]
    assert error_code(call(task, "cube/step", {"name": "final_step"})) == -32002
    score_queued(run)
    episode = Episode.objects.get(episode_run__run=run)
    # The answer as it stood (B, not the A of the step that was never run) was scored.
    assert episode.candidate_text == "B"
    call(url, "cube/shutdown")
    run.refresh_from_db()
    assert run.over_budget
    assert any("q1" in note and "3 steps" in note for note in run.budget_notes), run.budget_notes
    evaluation = run.evaluations.get()
    evaluation.refresh_from_db()
    assert evaluation.results.get(task__task_id="q1").status == ResultStatus.PASSED


def test_a_reset_past_the_step_budget_is_not_run_and_ends_the_episode(make_pack):
    version = budget_pack(make_pack, {"steps": 2})
    run, url = open_run(version)
    task = spawn(url, "q1")
    call(task, "cube/reset")  # step 1
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})

    crossing = call(task, "cube/reset")  # step 3: a fresh start past the budget

    assert error_code(crossing) == -32002
    assert "past the budget of 2 steps" in crossing["error"]["message"]
    assert error_code(call(task, "cube/reset")) == -32002  # ended: no more resets
    episode = Episode.objects.get(episode_run__run=run)
    assert (episode.ending, episode.step_count, episode.reset_count) == ("truncated", 3, 1)
    score_queued(run)
    episode.refresh_from_db()
    assert episode.candidate_text == "B"  # the answer as it stood was scored
    call(url, "cube/shutdown")
    run.refresh_from_db()
    assert run.over_budget


def test_a_step_after_the_wall_time_budget_is_not_run(make_pack):
    version = budget_pack(make_pack, {"wall_time_seconds": 60})
    run, url = open_run(version)
    task = spawn(url, "q1")
    call(task, "cube/reset")
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "C"}})
    # A minute and a half later (the clock of the episode, moved back).
    Episode.objects.filter(episode_run__run=run).update(
        first_reset_at=timezone.now() - timedelta(seconds=90)
    )

    late = result(call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}}))

    assert late["done"] and late["truncated"] and "budget of 60 s" in late["info"]["note"]
    episode = Episode.objects.get(episode_run__run=run)
    assert episode.candidate_text == "C" and episode.wall_seconds >= 90
    call(url, "cube/shutdown")
    run.refresh_from_db()
    assert run.over_budget


def test_attempts_allow_a_second_episode_whose_answer_becomes_the_runs_candidate(make_pack):
    version = budget_pack(make_pack, {"attempts": 2})
    run, url = open_run(version)
    first = spawn(url, "q1")
    call(first, "cube/reset")
    call(first, "cube/step", {"name": "submit_answer", "arguments": {"answer": "A"}})
    call(first, "cube/step", {"name": "final_step"})
    # Still being scored: no second attempt yet.
    configs = result(call(url, "cube/task_configs", {"task_id": "q1"}))
    assert error_code(call(url, "cube/spawn", {"task_config": configs[0]})) == -32005
    score_queued(run)

    second = spawn(url, "q1")
    call(second, "cube/reset")
    call(second, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})
    call(second, "cube/step", {"name": "final_step"})
    score_queued(run)

    assert error_code(call(url, "cube/spawn", {"task_config": configs[0]})) == -32002
    assert result(call(first, "cube/evaluate"))["info"]["status"] == "failed"
    assert result(call(second, "cube/evaluate"))["reward"] == 1.0
    call(url, "cube/shutdown")
    evaluation = run.evaluations.get()
    evaluation.refresh_from_db()
    assert evaluation.results.get(task__task_id="q1").status == ResultStatus.PASSED
    assert Episode.objects.filter(episode_run__run=run).count() == 2


def test_a_reset_restarts_the_attempt_and_drops_the_earlier_answer(mc_version):
    run, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.order_by("position").first().task_id)
    call(task, "cube/reset")
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})
    call(task, "cube/reset")
    call(task, "cube/step", {"name": "final_step"})
    episode = Episode.objects.get(episode_run__run=run)
    assert episode.reset_count == 2 and episode.step_count == 4
    assert episode.candidate_text == "" and episode.verdict_reason == "missing_candidate"


def test_a_recorded_answer_says_its_length_in_the_agents_words(mc_version):
    run, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.order_by("position").first().task_id)
    call(task, "cube/reset")

    one = call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})
    two = call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "BC"}})

    assert "Answer recorded (1 character): B" in json.dumps(one)
    assert "Answer recorded (2 characters): BC" in json.dumps(two)


def test_idle_episodes_are_abandoned_and_scored_as_they_stand(mc_version):
    run, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.order_by("position").first().task_id)
    call(task, "cube/reset")
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})
    Episode.objects.update(last_activity_at=timezone.now() - timedelta(minutes=16))

    report = episodes_reap()

    assert report.abandoned == 1
    episode = Episode.objects.get(episode_run__run=run)
    assert episode.ending == "abandoned" and episode.candidate_text == "B"
    assert error_code(call(task, "cube/step", {"name": "final_step"})) == -32002


def test_a_run_whose_url_expired_refuses_every_call_and_closes_itself(mc_version):
    run, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.order_by("position").first().task_id)
    call(task, "cube/reset")
    EpisodeRun.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    assert error_code(call(url, "cube/tasks")) == -32001
    assert error_code(call(task, "cube/step", {"name": "final_step"})) == -32001
    assert episodes_reap().runs_closed == 1

    evaluation = run.evaluations.get()
    evaluation.refresh_from_db()
    assert evaluation.is_done and evaluation.failed == mc_version.task_count
    assert Episode.objects.get(episode_run__run=run).ending == "abandoned"


def test_a_revoked_url_stops_at_once_and_the_open_episode_is_scored(mc_version):
    run, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.order_by("position").first().task_id)
    call(task, "cube/reset")

    services.episode_run_revoke(EpisodeRun.objects.get(run=run))

    assert error_code(call(url, "cube/info")) == -32001
    assert error_code(call(task, "cube/reset")) == -32001
    run.refresh_from_db()
    assert run.is_submitted
    assert Episode.objects.get(episode_run__run=run).ending == "abandoned"


def test_evaluate_before_final_step_is_refused(mc_version):
    _, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.first().task_id)
    call(task, "cube/reset")
    call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})

    answer = call(task, "cube/evaluate")

    assert error_code(answer) == -32003 and "final_step" in answer["error"]["message"]


def test_steps_over_the_runs_rate_are_refused_and_not_recorded(mc_version):
    run, url = open_run(mc_version)
    task = spawn(url, mc_version.tasks.first().task_id)
    with override_settings(SECUREBENCH_EPISODE_STEPS_PER_SECOND=4):
        answers = [call(task, "cube/reset")]
        answers += [
            call(task, "cube/step", {"name": "submit_answer", "arguments": {"answer": "B"}})
            for _ in range(6)
        ]
    throttled = [a for a in answers if "error" in a]
    assert throttled and {a["error"]["code"] for a in throttled} == {-32004}
    assert Step.objects.filter(run=run).count() == len(answers) - len(throttled) == 4


def test_privileged_info_answers_oracle_runs_only_while_their_privilege_lasts(mc_version):
    _, agent_url = open_run(mc_version)
    agent_task = spawn(agent_url, mc_version.tasks.first().task_id)
    call(agent_task, "cube/reset")
    assert error_code(call(agent_task, "cube/privileged_info")) == -32003

    until = timezone.now() + timedelta(minutes=5)
    oracle_run, oracle_url = open_run(
        mc_version, oracle=OraclePrivilege(until=until, reason="lifecycle test")
    )
    oracle_task = spawn(oracle_url, mc_version.tasks.first().task_id)
    reference = result(call(oracle_task, "cube/privileged_info"))
    assert reference["_type"] == "cube.core.TextContent" and reference["data"].startswith("Answer")

    EpisodeRun.objects.filter(run=oracle_run).update(privilege_until=timezone.now())
    assert error_code(call(oracle_task, "cube/privileged_info")) == -32003


def test_an_oracle_run_opened_in_debug_mode_loses_its_privilege_with_that_debug_mode(mc_version):
    reviewer = make_user("oracle-reviewer", "reviewer")
    browser = Client()
    browser.force_login(reviewer)
    assert browser.post("/debug-mode/", {"reason": "oracle check"}).status_code == 302
    session_key = browser.session.session_key
    mode = session_debug_mode(session_key, reviewer)
    _, url = open_run(  # as the version page's form opens it
        mc_version,
        user=reviewer,
        oracle=OraclePrivilege(until=mode.expires_at, reason=mode.reason, session_key=session_key),
    )
    task = spawn(url, mc_version.tasks.first().task_id)
    assert "result" in call(task, "cube/privileged_info")

    assert browser.post("/debug-mode/off/").status_code == 302

    assert error_code(call(task, "cube/privileged_info")) == -32003
    # A new debug mode of the same session, for another reason, does not revive the run.
    assert browser.post("/debug-mode/", {"reason": "something else"}).status_code == 302
    assert error_code(call(task, "cube/privileged_info")) == -32003
    reasons = AuditEvent.objects.filter(action=AuditAction.EPISODE_PRIVILEGED_INFO)
    assert list(reasons.values_list("reason", flat=True)) == ["oracle check"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{}", -32600),
        (b"[]", -32600),
        (b'"x"', -32600),
        (b"{not json", -32700),
        (b'{"jsonrpc": "2.0", "method": "cube/nope", "id": 1}', -32601),
        (b'{"jsonrpc": "2.0", "method": "cube/spawn", "id": 1}', -32602),
        (b'{"jsonrpc": "2.0", "method": "cube/tasks", "params": [1], "id": 1}', -32602),
        (b"[" * 100_000 + b"]" * 100_000, -32700),
    ],
)
def test_malformed_requests_get_json_rpc_errors_with_http_200(mc_version, body, code):
    _, url = open_run(mc_version)
    response = Client().post(url, body, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["error"]["code"] == code


def test_bodies_over_the_limit_and_other_verbs_get_invalid_request(mc_version):
    _, url = open_run(mc_version)
    with override_settings(SECUREBENCH_CUBE_MAX_BODY_BYTES=1000):
        big = Client().post(url, b'{"a": "' + b"x" * 2000 + b'"}', content_type="application/json")
    got = Client().get(url)
    for response in (big, got):
        assert response.status_code == 200 and response.json()["error"]["code"] == -32600
    assert "1,000 bytes" in big.json()["error"]["message"]
