"""Roles, debug mode and the audit log, as each kind of user meets them."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import AuditEvent, Candidate, Evaluation, Run, RunSource, TaskResult
from runs.privileged import SESSION_KEY
from tests.conftest import make_user, mc_row, zip_folder

pytestmark = pytest.mark.django_db

SOLUTION = "def add(a, b):\n    return a + b  # CANONICAL-MARK\n"
LOG_MARK = "VERIFIER-LOG-MARK"
CANDIDATE_MARK = "OWN-CANDIDATE-MARK"
REASON = "checking why q1 fails"


@pytest.fixture
def cv(make_pack) -> ContractVersion:
    code = {
        "id": "add",
        "family": "code_completion",
        "input": {"prompt": "def add(a, b):", "language": "python"},
        "eval": {
            "tests": {"source": "inline", "code": "assert add(1, 2) == 3  # TESTS-MARK\n"},
            "canonical_solution": SOLUTION,
        },
    }
    folder = make_pack(
        {"id": "demo", "version": 1},
        [mc_row("q1", "B"), code],
        files={"hidden/notes.txt": "HIDDEN-FILE-MARK\n", "assets/a.txt": "public\n"},
    )
    return pack_import_folder(folder=folder).contract_version


@pytest.fixture
def users(cv, make_pack) -> dict[str, User | None]:
    other = pack_import_folder(folder=make_pack({"id": "other", "version": 1})).contract_version
    people: dict[str, User | None] = {
        "anonymous": None,
        "no role": make_user("nobody"),
        "viewer": make_user("viewer", "viewer"),
        "submitter": make_user("submitter", "submitter"),
        "other submitter": make_user("other-submitter", "submitter"),
        "maintainer": make_user("maintainer", "pack maintainer"),
        "other maintainer": make_user("other-maintainer", "pack maintainer"),
        "reviewer": make_user("reviewer", "reviewer"),
        "superuser": make_user("root", superuser=True),
    }
    cv.pack.maintainers.add(people["maintainer"])
    other.pack.maintainers.add(people["other maintainer"])
    return people


@pytest.fixture
def result(cv, users) -> TaskResult:
    """q1 of a submitted run by the submitter, scored, with stored verifier output."""
    run = Run.objects.create(
        contract_version=cv,
        agent_name="agent",
        source=RunSource.FORM,
        submitted_by=users["submitter"],
        submitted_at=timezone.now(),
    )
    task = cv.tasks.get(task_id="q1")
    candidate = Candidate.objects.create(
        run=run, task=task, kind="text", text=f"Answer: A {CANDIDATE_MARK}"
    )
    evaluation = Evaluation.objects.create(
        run=run, number=1, evaluator="securebench@1", status="done", score=0.0
    )
    return TaskResult.objects.create(
        evaluation=evaluation,
        task=task,
        candidate=candidate,
        family=task.family,
        position=task.position,
        queue="text",
        status="failed",
        failure_reason="wrong_answer",
        stdout=f"stdout {LOG_MARK}",
        stderr=f"stderr {LOG_MARK}",
        details={"expected": f"{LOG_MARK}-detail", "tests_passed": 0},
    )


def client_as(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def reveal_url(name: str = "canonical_solution", task: str = "add") -> str:
    return f"{reverse('runs:reveal-resource', args=['demo', 1])}?task={task}&name={name}"


def panel_url(result: TaskResult, part: str) -> str:
    return reverse("runs:result-privileged", args=[result.evaluation.run_id, result.pk, part])


def debug_on(client: Client, reason: str = REASON):
    return client.post(reverse("runs:debug-mode"), {"reason": reason, "next": "/packs/"})


# --- who reaches what (debug mode off) ---------------------------------------------------------

BROWSERS = {
    "viewer",
    "submitter",
    "other submitter",
    "maintainer",
    "other maintainer",
    "reviewer",
    "superuser",
}
ROLES = ["anonymous", "no role", *sorted(BROWSERS)]
# endpoint → the roles that get a 200; anonymous gets a sign-in redirect on pages (a 403 JSON
# on the API), privileged panels answer 403 to users privileged for the pack (debug mode is
# off) and 404 to everyone else.
ALLOWED = {
    "home": BROWSERS,
    "packs": BROWSERS,
    "pack": BROWSERS,
    "version": BROWSERS,
    "task": BROWSERS,
    "public file": BROWSERS,
    "runs": BROWSERS,
    "run": BROWSERS,
    "result": BROWSERS,
    "progress": BROWSERS,
    "leaderboards": BROWSERS,
    "leaderboard": BROWSERS,
    "submit": {"submitter", "other submitter", "superuser"},
    "upload": {"maintainer", "other maintainer", "superuser"},
    "audit": {"reviewer", "superuser"},
    "debug mode": {"maintainer", "other maintainer", "reviewer", "superuser"},
    "api packs": BROWSERS,
    "api tasks": BROWSERS,
    "api runs": BROWSERS,
    "api results": BROWSERS,
    "api asset": BROWSERS,
}
PRIVILEGED_FOR_DEMO = {"maintainer", "reviewer", "superuser"}


def endpoint_url(name: str, result: TaskResult) -> str:
    run_id = result.evaluation.run_id
    return {
        "home": "/",
        "packs": "/packs/",
        "pack": "/packs/demo/",
        "version": "/packs/demo/v1/",
        "task": "/packs/demo/v1/tasks/add",
        "public file": "/packs/demo/v1/files/a.txt",
        "runs": "/runs/",
        "run": f"/runs/{run_id}/",
        "result": f"/runs/{run_id}/results/{result.pk}/",
        "progress": f"/runs/{run_id}/evaluations/1/progress/",
        "leaderboards": "/leaderboards/",
        "leaderboard": "/leaderboards/demo/v1/",
        "submit": "/runs/submit/",
        "upload": "/upload/",
        "audit": "/audit/",
        "debug mode": "/debug-mode/",
        "api packs": "/api/v1/packs/",
        "api tasks": "/api/v1/packs/demo/versions/1/tasks/",
        "api runs": "/api/v1/runs/",
        "api results": f"/api/v1/runs/{run_id}/evaluations/1/results/",
        "api asset": "/api/v1/packs/demo/versions/1/files/a.txt",
        "reveal": reveal_url(),
        "file": f"{reverse('runs:reveal-file', args=['demo', 1])}?path=notes.txt",
        "files": reverse("runs:sealed-files", args=["demo", 1]),
        "logs": panel_url(result, "logs"),
        "details": panel_url(result, "details"),
        "candidate": panel_url(result, "candidate"),
    }[name]


@pytest.mark.parametrize("role", ROLES)
def test_each_role_reaches_exactly_its_pages_partials_and_api(users, result, role):
    client = client_as(users[role])
    for name, allowed in ALLOWED.items():
        url = endpoint_url(name, result)
        response = client.get(url)
        if role in allowed:
            expected = 286 if name == "progress" else 200  # 286: done, polling stops
        elif role == "anonymous":
            expected = 403 if url.startswith("/api/") else 302
        else:
            expected = 403
        assert response.status_code == expected, (role, name, response.status_code)
        if role == "anonymous" and expected == 302:
            assert response["Location"].startswith(reverse("login"))
    for name in ("reveal", "file", "files", "logs", "details", "candidate"):
        for headers in ({}, {"HX-Request": "true"}):
            response = client.get(endpoint_url(name, result), headers=headers)
            expected = 302 if role == "anonymous" else 403 if role in PRIVILEGED_FOR_DEMO else 404
            assert response.status_code == expected, (role, name, response.status_code)
            body = response.content.decode()
            assert "CANONICAL-MARK" not in body and LOG_MARK not in body


@pytest.mark.parametrize("role", sorted(BROWSERS))
def test_only_the_submitter_sees_their_candidate_and_nobody_sees_logs(users, result, role):
    client = client_as(users[role])

    body = client.get(endpoint_url("result", result)).content.decode()
    api = client.get(endpoint_url("api results", result)).content.decode()

    assert (CANDIDATE_MARK in body) is (role == "submitter")
    assert LOG_MARK not in body and LOG_MARK not in api and "stdout" not in json.loads(api)
    if role not in ("submitter",):
        assert CANDIDATE_MARK not in body


def test_a_draft_run_is_its_creators_alone(cv, users):
    draft = Run.objects.create(
        contract_version=cv, agent_name="draft-agent", source="api", submitted_by=users["submitter"]
    )

    mine = client_as(users["submitter"])
    theirs = client_as(users["other submitter"])

    assert "draft-agent" in mine.get("/runs/").content.decode()
    assert "draft-agent" not in theirs.get("/runs/").content.decode()
    assert mine.get(f"/runs/{draft.pk}/").status_code == 200
    assert theirs.get(f"/runs/{draft.pk}/").status_code == 404
    assert client_as(users["superuser"]).get(f"/runs/{draft.pk}/").status_code == 200


def test_a_viewer_never_sees_the_debug_switch_and_a_reviewer_does(users, result):
    viewer_page = client_as(users["viewer"]).get("/packs/demo/v1/tasks/add").content.decode()
    reviewer_page = client_as(users["reviewer"]).get("/packs/demo/v1/tasks/add").content.decode()

    assert "Debug mode" not in viewer_page and "/debug-mode/" not in viewer_page
    assert "Audit log" not in viewer_page
    assert 'class="debug-switch"' in reviewer_page and "Audit log" in reviewer_page
    assert "Switch debug mode on" in reviewer_page and "Reveal" not in reviewer_page


# --- debug mode ----------------------------------------------------------------------------------


def test_switching_debug_mode_on_needs_a_reason(users):
    client = client_as(users["reviewer"])

    response = client.post(reverse("runs:debug-mode"), {"reason": "   "})

    assert response.status_code == 400
    assert "Give a reason" in response.content.decode()
    assert not AuditEvent.objects.exists()


def test_a_viewer_cannot_switch_debug_mode_on(users):
    response = debug_on(client_as(users["viewer"]))

    assert response.status_code == 403
    assert not AuditEvent.objects.exists()


def test_switching_debug_mode_on_needs_the_csrf_token(users):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(users["reviewer"])

    assert debug_on(browser).status_code == 403
    assert not AuditEvent.objects.exists()


def test_in_debug_mode_a_reviewer_reveals_one_value_and_the_look_is_audited(users, result):
    client = client_as(users["reviewer"])
    assert debug_on(client).status_code == 302

    page = client.get("/packs/demo/v1/tasks/add").content.decode()
    partial = client.get(reveal_url(), headers={"HX-Request": "true"})

    assert "Debug mode</strong> — privileged information visible, every view is recorded" in page
    assert "(expires " in page and "Switch off" in page
    assert 'hx-get="/privileged/packs/demo/v1/resource/?task=add&amp;name=tests"' in page
    assert partial.status_code == 200
    body = partial.content.decode()
    assert "CANONICAL-MARK" in body and "TESTS-MARK" not in body  # one resource at a time
    assert '<span class="k">def</span>' in body and "<html" not in body
    event = AuditEvent.objects.get(action="view_resource")
    assert (event.user, event.username, event.pack_id, event.version) == (
        users["reviewer"],
        "reviewer",
        "demo",
        1,
    )
    assert (event.task_id, event.resource, event.reason) == ("add", "canonical_solution", REASON)
    assert event.ip_address == "127.0.0.1"
    assert AuditEvent.objects.filter(action="debug_mode_on", reason=REASON).count() == 1


def test_in_debug_mode_hidden_files_are_listed_and_viewed_one_at_a_time(users, result):
    client = client_as(users["maintainer"])
    debug_on(client)

    listing = client.get(endpoint_url("files", result)).content.decode()
    file = client.get(endpoint_url("file", result)).content.decode()

    assert "notes.txt" in listing and "HIDDEN-FILE-MARK" not in listing
    assert "HIDDEN-FILE-MARK" in file
    assert AuditEvent.objects.filter(action="view_file", resource="notes.txt").count() == 1


def test_in_debug_mode_result_panels_show_logs_details_and_candidate(users, result):
    client = client_as(users["reviewer"])
    debug_on(client)

    page = client.get(endpoint_url("result", result)).content.decode()
    logs = client.get(endpoint_url("logs", result)).content.decode()
    details = client.get(endpoint_url("details", result)).content.decode()
    candidate = client.get(endpoint_url("candidate", result)).content.decode()

    assert LOG_MARK not in page and CANDIDATE_MARK not in page
    assert "Verifier output" in page and "Full details" in page
    assert f"stdout {LOG_MARK}" in logs and f"stderr {LOG_MARK}" in logs
    assert f"{LOG_MARK}-detail" in details
    assert CANDIDATE_MARK in candidate
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"view_logs", "view_details", "view_candidate"} <= actions


def test_a_maintainer_in_debug_mode_sees_only_their_own_packs(users, result):
    client = client_as(users["other maintainer"])
    assert debug_on(client).status_code == 302

    assert client.get(reveal_url()).status_code == 404
    assert client.get(endpoint_url("logs", result)).status_code == 404
    assert not AuditEvent.objects.exclude(action="debug_mode_on").exists()


def test_debug_mode_expires_and_then_nothing_is_reachable(users, result):
    client = client_as(users["reviewer"])
    debug_on(client)
    assert client.get(reveal_url()).status_code == 200
    session = client.session
    state = session[SESSION_KEY]
    state["until"] = (timezone.now() - dt.timedelta(seconds=1)).timestamp()
    session[SESSION_KEY] = state
    session.save()

    response = client.get(reveal_url())
    page = client.get("/packs/demo/v1/tasks/add").content.decode()

    assert response.status_code == 403 and "CANONICAL-MARK" not in response.content.decode()
    assert "privileged information visible" not in page
    assert AuditEvent.objects.filter(action="debug_mode_off", resource="expired").count() == 1


def test_debug_mode_lasts_the_configured_minutes(users, settings):
    settings.SECUREBENCH_DEBUG_MODE_MINUTES = 5
    client = client_as(users["reviewer"])
    before = timezone.now()

    debug_on(client)

    until = dt.datetime.fromtimestamp(client.session[SESSION_KEY]["until"], tz=dt.UTC)
    assert (
        dt.timedelta(minutes=4, seconds=59) < until - before <= dt.timedelta(minutes=5, seconds=2)
    )


def test_switching_debug_mode_off_closes_the_panels(users, result):
    client = client_as(users["superuser"])
    debug_on(client)

    response = client.post(reverse("runs:debug-mode-off"), {"next": "/packs/"})

    assert response.status_code == 302
    assert client.get(reveal_url()).status_code == 403
    assert client.get(endpoint_url("logs", result)).status_code == 403
    assert AuditEvent.objects.filter(action="debug_mode_off", resource="switched off").exists()


def test_api_results_carry_logs_only_for_a_privileged_session_in_debug_mode(users, result):
    session = APIClient()
    session.force_login(users["reviewer"])
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=users['reviewer'])}")
    url = endpoint_url("api results", result)

    before = session.get(url).json()["results"][0]
    session.post(reverse("runs:debug-mode"), {"reason": REASON})
    during = session.get(url).json()["results"][0]
    by_token = token.get(url).json()["results"][0]

    assert "stdout" not in before and "stdout" not in by_token
    assert during["stdout"] == f"stdout {LOG_MARK}"
    assert during["details"]["expected"] == f"{LOG_MARK}-detail"
    assert AuditEvent.objects.filter(action="api_results").count() == 1


# --- audit log -----------------------------------------------------------------------------------


def test_the_audit_log_filters_by_user_action_pack_and_dates(users, result):
    reviewer = client_as(users["reviewer"])
    debug_on(reviewer)
    reviewer.get(reveal_url())
    maintainer = client_as(users["maintainer"])
    debug_on(maintainer, "maintainer check")
    maintainer.get(reveal_url("tests"))
    AuditEvent.objects.filter(username="maintainer").update(
        created_at=timezone.now() - dt.timedelta(days=10)
    )
    audit = client_as(users["superuser"])

    everything = audit.get("/audit/").content.decode()
    by_user = audit.get("/audit/", {"user": "maintainer"}).content.decode()
    by_action = audit.get("/audit/", {"action": "view_resource", "pack": "demo"}).content.decode()
    recent = audit.get("/audit/", {"since": str(timezone.now().date())}).content.decode()
    partial = audit.get("/audit/", {"user": "reviewer"}, headers={"HX-Request": "true"})

    assert "1–4 of 4" in everything
    assert "1–2 of 2" in by_user and "maintainer check" in by_user and REASON not in by_user
    assert "1–2 of 2" in by_action
    assert "1–2 of 2" in recent and "maintainer check" not in recent
    assert partial.content.decode().startswith('\n<div id="audit-table">')


def test_the_audit_log_pages_by_fifty(users):
    AuditEvent.objects.bulk_create(
        AuditEvent(username="r", action="view_logs", reason=f"reason {i}") for i in range(55)
    )
    client = client_as(users["reviewer"])

    assert "1–50 of 55" in client.get("/audit/").content.decode()
    assert "51–55 of 55" in client.get("/audit/", {"page": 2}).content.decode()


# --- admin, maintainers, public results ----------------------------------------------------------


def test_the_django_admin_shows_no_log_and_no_candidate(users, result):
    client = client_as(users["superuser"])

    change = client.get(f"/admin/runs/taskresult/{result.pk}/change/")
    candidates = client.get("/admin/runs/candidate/")

    assert change.status_code == 200 and LOG_MARK not in change.content.decode()
    assert candidates.status_code == 404
    assert client.get("/admin/runs/auditevent/").status_code == 200


def test_the_first_uploader_maintains_the_pack_and_others_cannot_add_versions(make_pack, users):
    first = make_user("first", "pack maintainer")
    folder = make_pack({"id": "owned", "version": 1})
    client = client_as(first)
    client.post("/upload/", {"archive": SimpleUploadedFile("p.zip", zip_folder(folder))})
    newer = make_pack({"id": "owned", "version": 2})
    intruder = client_as(users["other maintainer"])

    refused = intruder.post("/upload/", {"archive": SimpleUploadedFile("p.zip", zip_folder(newer))})
    accepted = client.post("/upload/", {"archive": SimpleUploadedFile("p.zip", zip_folder(newer))})

    assert list(
        ContractVersion.objects.get(pack__pack_id="owned", version=1).pack.maintainers.all()
    ) == [first]
    assert refused.status_code == 409
    assert "pack owned is maintained by other users" in refused.content.decode()
    assert accepted.status_code == 302


def test_public_results_let_anonymous_visitors_browse_but_never_see_candidates(
    users, result, settings
):
    settings.SECUREBENCH_PUBLIC_RESULTS = True
    anonymous = Client()

    body = anonymous.get(endpoint_url("result", result)).content.decode()

    for name in ("packs", "task", "runs", "run", "leaderboards", "api runs", "api results"):
        assert anonymous.get(endpoint_url(name, result)).status_code == 200, name
    assert CANDIDATE_MARK not in body and LOG_MARK not in body
    assert anonymous.get(endpoint_url("reveal", result)).status_code == 302
    assert anonymous.get("/runs/submit/").status_code == 302
    assert anonymous.get("/audit/").status_code == 302
