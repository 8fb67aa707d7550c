"""The evaluation API: list (filter by pack), one version, upload; status codes for each
outcome; never a program's or its sealed data's contents."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from evaluations.models import EvaluationDefinition
from evaluations.services import evaluation_import_folder
from packs.services import pack_import_folder
from tests.conftest import make_user, zip_folder
from tests.evaluations.test_import_evaluation import declaration, write_evaluation

pytestmark = pytest.mark.django_db
SEALED = "secret-label-7f3a"


def api_as(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def maintainer(make_pack):
    version = pack_import_folder(folder=make_pack()).contract_version
    user = make_user("author", "pack maintainer")
    version.pack.maintainers.add(user)
    return user


def post(client: APIClient, folder):
    archive = SimpleUploadedFile(f"{folder.name}.zip", zip_folder(folder))
    return client.post("/api/v1/evaluations/", {"archive": archive}, format="multipart")


def test_upload_answers_201_then_200_for_the_same_content_then_409_for_other(maintainer, tmp_path):
    client = api_as(maintainer)

    created = post(client, write_evaluation(tmp_path / "a", declaration()))
    again = post(client, write_evaluation(tmp_path / "b", declaration()))
    other = post(client, write_evaluation(tmp_path / "c", declaration(), sealed="changed\n"))

    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["key"] == "exact@1" and body["created"] is True
    assert {(f["role"], f["path"]) for f in body["files"]} == {
        ("program", "score.py"),
        ("sealed", "labels.txt"),
    }
    assert all(len(f["sha256"]) == 64 and f["size"] > 0 for f in body["files"])
    assert again.status_code == 200 and again.json()["created"] is False
    assert other.status_code == 409
    assert other.json()["problems"][0]["field"] == "version"
    assert SEALED not in json.dumps(body) and "json.dumps" not in json.dumps(body)


def test_bad_input_is_a_400_with_every_problem_by_file_line_and_field(maintainer, tmp_path):
    bad = declaration(scope="sometimes", metrics=[{"name": "Bad Name"}])

    response = post(api_as(maintainer), write_evaluation(tmp_path / "bad", bad))

    assert response.status_code == 400
    problems = response.json()["problems"]
    fields = {problem["field"] for problem in problems}
    assert "scope" in fields and any(f and f.startswith("metrics[0]") for f in fields)
    assert all(problem["file"] == "evaluation.yaml" for problem in problems)
    assert any(problem["line"] for problem in problems)
    no_archive = api_as(maintainer).post("/api/v1/evaluations/", {}, format="multipart")
    assert no_archive.status_code == 400 and "archive" in no_archive.json()["errors"]
    assert not EvaluationDefinition.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "submitter"])
def test_who_may_not_upload_gets_a_403(maintainer, tmp_path, role):
    response = post(api_as(make_user(role, role)), write_evaluation(tmp_path / "e", declaration()))
    assert response.status_code == 403
    assert not EvaluationDefinition.objects.exists()


def test_anonymous_upload_is_refused(maintainer, tmp_path):
    response = post(APIClient(), write_evaluation(tmp_path / "e", declaration()))
    assert response.status_code in (401, 403)


def test_list_filter_and_detail(maintainer, tmp_path, make_pack):
    evaluation_import_folder(folder=write_evaluation(tmp_path / "e", declaration()))
    pack_import_folder(folder=make_pack({"id": "other", "version": 1}))
    viewer = api_as(make_user("viewer", "viewer"))

    listing = viewer.get("/api/v1/evaluations/").json()
    assert listing["count"] == 1
    item = listing["results"][0]
    assert item["key"] == "exact@1" and item["scores"] == [{"pack": "demo", "versions": None}]
    assert item["metrics"][0]["direction"] == "higher"
    assert viewer.get("/api/v1/evaluations/?pack=demo").json()["count"] == 1
    assert viewer.get("/api/v1/evaluations/?pack=other").json()["count"] == 0

    detail = viewer.get("/api/v1/evaluations/exact/1/")
    assert detail.status_code == 200
    data = detail.json()
    assert data["digest"] == EvaluationDefinition.objects.get().digest
    assert data["declaration"]["program"]["command"][0] == "python3"
    assert len(data["files"]) == 2
    assert SEALED not in detail.content.decode()
    assert viewer.get("/api/v1/evaluations/exact/2/").status_code == 404
    assert APIClient().get("/api/v1/evaluations/").status_code in (401, 403)
