"""Evaluation pages: upload, one version, its versions, compare; the pack page's section.

Who sees what: everyone who may browse sees the declaration and the digests; the program's
contents only the maintainers of a pack it scores, reviewers and admins; sealed contents only
those, in debug mode, each read audited.
"""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evaluations.models import EvaluationDefinition
from evaluations.services import evaluation_import_folder
from packs.services import pack_import_folder
from runs.models import AuditEvent
from tests.conftest import make_user, zip_folder
from tests.evaluations.test_import_evaluation import declaration, write_evaluation

pytestmark = pytest.mark.django_db

SEALED = "secret-label-7f3a"
PROGRAM_LINE = "print(json.dumps({'metrics': {'accuracy': 1.0}}))"
PAGE = "/evaluations/exact/v1/"


@pytest.fixture
def world(tmp_path, make_pack):
    version = pack_import_folder(folder=make_pack()).contract_version
    maintainer = make_user("author", "pack maintainer")
    version.pack.maintainers.add(maintainer)
    outcome = evaluation_import_folder(
        folder=write_evaluation(tmp_path / "e", declaration()), uploaded_by=maintainer
    )
    return {"version": version, "definition": outcome.definition, "maintainer": maintainer}


def text_of(response) -> str:
    return re.sub(r"<[^>]+>", "", response.content.decode())


def login(client, role: str, world) -> None:
    users = {
        "viewer": lambda: make_user("viewer", "viewer"),
        "maintainer": lambda: world["maintainer"],
        "other maintainer": lambda: make_user("other", "pack maintainer"),
        "reviewer": lambda: make_user("reviewer", "reviewer"),
        "admin": lambda: make_user("root", superuser=True),
    }
    client.force_login(users[role]())


@pytest.mark.parametrize(
    ("role", "sees_program"),
    [
        ("viewer", False),
        ("other maintainer", False),
        ("maintainer", True),
        ("reviewer", True),
        ("admin", True),
    ],
)
def test_the_evaluation_page_shows_the_declaration_to_all_and_the_program_to_its_reviewers(
    client, world, role, sees_program
):
    login(client, role, world)

    response = client.get(PAGE)

    assert response.status_code == 200
    shown = text_of(response)
    definition = world["definition"]
    for fact in ("Exact match", "exact@1", definition.short_digest, "accuracy", "author"):
        assert fact in shown, fact
    assert "higher is better" in shown and "task scope" in shown
    assert "python3 /evaluation/program/score.py" in shown
    assert "score.py" in shown and "labels.txt" in shown  # names and digests are public
    sealed_sha = definition.files.get(role="sealed").sha256
    assert sealed_sha[:12] in shown
    assert ("json.dumps" in shown) is sees_program
    # Sealed contents never, whoever asks, without debug mode.
    assert SEALED not in response.content.decode()
    assert "/privileged/evaluations/" not in response.content.decode()


def test_a_reviewer_in_debug_mode_reveals_a_sealed_file_and_the_read_is_audited(client, world):
    reviewer = make_user("reviewer", "reviewer")
    client.force_login(reviewer)
    url = "/privileged/evaluations/exact/v1/file/?path=labels.txt"
    assert client.get(url).status_code == 403  # privileged, but debug mode is off
    assert not AuditEvent.objects.filter(object_type="evaluation_file").exists()

    client.post("/debug-mode/", {"reason": "checking the labels", "next": "/"})
    page = client.get(PAGE).content.decode()
    assert url.split("?")[0] in page and SEALED not in page

    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert SEALED in response.content.decode()
    event = AuditEvent.objects.get(object_type="evaluation_file")
    assert event.user == reviewer and event.action == "view_file"
    assert event.reason == "checking the labels" and event.pack_id == "demo"
    assert event.resource == "exact@1 sealed/labels.txt"
    # A program file is not a sealed file: the reader serves sealed/ only.
    assert client.get(url.replace("labels.txt", "score.py")).status_code == 404


@pytest.mark.parametrize("role", ["viewer", "other maintainer"])
def test_without_the_privilege_the_sealed_panel_is_a_404_even_in_debug_mode(client, world, role):
    login(client, role, world)
    client.post("/debug-mode/", {"reason": "trying", "next": "/"})

    response = client.get("/privileged/evaluations/exact/v1/file/?path=labels.txt")

    assert response.status_code == 404
    assert SEALED not in response.content.decode()
    assert not AuditEvent.objects.filter(object_type="evaluation_file").exists()


