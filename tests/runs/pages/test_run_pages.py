"""Runs list, submit form, run and result pages, read as a user reads them."""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import urljoin

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.models import (
    Candidate,
    CandidateOrigin,
    Evaluation,
    Run,
    RunSource,
    TaskResult,
    WorkQueue,
)
from runs.stats import wilson_interval

# Fixtures (imported so pytest finds them here): a version with five tasks, a viewer, and a
# client signed in as that viewer.
from tests.runs.pages.support import (  # noqa: F401
    ERROR,
    FAILED,
    MARK,
    PASSED,
    PENDING,
    QUEUED,
    RUNNING,
    import_version,
    make_evaluation,
    make_run,
    page,
    run_url,
    user_with,
)

pytestmark = pytest.mark.django_db


# --- runs list -------------------------------------------------------------------------------


def test_the_runs_list_says_how_to_submit_when_there_are_no_runs(client):
    body = page(client, reverse("runs:list"))

    assert "No runs yet — submit one with the" in body
    assert "manage.py submit_run" in body


def test_the_runs_list_shows_each_runs_latest_evaluation_and_budget(client, cv):
    run = make_run(cv, "solver", agent_version="2.1", model_name="gpt-x", over_budget=True)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    make_evaluation(run, [PASSED, PASSED, FAILED, FAILED, PENDING], number=2)

    body = page(client, reverse("runs:list"))

    assert f"#{run.pk}" in body and "solver" in body and "2.1" in body and "gpt-x" in body
    assert "demo v1" in body
    interval = wilson_interval(2, 5)  # evaluation 2: 2 of 5, with both ends of its interval
    assert f"0.40 [{interval.low:.2f}, {interval.high:.2f}]" in body
    # The pending result (a family with no verifier) is counted apart, not as a failure.
    assert "2 / 4" in body and "· 1 no verifier" in body
    assert "⚠ over budget" in body


def test_runs_can_be_filtered_by_pack_version_agent_and_status(client, make_pack, cv):
    other = import_version(make_pack, "other", tasks=2)
    other_v2 = import_version(make_pack, "other", tasks=2, version=2)
    alpha = make_run(cv, "alpha")
    make_evaluation(alpha, [PASSED, PASSED, PASSED, PASSED, PENDING])
    beta = make_run(other, "beta")
    make_evaluation(beta, [RUNNING, QUEUED])
    gamma = make_run(other_v2, "gamma")

    def agents(**params) -> set[str]:
        body = page(client, reverse("runs:list"), **params)
        return {name for name in ("alpha", "beta", "gamma") if f">{name}</a>" in body}

    assert agents() == {"alpha", "beta", "gamma"}
    assert agents(pack="other") == {"beta", "gamma"}
    assert agents(pack="other", version=2) == {"gamma"}
    assert agents(agent="alp") == {"alpha"}
    assert agents(status="running") == {"beta"}
    assert agents(status="done") == {"alpha"}
    assert "No run matches these filters." in page(client, reverse("runs:list"), agent="zzz")
    assert gamma.pk  # gamma has no evaluation: it matches no status filter
    assert agents(status="queued") == set()


def test_the_runs_list_pages_by_fifty_with_totals(client, cv):
    Run.objects.bulk_create(
        Run(
            contract_version=cv,
            agent_name=f"bot{i}",
            source=RunSource.API,
            submitted_at=timezone.now(),
        )
        for i in range(55)
    )

    first = page(client, reverse("runs:list"))
    second = page(client, reverse("runs:list"), page=2)

    assert "1–50 of 55" in first
    assert "51–55 of 55" in second


def test_the_next_link_a_reader_clicks_opens_the_next_page(client, cv):
    # The link as printed, followed as a browser resolves it against the page's URL: Django's
    # querystring tag writes its own "?", so a template's "?" before it made "??page=2", which
    # a browser reads as the parameter "?agent": the next page lost the reader's filter.
    Run.objects.bulk_create(
        Run(
            contract_version=cv,
            agent_name=name,
            source=RunSource.API,
            submitted_at=timezone.now(),
        )
        for name in [f"bot{i}" for i in range(55)] + [f"other{i}" for i in range(10)]
    )
    list_url = reverse("runs:list")
    first = client.get(list_url, {"agent": "bot"}).content.decode()

    href = html.unescape(re.search(r'href="([^"]*)"[^>]*>Next ›', first).group(1))
    second = client.get(urljoin(f"http://testserver{list_url}?agent=bot", href))

    assert "51–55 of 55" in second.content.decode()


