from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from packs.models import Pack
from packs.services import pack_import_folder
from tests.conftest import make_user, mc_row, zip_folder

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> APIClient:
    """A viewer's harness (token): the API needs a user who may browse."""
    client = APIClient()
    token = Token.objects.create(user=make_user("api-reader", "viewer"))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def harness_token() -> str:
    user = User.objects.create_user("harness", password="pw-for-tests-only")
    user.user_permissions.add(Permission.objects.get(codename="add_contractversion"))
    return Token.objects.create(user=user).key


def test_it_lists_packs_and_versions(api, reference_packs):
    pack_import_folder(folder=reference_packs / "humaneval-mini")

    packs = api.get("/api/v1/packs/").json()
    detail = api.get("/api/v1/packs/humaneval-mini/").json()

    assert packs["count"] == 1 and packs["results"][0]["id"] == "humaneval-mini"
    assert detail["versions"][0]["version"] == 1
    assert detail["versions"][0]["task_count"] == 10


def test_task_payloads_carry_only_the_public_lane(api, reference_packs):
    pack_import_folder(folder=reference_packs / "humaneval-mini")

    page = api.get("/api/v1/packs/humaneval-mini/versions/1/tasks/").json()

    assert page["count"] == 10
    first = page["results"][0]
    assert first["task_id"] == "humaneval-mini/0"
    assert first["candidate_kind"] == "code"
    assert set(first["payload"]) == {"language", "prompt", "starter_code"}
    assert "canonical_solution" not in str(page) and "check(candidate)" not in str(page)


def test_uploading_through_the_api_needs_a_token_with_permission(api, make_pack):
    folder = make_pack({"id": "api-pack", "version": 1})

    response = api.post(
        "/api/v1/uploads/",
        {"archive": SimpleUploadedFile("p.zip", zip_folder(folder))},
        format="multipart",
    )

    assert response.status_code in (401, 403)
    assert not Pack.objects.exists()


def test_uploading_through_the_api_creates_then_reports_unchanged(api, harness_token, make_pack):
    folder = make_pack({"id": "api-pack", "version": 1}, [mc_row("a"), mc_row("b")])
    api.credentials(HTTP_AUTHORIZATION=f"Token {harness_token}")

    def send():
        archive = SimpleUploadedFile("p.zip", zip_folder(folder))
        return api.post("/api/v1/uploads/", {"archive": archive}, format="multipart")

    first, second = send(), send()

    assert first.status_code == 201
    assert first.json()["tasks"] == 2 and first.json()["created"] is True
    assert second.status_code == 200 and second.json()["created"] is False
    assert second.json()["digest"] == first.json()["digest"]


def test_api_upload_errors_list_file_line_and_field(api, harness_token, make_pack):
    folder = make_pack({"id": "api-pack", "version": 1}, [mc_row("a"), mc_row("a")])
    api.credentials(HTTP_AUTHORIZATION=f"Token {harness_token}")

    response = api.post(
        "/api/v1/uploads/",
        {"archive": SimpleUploadedFile("p.zip", zip_folder(folder))},
        format="multipart",
    )

    assert response.status_code == 400
    problem = response.json()["problems"][0]
    assert problem["file"] == "tasks.jsonl" and problem["line"] == 2
    assert problem["field"] == "id"


def test_api_form_errors_are_field_level(api, harness_token):
    api.credentials(HTTP_AUTHORIZATION=f"Token {harness_token}")

    response = api.post(
        "/api/v1/uploads/",
        {"manifest": SimpleUploadedFile("manifest.yaml", b"id: x\nversion: 1\n")},
        format="multipart",
    )

    assert response.status_code == 400
    assert "tasks" in response.json()["errors"]


def test_api_version_conflict_answers_409(api, harness_token, make_pack):
    harness = Token.objects.get(key=harness_token).user
    pack_import_folder(folder=make_pack({"id": "api-pack", "version": 1}), uploaded_by=harness)
    changed = make_pack({"id": "api-pack", "version": 1}, [mc_row("q1", "A")])
    api.credentials(HTTP_AUTHORIZATION=f"Token {harness_token}")

    response = api.post(
        "/api/v1/uploads/",
        {"archive": SimpleUploadedFile("p.zip", zip_folder(changed))},
        format="multipart",
    )

    assert response.status_code == 409
    assert "raise `version`" in response.json()["detail"]


def test_a_signed_in_browser_session_can_upload_through_the_api_with_csrf(make_pack):
    user = User.objects.create_user("session-author", password="pw-for-tests-only")
    user.user_permissions.add(Permission.objects.get(codename="add_contractversion"))
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(user)
    browser.get("/upload/")
    token = browser.cookies["csrftoken"].value
    archive = zip_folder(make_pack({"id": "session-pack", "version": 1}))

    forged = browser.post(
        "/api/v1/uploads/", {"archive": SimpleUploadedFile("p.zip", archive)}, format="multipart"
    )
    genuine = browser.post(
        "/api/v1/uploads/",
        {"archive": SimpleUploadedFile("p.zip", archive)},
        format="multipart",
        HTTP_X_CSRFTOKEN=token,
    )

    assert forged.status_code == 403
    assert genuine.status_code == 201


def test_task_payloads_link_their_public_asset_files(api, make_pack):
    row = mc_row("q1")
    row["assets"] = [{"path": "data"}]
    folder = make_pack(
        {"id": "with-assets", "version": 1},
        [row],
        files={"assets/data/a.csv": "x\n", "assets/data/b.csv": "y\n", "hidden/h.txt": "h\n"},
    )
    pack_import_folder(folder=folder)

    task = api.get("/api/v1/packs/with-assets/versions/1/tasks/").json()["results"][0]

    assert task["asset_urls"] == {
        "data/a.csv": "http://testserver/api/v1/packs/with-assets/versions/1/files/data/a.csv",
        "data/b.csv": "http://testserver/api/v1/packs/with-assets/versions/1/files/data/b.csv",
    }
    assert api.get(task["asset_urls"]["data/a.csv"]).status_code == 200