def test_versions_and_compare_show_what_changed_by_digest_never_contents(client, world, tmp_path):
    changed = declaration(version=2, title="Exact match, stricter")
    evaluation_import_folder(
        folder=write_evaluation(tmp_path / "v2", changed, sealed="other-label-91c2\n"),
        uploaded_by=world["maintainer"],
    )
    login(client, "viewer", world)

    listing = text_of(client.get("/evaluations/exact/"))
    assert "v1" in listing and "v2" in listing and "2 versions" in listing

    response = client.get("/evaluations/exact/compare/?a=1&b=2")
    assert response.status_code == 200
    shown = text_of(response)
    assert "title" in shown and "Exact match, stricter" in shown
    assert "1 changed" in shown and "1 the same" in shown  # labels.txt changed, score.py same
    assert "secret-label" not in shown and "other-label" not in shown
    assert "json.dumps" not in shown
    # Default: the latest against the one before; an unknown version falls back.
    assert "v1 → v2" in text_of(client.get("/evaluations/exact/compare/"))
    assert client.get("/evaluations/exact/compare/?a=9&b=x").status_code == 200
    assert client.get("/evaluations/nothing/compare/").status_code == 404


def test_the_pack_and_version_pages_list_built_in_and_uploaded_evaluations(client, world):
    login(client, "viewer", world)

    for url in ("/packs/demo/", "/packs/demo/v1/"):
        shown = text_of(client.get(url))
        assert "Evaluations" in shown
        assert "securebench@1" in shown and "securebench-pass-at-k@1" in shown
        assert "exact@1" in shown and "accuracy ↑" in shown
        assert "Upload an evaluation" not in shown  # a viewer may not add one
    page = client.get("/packs/demo/").content.decode()
    assert 'href="/evaluations/exact/v1/"' in page


def test_the_pack_page_offers_the_upload_to_its_maintainer_and_an_empty_state(client, make_pack):
    version = pack_import_folder(folder=make_pack()).contract_version
    maintainer = make_user("author", "pack maintainer")
    version.pack.maintainers.add(maintainer)
    client.force_login(maintainer)

    shown = text_of(client.get("/packs/demo/"))

    assert "No uploaded evaluation scores demo yet" in shown
    assert "Upload an evaluation" in shown


def test_an_evaluation_of_a_pack_the_user_cannot_see_is_a_404(client, world):
    client.force_login(make_user("nobody"))
    assert client.get(PAGE).status_code == 403  # no browse role at all
    client.force_login(make_user("viewer", "viewer"))
    world["version"].state = "draft"
    world["version"].save(update_fields=["state"])
    assert client.get(PAGE).status_code == 404
    assert client.get("/evaluations/exact/").status_code == 404


# --- the upload page -------------------------------------------------------------------------


def upload(client, folder):
    archive = SimpleUploadedFile(f"{folder.name}.zip", zip_folder(folder))
    return client.post("/evaluations/upload/", {"archive": archive})


def test_a_maintainer_uploads_an_evaluation_and_lands_on_its_page(client, tmp_path, make_pack):
    version = pack_import_folder(folder=make_pack()).contract_version
    maintainer = make_user("author", "pack maintainer")
    version.pack.maintainers.add(maintainer)
    client.force_login(maintainer)
    page = client.get("/evaluations/upload/")
    assert page.status_code == 200 and "maintain" in text_of(page)

    response = upload(client, write_evaluation(tmp_path / "exact", declaration()))

    assert response.status_code == 302 and response["Location"] == PAGE
    assert EvaluationDefinition.objects.get().uploaded_by == maintainer
    assert "Stored evaluation exact@1" in text_of(client.get(PAGE))


def test_a_refused_upload_lists_every_problem_by_file_line_and_field(client, tmp_path, world):
    client.force_login(world["maintainer"])
    bad = declaration(version=3, scope="sometimes", metrics=[{"name": "Bad Name"}])

    response = upload(client, write_evaluation(tmp_path / "bad", bad))

    assert response.status_code == 400
    page = response.content.decode()
    assert "The evaluation was not stored" in page
    assert "evaluation.yaml" in page and "scope" in page and "metrics[0]" in page
    assert not EvaluationDefinition.objects.filter(version=3).exists()


def test_other_content_under_a_stored_key_is_a_409(client, tmp_path, world):
    client.force_login(world["maintainer"])
    response = upload(client, write_evaluation(tmp_path / "x", declaration(), sealed="new\n"))
    assert response.status_code == 409
    assert "already stored with different content" in response.content.decode()


@pytest.mark.parametrize("role", ["viewer", "submitter"])
def test_who_may_not_upload_gets_a_403(client, role, tmp_path, world):
    client.force_login(make_user(role, role))
    assert client.get("/evaluations/upload/").status_code == 403
    response = upload(client, write_evaluation(tmp_path / "e2", declaration(version=5)))
    assert response.status_code == 403
    assert not EvaluationDefinition.objects.filter(version=5).exists()


def test_a_maintainer_of_another_pack_is_told_which_pack_they_do_not_maintain(
    client, tmp_path, world, make_pack
):
    other = make_user("other", "pack maintainer")
    mine = pack_import_folder(folder=make_pack({"id": "mine", "version": 1})).contract_version
    mine.pack.maintainers.add(other)
    client.force_login(other)
    response = upload(client, write_evaluation(tmp_path / "e3", declaration(version=6)))
    assert response.status_code == 400
    assert "you do not maintain demo" in response.content.decode()