def test_an_htmx_filter_request_gets_only_the_table(client, cv):
    make_run(cv, "alpha")

    response = client.get(reverse("runs:list"), {"agent": "alp"}, HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert body.lstrip().startswith('<div id="run-table"')
    assert "<html" not in body and "alpha" in body
    assert "HX-Request" in response["Vary"]


# --- submit ----------------------------------------------------------------------------------


@pytest.fixture
def submitter(client) -> User:
    user = user_with("submitter", "add_run")
    client.force_login(user)
    return user


def bundle(*lines: dict, name: str = "candidates.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, "".join(json.dumps(line) + "\n" for line in lines).encode())


def answer(task_id: str, text: str) -> dict:
    return {"task_id": task_id, "candidate": {"kind": "text", "text": f"Answer: {text}"}}


def test_anonymous_visitors_are_sent_to_sign_in_before_submitting():
    response = Client().get(reverse("runs:submit"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_user_without_the_permission_cannot_submit(client):
    client.force_login(user_with("viewer"))

    assert client.get(reverse("runs:submit")).status_code == 403


def test_the_form_can_be_prefilled_with_a_pack_version(client, submitter, cv):
    body = page(client, reverse("runs:submit"), pack="demo", version=1)

    assert f'<option value="{cv.pk}" selected>demo v1</option>' in body
    assert "Up to 64.0" in body  # the bundle size limit is stated


def test_submitting_a_bundle_stores_the_run_and_queues_its_evaluation(client, submitter, cv):
    response = client.post(
        reverse("runs:submit"),
        {
            "contract_version": cv.pk,
            "agent_name": "form-agent",
            "agent_version": "0.3",
            "model_name": "tiny",
            "bundle": bundle(answer("q1", "B"), answer("q2", "A")),
        },
    )

    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == run_url(run)
    assert (run.agent_name, run.agent_version, run.model_name) == ("form-agent", "0.3", "tiny")
    assert run.source == RunSource.FORM and run.submitted_by == submitter
    assert run.evaluations.get().number == 1
    body = page(client, response["Location"])
    assert f"Run {run.pk} stored with 2 candidates; evaluation 1 scores them." in body


def test_the_agent_name_can_come_from_the_bundles_run_line(client, submitter, cv):
    response = client.post(
        reverse("runs:submit"),
        {
            "contract_version": cv.pk,
            "bundle": bundle({"run": {"agent_name": "from-bundle"}}, answer("q1", "B")),
        },
    )

    assert response.status_code == 302
    assert Run.objects.get().agent_name == "from-bundle"


def test_a_bundle_without_any_agent_name_is_refused_at_the_field(client, submitter, cv):
    response = client.post(
        reverse("runs:submit"),
        {"contract_version": cv.pk, "bundle": bundle(answer("q1", "B"))},
    )

    assert response.status_code == 400
    assert "Give the agent&#x27;s name, here or as agent_name in the bundle." in (
        response.content.decode()
    )
    assert not Run.objects.exists()


def test_bundle_problems_name_file_line_and_field_and_keep_the_choices(client, submitter, cv):
    response = client.post(
        reverse("runs:submit"),
        {
            "contract_version": cv.pk,
            "agent_name": "kept-agent",
            "model_name": "kept-model",
            "bundle": bundle(answer("q1", "B"), {"task_id": "q2", "candidate": {"kind": "x"}}),
        },
    )

    body = response.content.decode()
    assert response.status_code == 400
    assert "The run was not stored." in body
    assert (
        'candidates.jsonl</span> line 2, field <span class="mono">candidate.kind</span>: '
        "must be one of text, code, patch, workspace" in body
    )
    assert 'value="kept-agent"' in body and 'value="kept-model"' in body
    assert f'<option value="{cv.pk}" selected>' in body
    assert not Run.objects.exists()


def test_unknown_task_ids_are_refused_with_their_line(client, submitter, cv):
    response = client.post(
        reverse("runs:submit"),
        {
            "contract_version": cv.pk,
            "agent_name": "a",
            "bundle": bundle(answer("q1", "B"), answer("nope", "B")),
        },
    )

    body = response.content.decode()
    assert response.status_code == 400
    assert "line 2" in body and "nope" in body
    assert not Run.objects.exists()


def test_a_file_that_is_not_a_bundle_is_refused_by_its_name(client, submitter, cv):
    response = client.post(
        reverse("runs:submit"),
        {
            "contract_version": cv.pk,
            "agent_name": "a",
            "bundle": SimpleUploadedFile("notes.txt", b"hello"),
        },
    )

    assert response.status_code == 400
    assert "Upload a .jsonl, .zip or .tar.gz bundle." in response.content.decode()


def test_a_bundle_over_the_size_limit_is_refused(client, submitter, cv, settings):
    settings.SECUREBENCH_MAX_BUNDLE_BYTES = 100

    response = client.post(
        reverse("runs:submit"),
        {
            "contract_version": cv.pk,
            "agent_name": "a",
            "bundle": bundle(*(answer(f"q{i}", "B" * 20) for i in range(1, 5))),
        },
    )

    assert response.status_code == 413
    assert "The bundle is larger than the 100\xa0bytes limit." in response.content.decode()
    assert not Run.objects.exists()


def test_an_htmx_submit_redirects_the_browser_to_the_run(client, submitter, cv):
    response = client.post(
        reverse("runs:submit"),
        {"contract_version": cv.pk, "agent_name": "a", "bundle": bundle(answer("q1", "B"))},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    assert response["HX-Redirect"] == run_url(Run.objects.get())


# --- run page --------------------------------------------------------------------------------


def test_the_run_page_shows_facts_score_and_family_chart(client, cv):
    run = make_run(
        cv,
        "solver",
        model_name="m-1",
        usage={"wall_seconds": 12.5, "input_tokens": 1200, "total_usd": 0.5},
    )
    make_evaluation(run, [PASSED, PASSED, FAILED, ERROR, PENDING], score=0.62, ci_low=0.55)
    Evaluation.objects.filter(run=run).update(ci_high=0.69)

    body = page(client, run_url(run))

    assert f"Run #{run.pk} — solver" in body
    assert "demo v1" in body and "m-1" in body
    assert "0.62 [0.55, 0.69]" in body  # the score, then its interval's low and high ends
    assert "12.5 s" in body and "1,200" in body and "$0.50" in body
    assert '<svg class="family-chart"' in body
    assert ">multiple_choice</text>" in body and "50 % · 2/4" in body
    # The same rates again for phones, names above the bars (site.css shows one of the two).
    assert '<svg class="family-chart-narrow"' in body and body.count("50 % · 2/4") == 2
    assert ">tool_call</text>" in body
    assert ' style="' not in body  # the CSP allows no inline styles


def test_an_over_budget_run_says_why_and_that_it_is_not_ranked(client, cv):
    run = make_run(
        cv, over_budget=True, budget_notes=["task q1 used 500 tokens, over the budget of 100"]
    )

    body = page(client, run_url(run))

    assert "Over budget." in body
    assert "scored, but it is not eligible for the leaderboard" in body
    assert "task q1 used 500 tokens, over the budget of 100" in body


def test_the_evaluation_selector_lists_every_evaluation_and_defaults_to_the_latest(client, cv):
    run = make_run(cv)
    make_evaluation(run, [FAILED, FAILED, FAILED, FAILED, PENDING])
    make_evaluation(run, [RUNNING, QUEUED, QUEUED, QUEUED, PENDING], number=2)

    latest = page(client, run_url(run))
    first = page(client, run_url(run), evaluation=1)

    assert "Evaluation 2 <span" in latest and 'href="?evaluation=1"' in latest
    assert "Evaluation 1 <span" in first
    assert client.get(run_url(run), {"evaluation": 9}).status_code == 404
    assert client.get(reverse("runs:detail", args=[run.pk + 100])).status_code == 404


def test_a_running_evaluation_polls_and_says_why_it_waits(client, cv, settings):
    settings.SECUREBENCH_MAX_ATTEMPTS = 3
    run = make_run(cv)
    evaluation = make_evaluation(
        run, [PASSED, RUNNING, QUEUED, QUEUED, PENDING], queue=WorkQueue.SANDBOX
    )
    evaluation.results.filter(status=RUNNING).update(attempts=2)

    body = page(client, run_url(run))

    # The whole live section refreshes itself (header, card, table and results together).
    assert f'<div id="evaluation-view" hx-get="{run_url(run)}" hx-trigger="every 2s"' in body
    assert "2 tasks waiting for a sandbox worker" in body
    assert "1 task being verified now" in body
    assert "1 retrying after a worker restart, attempt 2 of 3" in body
    assert "2 of 5 tasks finished (40 %)" in body
    # Only finished verdicts are drawn: open work (running, queued) has no segment.
    assert 'class="seg seg-passed"' in body and 'class="seg seg-pending"' in body
    assert "seg-running" not in body and "seg-queued" not in body


def test_a_queued_evaluation_shows_its_position_in_the_queue(client, cv):
    earlier = make_evaluation(make_run(cv, "first"), [QUEUED, QUEUED, QUEUED, RUNNING, PENDING])
    later = make_run(cv, "second")
    make_evaluation(later, [QUEUED, QUEUED, PASSED, PASSED, PENDING])

    body = page(client, run_url(later))

    assert earlier.pk < later.evaluations.get().pk
    assert "2 text tasks queued" in body
    assert "Position in queue: 4 tasks of earlier evaluations ahead on the text queue." in body


def test_the_progress_fragment_answers_286_once_the_evaluation_is_done(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    make_evaluation(run, [PASSED, RUNNING, QUEUED, FAILED, PENDING], number=2)

    done = client.get(reverse("runs:progress", args=[run.pk, 1]), HTTP_HX_REQUEST="true")
    running = client.get(reverse("runs:progress", args=[run.pk, 2]), HTTP_HX_REQUEST="true")

    body = done.content.decode()
    assert done.status_code == 286
    assert "HX-Refresh" not in done  # finished in place: no reload of the whole page
    assert "every 2s" not in body
    assert "Scoring is finished." in body and "(100 %)" in body
    assert running.status_code == 200
    assert "3 of 5 tasks finished (60 %)" in running.content.decode()
    assert client.get(reverse("runs:progress", args=[run.pk, 7])).status_code == 404


def test_the_last_progress_fragment_loads_the_finished_evaluation_in_place(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    url = f"{run_url(run)}?evaluation=1"

    done = client.get(reverse("runs:progress", args=[run.pk, 1]), HTTP_HX_REQUEST="true")
    section = client.get(
        run_url(run), {"evaluation": 1}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="evaluation-view"
    )

    # One link: without JavaScript it is followed by hand, with htmx it loads at once.
    link = (
        f'<a href="{url}"\n     hx-get="{url}" hx-trigger="load"\n'
        '     hx-select="#evaluation-view" hx-target="#evaluation-view" hx-swap="outerHTML">'
        "Show the results</a>"
    )
    assert link in done.content.decode()
    # The section it loads: the evaluations table, score, chart and results, not the page.
    text = section.content.decode()
    assert section.status_code == 200
    assert text.lstrip().startswith('<div id="evaluation-view">')
    assert "<html" not in text and "<h1>" not in text
    assert "1 / 4" in text and "Pass rate per family" in text
    assert text.count(f'href="{run_url(run)}results/') == 5
    assert "every 2s" not in text and 'hx-trigger="load"' not in text  # nothing polls now
    assert {"HX-Request", "HX-Target"} <= {v.strip() for v in section["Vary"].split(",")}


def test_results_can_be_filtered_by_status_family_and_reason(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, ERROR, PENDING])

    def tasks(**params) -> list[str]:
        body = page(client, run_url(run), **params)
        return [t for t in ("q1", "q2", "q3", "q4", "t1") if f">{t}</a></td>" in body]

    assert tasks() == ["q1", "q2", "q3", "q4", "t1"]
    assert tasks(status="failed") == ["q2", "q3"]
    assert tasks(family="tool_call") == ["t1"]
    assert tasks(reason="wrong_answer") == ["q2", "q3"]
    assert "No result matches these filters." in page(
        client, run_url(run), status="passed", family="tool_call"
    )


def test_results_sort_by_column_and_reverse(client, cv):
    run = make_run(cv)
    make_evaluation(run, [FAILED, PASSED, ERROR, PASSED, PENDING])

    def order(sort: str) -> list[str]:
        body = page(client, run_url(run), sort=sort)
        found = [(body.index(f">{t}</a></td>"), t) for t in ("q1", "q2", "q3", "q4", "t1")]
        return [t for _, t in sorted(found)]

    assert order("position") == ["q1", "q2", "q3", "q4", "t1"]
    assert order("-task") == ["t1", "q4", "q3", "q2", "q1"]
    assert order("status") == ["q3", "q1", "q2", "q4", "t1"]  # error, failed, passed, pending
    assert order("duration") == ["q1", "q2", "q4", "q3", "t1"]  # unfinished last
    assert order("-duration") == ["q4", "q2", "q1", "t1", "q3"]


def test_results_page_by_fifty_and_htmx_gets_only_the_table(client, make_pack):
    cv = import_version(make_pack, "big", tasks=60)
    run = make_run(cv)
    make_evaluation(run, [PASSED] * 60)

    second = page(client, run_url(run), page=2)
    partial = client.get(run_url(run), {"status": "passed"}, HTTP_HX_REQUEST="true")

    assert "51–60 of 60" in second and ">q51</a>" in second and ">q50</a>" not in second
    assert partial.content.decode().lstrip().startswith('<div id="results">')
    assert "1–50 of 60" in partial.content.decode()
    assert "HX-Request" in partial["Vary"]


def test_changes_from_the_previous_evaluation_list_flipped_tasks(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    make_evaluation(run, [PASSED, PASSED, ERROR, FAILED, PENDING], number=2)

    body = page(client, run_url(run))

    assert "Changes from evaluation 1" in body
    assert "2 tasks changed status." in body
    section = body[body.index("Changes from evaluation 1") : body.index("<h2>Results</h2>")]
    assert ">q2</a>" in section and ">q3</a>" in section and ">q1</a>" not in section


def test_only_users_with_the_permission_can_re_evaluate(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    url = reverse("runs:reevaluate", args=[run.pk])

    anonymous = Client().post(url)
    client.force_login(user_with("viewer"))
    without = client.post(url)
    page_without = page(client, run_url(run))

    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert without.status_code == 403
    assert "Re-evaluate" not in page_without
    assert run.evaluations.count() == 1


def test_re_evaluating_creates_evaluation_two_and_shows_it(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    reviewer = user_with("reviewer", "add_evaluation")
    client.force_login(reviewer)
    assert "Re-evaluate" in page(client, run_url(run))

    response = client.post(reverse("runs:reevaluate", args=[run.pk]))

    assert response.status_code == 302
    assert response["Location"] == f"{run_url(run)}?evaluation=2"
    second = run.evaluations.get(number=2)
    assert second.created_by == reviewer
    assert run.evaluations.get(number=1).is_done  # the old evaluation stays
    assert "Evaluation 2 of run" in page(client, response["Location"])


# --- result page -----------------------------------------------------------------------------


def result_for(run: Run, task_id: str) -> TaskResult:
    return TaskResult.objects.get(evaluation__run=run, task__task_id=task_id)


def result_url(result: TaskResult) -> str:
    return reverse("runs:result", args=[result.evaluation.run_id, result.pk])


def test_the_result_page_shows_the_verdict_and_links_the_task(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    result = result_for(run, "q2")
    TaskResult.objects.filter(pk=result.pk).update(
        sandbox_backend="bwrap", sandbox_image="python:3.11", attempts=1, worker="w1@host"
    )

    body = page(client, result_url(result))

    assert reverse("packs:task", args=["demo", 1, "q2"]) in body
    assert "wrong_answer" in body and "bwrap" in body and "python:3.11" in body
    assert "w1@host" in body and "multiple_choice" in body
    assert reverse("runs:result", args=[run.pk, result_for(run, "q1").pk]) in body
    assert reverse("runs:result", args=[run.pk, result_for(run, "q3").pk]) in body


def test_verifier_output_and_detail_strings_are_never_shown(client, cv):
    run = make_run(cv)
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    result = result_for(run, "q2")
    TaskResult.objects.filter(pk=result.pk).update(
        stdout=f"stdout {MARK}-out",
        stderr=f"stderr {MARK}-err",
        details={
            "tests_passed": 3,
            "tests_failed": 1,
            "timed_out": False,
            "answered_choice_index": 2,
            "expected": f"{MARK}-detail",
            "failing_test": [f"{MARK}-list"],
            "nested": {"hidden": f"{MARK}-dict"},
        },
    )

    body = page(client, result_url(result))

    assert MARK not in body
    assert "tests_passed" in body and "tests_failed" in body and "timed_out" in body
    assert "expected" not in body and "failing_test" not in body
    # An index can be the answer itself (the choice a passing candidate picked).
    assert "answered_choice_index" not in body
    assert "Verifier output and messages are privileged: reviewers see them in debug mode." in body


def test_a_code_candidate_is_highlighted(client, reader, cv):
    run = make_run(cv, submitted_by=reader)  # candidates are shown to their submitter
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    result = result_for(run, "q1")
    candidate = Candidate.objects.create(
        run=run, task=result.task, kind="code", text="def add(a, b):\n    return a + b\n"
    )
    TaskResult.objects.filter(pk=result.pk).update(candidate=candidate)

    body = page(client, result_url(result))

    assert '<span class="k">def</span>' in body
    assert '<span class="linenos">2</span>' in body
    assert ' style="' not in body


def test_candidate_text_is_escaped_and_patches_are_coloured(client, reader, cv):
    run = make_run(cv, submitted_by=reader)  # candidates are shown to their submitter
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    first, second = result_for(run, "q1"), result_for(run, "q2")
    script = Candidate.objects.create(
        run=run, task=first.task, kind="text", text="<script>alert(1)</script>"
    )
    patch = Candidate.objects.create(
        run=run, task=second.task, kind="patch", text="--- a/x.py\n+++ b/x.py\n-old\n+new\n"
    )
    TaskResult.objects.filter(pk=first.pk).update(candidate=script)
    TaskResult.objects.filter(pk=second.pk).update(candidate=patch)

    text_body = page(client, result_url(first))
    patch_body = page(client, result_url(second))

    assert "<script>alert(1)</script>" not in text_body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text_body
    assert '<span class="gi">+new' in patch_body and '<span class="gd">-old' in patch_body


def test_a_workspace_candidate_lists_its_files_with_sizes(client, reader, cv):
    run = make_run(cv, submitted_by=reader)  # candidates are shown to their submitter
    make_evaluation(run, [PASSED, FAILED, FAILED, FAILED, PENDING])
    result = result_for(run, "q1")
    content = base64.b64encode(b"x" * 1500).decode()
    candidate = Candidate.objects.create(
        run=run,
        task=result.task,
        kind="workspace",
        files={"src/app.py": {"content_b64": content, "mode": 0o755}},
    )
    TaskResult.objects.filter(pk=result.pk).update(candidate=candidate)

    body = page(client, result_url(result))

    assert "src/app.py" in body and "1.5\xa0KB" in body and ">755<" in body


def test_oracle_candidates_are_withheld(client, cv):
    run = make_run(cv, "oracle", origin=CandidateOrigin.ORACLE)
    make_evaluation(run, [PASSED, PASSED, PASSED, PASSED, PENDING])
    result = result_for(run, "q1")
    candidate = Candidate.objects.create(
        run=run, task=result.task, kind="text", text=f"Answer: B {MARK}"
    )
    TaskResult.objects.filter(pk=result.pk).update(candidate=candidate)

    body = page(client, result_url(result))

    assert MARK not in body
    assert "Candidate withheld: oracle candidates are reference solutions (privileged)" in body


def test_a_result_of_another_run_is_not_found(client, cv):
    first, second = make_run(cv), make_run(cv, "b")
    make_evaluation(first, [PASSED, FAILED, FAILED, FAILED, PENDING])
    result = result_for(first, "q1")

    response = client.get(reverse("runs:result", args=[second.pk, result.pk]))

    assert response.status_code == 404
