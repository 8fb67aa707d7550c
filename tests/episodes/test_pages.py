"""Episode run pages as people use them: open a run from the version page (its URL shown
once), watch its episodes on the run page, revoke its URL, read a task's trajectory and
download its transcript; and as others probe them (another submitter, a reviewer without
debug mode, an oracle run's references).

Runs are opened and driven through the episodes services and lifecycle (the CUBE endpoints
have tests of their own); the pages are what is under test here. Verdicts are scored in
process by the pipeline's own scoring call, as a worker would score them.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from episodes import lifecycle, services
from episodes.capabilities import secret_digest
from episodes.models import Episode, EpisodeRun, EpisodeStatus
from packs.models import ContractVersion
from runs.models import AuditAction, AuditEvent, Run, RunMode, RunSource, TaskResult
from runs.pipeline import score_results
from runs.services import RunMetadata
from tests.conftest import make_user
from tests.runs.pages.support import import_version, make_run

# Once, on the embedded pass: the pages read what tests/episodes/test_lifecycle.py exercises
# on PostgreSQL as well; their rendering does not depend on the database.
pytestmark = [pytest.mark.django_db, pytest.mark.embedded_only]

SECRET_IN_PAGE = re.compile(r"/cube/runs/([A-Za-z0-9_-]{43})")
REASON = "checking the references of the live pack"
HX = {"HTTP_HX_REQUEST": "true"}


# --- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture(autouse=True)
def verdicts_are_not_awaited(settings):
    # final_step waits (bounded) for a worker's verdict; here no worker runs, the test scores.
    settings.SECUREBENCH_EPISODE_VERDICT_WAIT_SECONDS = 0


@pytest.fixture
def cv(make_pack) -> ContractVersion:
    """Three multiple-choice tasks, q1..q3, whose answer is B."""
    return import_version(make_pack, "live", tasks=3)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def debug_on(client: Client) -> None:
    response = client.post(reverse("runs:debug-mode"), {"reason": REASON, "next": "/packs/"})
    assert response.status_code == 302


def open_run(cv: ContractVersion, user, *, oracle: bool = False) -> services.OpenedEpisodeRun:
    privilege = (
        services.OraclePrivilege(until=timezone.now() + timedelta(hours=1), reason=REASON)
        if oracle
        else None
    )
    return services.episode_run_open(
        contract_version=cv,
        metadata=RunMetadata(agent_name="live-agent"),
        source=RunSource.FORM,
        user=user,
        oracle=privilege,
    )


def play(episode_run: EpisodeRun, task_id: str, answer: str = "B", *, final=True) -> Episode:
    """One episode as a client plays it: spawn, reset, submit an answer, final_step."""
    episode, _secret = services.episode_spawn(episode_run, {"metadata": {"id": task_id}})
    lifecycle.episode_reset(episode)
    lifecycle.episode_step(
        episode,
        method="cube/step",
        name="submit_answer",
        arguments={"answer": answer},
        action_id="call-1",
    )
    if final:
        lifecycle.episode_step(
            episode, method="cube/step", name="final_step", arguments={}, action_id=None
        )
    return Episode.objects.get(pk=episode.pk)


def score_queued(run: Run) -> None:
    queued = TaskResult.objects.filter(evaluation__run=run, status="queued")
    score_results(list(queued.values_list("pk", flat=True)), worker="page-tests")


def result_of(run: Run, task_id: str) -> TaskResult:
    return TaskResult.objects.get(evaluation__run=run, task__task_id=task_id)


def rpc(client: Client, url: str, method: str) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method})
    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 200
    return response.json()


def trajectory_url(run: Run, result: TaskResult) -> str:
    return reverse("episodes:trajectory", args=[run.pk, result.pk])


def transcript_url(run: Run, result: TaskResult) -> str:
    return reverse("episodes:transcript", args=[run.pk, result.pk])


def episodes_url(run: Run) -> str:
    return reverse("episodes:run-episodes", args=[run.pk])


# --- opening a run from the version page -------------------------------------------------------


def test_the_version_page_form_opens_a_run_and_shows_its_url_once(cv):
    submitter = make_user("sam", "submitter")
    client = signed_in(submitter)
    version_page = client.get(reverse("packs:version", args=["live", 1])).content.decode()
    assert "Run an agent live (CUBE)" in version_page
    assert 'name="oracle"' not in version_page  # no privilege on the pack: no oracle box

    response = client.post(
        reverse("episodes:open", args=["live", 1]),
        {"agent_name": "my  agent", "agent_version": "0.3", "model_name": "m-7"},
    )

    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    body = response.content.decode()
    secrets_shown = set(SECRET_IN_PAGE.findall(body))
    assert len(secrets_shown) == 1
    secret = secrets_shown.pop()
    run = Run.objects.get(agent_name="my agent")
    assert (run.mode, run.source, run.origin) == (RunMode.EPISODES, RunSource.FORM, "agent")
    assert (run.agent_version, run.model_name, run.submitted_by) == ("0.3", "m-7", submitter)
    assert run.episode_run.capability_hash == secret_digest(secret)
    assert "shown only now" in body
    assert f'BenchmarkClient("http://testserver/cube/runs/{secret}")' in body  # the snippet
    assert reverse("runs:detail", args=[run.pk]) in body
    # The URL works, and the pages shown afterwards never hold it again.
    info = rpc(Client(), f"/cube/runs/{secret}", "cube/info")
    assert info["result"]["num_tasks"] == 3
    for url in (reverse("runs:detail", args=[run.pk]), episodes_url(run)):
        later = client.get(url)
        assert later.status_code == 200
        assert secret not in later.content.decode()
    assert secret not in client.get(reverse("packs:version", args=["live", 1])).content.decode()


def test_a_viewer_is_offered_no_live_run_and_cannot_open_one(cv):
    client = signed_in(make_user("vic", "viewer"))

    version_page = client.get(reverse("packs:version", args=["live", 1])).content.decode()
    refused = client.post(reverse("episodes:open", args=["live", 1]), {"agent_name": "x"})

    assert "Run an agent live" not in version_page
    assert refused.status_code == 403
    assert not Run.objects.exists()


def test_the_form_keeps_what_the_user_typed_when_the_agent_name_is_missing(cv):
    client = signed_in(make_user("sam", "submitter"))

    response = client.post(
        reverse("episodes:open", args=["live", 1]), {"agent_name": "  ", "model_name": "m-9"}
    )

    assert response.status_code == 400
    body = response.content.decode()
    assert "Nothing was opened" in body and 'value="m-9"' in body
    assert not SECRET_IN_PAGE.search(body)
    assert not Run.objects.exists()


def test_an_oracle_run_is_refused_without_debug_mode_and_opened_with_it(cv):
    admin = make_user("ada", "admin")
    client = signed_in(admin)
    open_url = reverse("episodes:open", args=["live", 1])
    version_page = client.get(reverse("packs:version", args=["live", 1])).content.decode()
    assert re.search(
        r'<input type="checkbox" id="live_oracle" name="oracle" value="on" disabled', version_page
    )

    refused = client.post(open_url, {"agent_name": "oracle", "oracle": "on"})

    assert refused.status_code == 403
    assert "Switch debug mode on" in refused.content.decode()
    assert not SECRET_IN_PAGE.search(refused.content.decode())
    assert not Run.objects.exists()

    debug_on(client)
    opened = client.post(open_url, {"agent_name": "oracle", "oracle": "on"})

    assert opened.status_code == 201
    run = Run.objects.get()
    assert run.origin == "oracle"
    episode_run = run.episode_run
    assert episode_run.privilege_session_key == client.session.session_key
    assert episode_run.privilege_reason == REASON
    assert episode_run.privilege_until is not None
    assert AuditEvent.objects.filter(
        action=AuditAction.ORACLE_EPISODE_RUN, object_id=str(run.pk), reason=REASON
    ).exists()


def test_a_submitter_without_privilege_cannot_open_an_oracle_run(cv):
    client = signed_in(make_user("sam", "submitter"))

    refused = client.post(
        reverse("episodes:open", args=["live", 1]), {"agent_name": "sneaky", "oracle": "on"}
    )

    assert refused.status_code == 403
    assert "reviewers and maintainers" in refused.content.decode()
    assert not Run.objects.exists()


# --- the run page: episodes, polling, the URL's state and revocation --------------------------


def test_the_run_page_loads_the_episodes_and_says_what_to_do_before_the_first(cv):
    owner = make_user("sam", "submitter")
    run = open_run(cv, owner).run
    client = signed_in(owner)

    run_page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    partial = client.get(episodes_url(run), **HX)

    # The run page holds the episodes in its own answer, and refreshes them with its state.
    assert "No episode yet: point a CUBE client at the URL you were given" in run_page
    run_url = reverse("runs:detail", args=[run.pk])
    assert f'<div id="evaluation-view" hx-get="{run_url}" hx-trigger="every 2s"' in run_page
    assert partial.status_code == 200
    body = partial.content.decode()
    assert "No episode yet: point a CUBE client at the URL you were given" in body
    assert 'hx-trigger="every 2s"' in body
    assert "URL active" in body and "Revoke URL" in body
    # Opened on the version page, not the submit page: the run says where it came from.
    assert "via the version page&#x27;s episode form" in run_page


def test_the_episodes_table_polls_while_episodes_are_scored_and_stops_when_done(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    run, episode_run = opened.run, opened.episode_run
    client = signed_in(owner)
    play(episode_run, "q1", "B")
    play(episode_run, "q2", "C")

    while_scoring = client.get(episodes_url(run), **HX)
    services.episode_run_shutdown(episode_run.pk)  # the client's cube/shutdown
    closed_but_scoring = client.get(episodes_url(run), **HX)
    score_queued(run)
    done = client.get(episodes_url(run), **HX)

    assert while_scoring.status_code == 200
    assert "◷ scoring" in while_scoring.content.decode()
    assert 'hx-trigger="every 2s"' in while_scoring.content.decode()
    # Closed, but verdicts still on their way: keep polling.
    assert closed_but_scoring.status_code == 200
    assert 'hx-trigger="every 2s"' in closed_but_scoring.content.decode()
    # Every verdict landed and the run is closed: htmx stops on 286, and the last fragment
    # swapped in has no trigger left.
    assert done.status_code == 286
    body = done.content.decode()
    assert "every 2s" not in body
    rows = re.findall(r"<tr>\s*<td>.*?</tr>", body, re.DOTALL)
    assert len(rows) == 2
    q1 = result_of(run, "q1")
    assert f'href="{reverse("runs:result", args=[run.pk, q1.pk])}"' in rows[0]
    # The episode's lifecycle and its verdict are two things, and only the verdict is a pass.
    assert "■ done" in rows[0] and "✓ passed" in rows[0] and "1.00" in rows[0]
    assert "■ done" in rows[1] and not any("✓ done" in row for row in rows)
    assert "✗ failed" in rows[1] and "wrong_answer" in rows[1] and "0.00" in rows[1]
    assert "URL closed" in body and "Revoke URL" not in body
    # q3 was never attempted: its result is the missing candidate, not an episode.
    assert result_of(run, "q3").failure_reason == "missing_candidate"


def test_the_episodes_table_is_paginated(cv, monkeypatch):
    monkeypatch.setattr("episodes.views.EPISODES_PER_PAGE", 2)
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    for task_id in ("q1", "q2", "q3"):
        play(opened.episode_run, task_id, final=False)
    client = signed_in(owner)

    first = client.get(episodes_url(opened.run), **HX).content.decode()
    second = client.get(episodes_url(opened.run), {"episodes_page": 2}, **HX).content.decode()

    assert "1–2 of 3" in first and 'href="?episodes_page=2"' in first
    # Whole words: a CSRF token may hold "q1" by chance.
    assert "3–3 of 3" in second and re.search(r"\bq3\b", second)
    assert not re.search(r"\bq1\b", second)
    # The second page polls itself, not the first.
    assert f'hx-get="{episodes_url(opened.run)}?episodes_page=2" hx-trigger="every 2s"' in second


def test_the_owner_revokes_the_url_and_it_answers_not_valid(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    run = opened.run
    benchmark = services.benchmark_path(opened.secret)
    play(opened.episode_run, "q1", final=False)
    client = signed_in(owner)
    assert "result" in rpc(Client(), benchmark, "cube/info")

    response = client.post(reverse("episodes:revoke", args=[run.pk]))

    assert response.status_code == 302
    assert response["Location"] == reverse("runs:detail", args=[run.pk])
    answer = rpc(Client(), benchmark, "cube/info")
    assert answer["error"]["code"] == -32001
    episode_run = EpisodeRun.objects.get(pk=opened.episode_run.pk)
    assert episode_run.revoked_at is not None and episode_run.closed_at is not None
    assert Episode.objects.get().status in (EpisodeStatus.SCORING, EpisodeStatus.ABANDONED)
    run.refresh_from_db()
    assert run.is_submitted  # closed: the evaluation can finish
    page = client.get(reverse("runs:detail", args=[run.pk]), follow=True).content.decode()
    assert "is revoked" in page
    assert "URL revoked" in client.get(episodes_url(run), **HX).content.decode()


def test_another_submitter_or_a_reviewer_may_not_revoke(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    services.episode_run_shutdown(opened.episode_run.pk)  # submitted: others see the run
    other = signed_in(make_user("eve", "submitter"))
    reviewer = signed_in(make_user("rex", "reviewer"))

    assert other.post(reverse("episodes:revoke", args=[opened.run.pk])).status_code == 403
    assert reviewer.post(reverse("episodes:revoke", args=[opened.run.pk])).status_code == 403
    assert EpisodeRun.objects.get().revoked_at is None
    # Others see the episodes but not the URL's state.
    body = other.get(episodes_url(opened.run), **HX).content.decode()
    assert "URL closed" not in body and "Revoke" not in body


def test_a_superuser_stops_another_users_live_run(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    benchmark = services.benchmark_path(opened.secret)
    admin = signed_in(make_user("root", superuser=True))
    body = admin.get(episodes_url(opened.run), **HX).content.decode()
    assert "URL active" in body and "Only its owner was shown it" in body

    response = admin.post(reverse("episodes:revoke", args=[opened.run.pk]))

    assert response.status_code == 302
    assert rpc(Client(), benchmark, "cube/info")["error"]["code"] == -32001
    assert EpisodeRun.objects.get().revoked_at is not None


def test_a_deactivated_owners_url_answers_nothing(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    benchmark = services.benchmark_path(opened.secret)
    _, task_secret = services.episode_spawn(opened.episode_run, {"metadata": {"id": "q1"}})
    task_url = services.episode_path(task_secret)
    assert "result" in rpc(Client(), task_url, "cube/status")

    owner.is_active = False
    owner.save(update_fields=["is_active"])

    assert rpc(Client(), benchmark, "cube/info")["error"]["code"] == -32001
    assert rpc(Client(), task_url, "cube/status")["error"]["code"] == -32001


def test_the_episodes_of_a_draft_run_are_not_found_for_others(cv):
    opened = open_run(cv, make_user("sam", "submitter"))
    play(opened.episode_run, "q1", final=False)
    other = signed_in(make_user("eve", "submitter"))

    assert other.get(episodes_url(opened.run), **HX).status_code == 404
    assert other.post(reverse("episodes:revoke", args=[opened.run.pk])).status_code == 404


def test_a_bundle_run_has_no_episodes_partial(cv):
    owner = make_user("sam", "submitter")
    run = make_run(cv, submitted_by=owner)

    assert signed_in(owner).get(episodes_url(run), **HX).status_code == 404
    page = signed_in(owner).get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "/episodes/" not in page


# --- trajectories and transcripts -------------------------------------------------------------


def test_the_owner_reads_the_trajectory_on_the_result_page(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    play(opened.episode_run, "q1", "B")
    run, result = opened.run, result_of(opened.run, "q1")
    client = signed_in(owner)

    result_page = client.get(reverse("runs:result", args=[run.pk, result.pk])).content.decode()
    partial = client.get(trajectory_url(run, result), **HX)
    full_page = client.get(trajectory_url(run, result))

    assert f'hx-get="{trajectory_url(run, result)}" hx-trigger="load"' in result_page
    assert partial.status_code == 200 and full_page.status_code == 200
    body = partial.content.decode()
    titles = re.findall(r'<span class="step-title mono">([^<]*)</span>', body)
    assert titles == ["reset", "submit_answer", "final_step"]
    assert "Question q1?" in body  # the objective the agent was shown
    assert "&quot;answer&quot;: &quot;B&quot;" in body  # the arguments, pretty JSON
    assert "Answer recorded" in body  # the observation of the submission
    assert transcript_url(run, result) in body
    assert "Attempt 1" in body
    assert not AuditEvent.objects.filter(action=AuditAction.VIEW_CANDIDATE).exists()


def test_long_outputs_are_collapsed(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    long_answer = "x" * 3000
    play(opened.episode_run, "q1", long_answer)
    result = result_of(opened.run, "q1")

    body = signed_in(owner).get(trajectory_url(opened.run, result), **HX).content.decode()

    assert "<details><summary>Show all arguments (3,0" in body
    assert body.count(long_answer) == 1  # in full once, behind "show all"


def test_another_submitter_gets_404_for_trajectory_and_transcript(cv):
    opened = open_run(cv, make_user("sam", "submitter"))
    play(opened.episode_run, "q1", "B")
    services.episode_run_shutdown(opened.episode_run.pk)  # submitted: the run is public now
    run, result = opened.run, result_of(opened.run, "q1")
    other = signed_in(make_user("eve", "submitter"))

    result_page = other.get(reverse("runs:result", args=[run.pk, result.pk]))

    assert result_page.status_code == 200
    assert trajectory_url(run, result) not in result_page.content.decode()
    assert "visible to the run's submitter only" in result_page.content.decode()
    assert other.get(trajectory_url(run, result), **HX).status_code == 404
    assert other.get(trajectory_url(run, result)).status_code == 404
    assert other.get(transcript_url(run, result)).status_code == 404


def test_a_reviewer_reads_another_users_trajectory_in_debug_mode_only_and_audited(cv):
    opened = open_run(cv, make_user("sam", "submitter"))
    play(opened.episode_run, "q1", "B")
    services.episode_run_shutdown(opened.episode_run.pk)
    run, result = opened.run, result_of(opened.run, "q1")
    reviewer = signed_in(make_user("rex", "reviewer"))

    without = reviewer.get(trajectory_url(run, result), **HX)
    debug_on(reviewer)
    page = reviewer.get(reverse("runs:result", args=[run.pk, result.pk])).content.decode()
    with_debug = reviewer.get(trajectory_url(run, result), **HX)

    assert without.status_code == 403
    assert 'hx-target="#trajectory-slot"' in page  # offered as a button, not loaded
    assert with_debug.status_code == 200 and "submit_answer" in with_debug.content.decode()
    event = AuditEvent.objects.get(action=AuditAction.VIEW_CANDIDATE)
    assert (event.object_type, event.object_id) == ("result", str(result.pk))
    assert (event.task_id, event.reason) == ("q1", REASON)
    assert event.resource == f"run {run.pk} · trajectory"


def test_an_oracle_trajectory_needs_debug_mode_even_for_its_owner_and_is_audited(cv):
    admin = make_user("ada", "admin")
    opened = open_run(cv, admin, oracle=True)
    play(opened.episode_run, "q1", "B")
    services.episode_run_shutdown(opened.episode_run.pk)
    run, result = opened.run, result_of(opened.run, "q1")
    owner = signed_in(admin)
    submitter = signed_in(make_user("sam", "submitter"))

    assert submitter.get(trajectory_url(run, result), **HX).status_code == 404
    assert submitter.get(transcript_url(run, result)).status_code == 404
    assert owner.get(trajectory_url(run, result), **HX).status_code == 403
    assert owner.get(transcript_url(run, result)).status_code == 403
    assert not AuditEvent.objects.filter(action=AuditAction.VIEW_CANDIDATE).exists()
    debug_on(owner)
    trajectory = owner.get(trajectory_url(run, result), **HX)
    transcript = owner.get(transcript_url(run, result))

    assert trajectory.status_code == 200 and "submit_answer" in trajectory.content.decode()
    assert transcript.status_code == 200
    resources = sorted(
        AuditEvent.objects.filter(action=AuditAction.VIEW_CANDIDATE).values_list(
            "resource", flat=True
        )
    )
    assert resources == [f"run {run.pk} · trajectory", f"run {run.pk} · transcript"]


def test_the_transcript_is_one_json_line_per_step(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    episode = play(opened.episode_run, "q1", "B")
    run, result = opened.run, result_of(opened.run, "q1")

    response = signed_in(owner).get(transcript_url(run, result))

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/jsonl")
    assert response["Content-Disposition"] == (
        f'attachment; filename="run-{run.pk}-q1-transcript.jsonl"'
    )
    lines = [json.loads(line) for line in response.content.decode().splitlines()]
    assert [line["index"] for line in lines] == [1, 2, 3]
    assert [line["method"] for line in lines] == ["cube/reset", "cube/step", "cube/step"]
    assert [line["action"] for line in lines] == ["", "submit_answer", "final_step"]
    keys = {
        "episode", "index", "method", "action", "action_id", "arguments", "observation",
        "error_type", "reward", "done", "truncated", "created_at", "finished_at", "duration_ms",
    }  # fmt: skip
    assert all(keys <= set(line) for line in lines)
    assert {line["episode"] for line in lines} == {episode.pk}
    assert lines[1]["arguments"] == {"answer": "B"} and lines[1]["action_id"] == "call-1"
    assert lines[0]["observation"]["contents"][0]["name"] == "objective"
    assert lines[2]["done"] is True and lines[2]["truncated"] is False


def test_step_content_is_escaped(cv):
    owner = make_user("sam", "submitter")
    opened = open_run(cv, owner)
    attack = '<script>alert("owned")</script><img src=x onerror=alert(1)>'
    play(opened.episode_run, "q1", attack)
    result = result_of(opened.run, "q1")
    client = signed_in(owner)

    partial = client.get(trajectory_url(opened.run, result), **HX).content.decode()
    full = client.get(trajectory_url(opened.run, result)).content.decode()

    for body in (partial, full):
        assert "<script>alert" not in body and "<img src=x" not in body
        assert "&lt;script&gt;alert(" in body
