from __future__ import annotations

import io
import tarfile
import zipfile

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from packs.models import ContractVersion, Pack
from packs.services import pack_import_folder
from tests.conftest import make_user, mc_row, zip_folder

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client):
    """Pages need a signed-in user with a role: these tests read them as a viewer."""
    client.force_login(make_user("reader", "viewer"))
    return client


@pytest.fixture
def anonymous():
    return Client()


@pytest.fixture
def uploader(client):
    user = make_user("author", "pack maintainer")
    client.force_login(user)
    return user


def upload(client, data: bytes, name: str = "pack.zip", **extra):
    return client.post(reverse("pack-upload"), {"archive": SimpleUploadedFile(name, data)}, **extra)


def test_anonymous_visitors_are_sent_to_sign_in_before_uploading(anonymous):
    response = anonymous.get(reverse("pack-upload"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_user_without_the_permission_cannot_upload(client):
    client.force_login(User.objects.create_user("viewer", password="x-for-tests"))

    assert client.get(reverse("pack-upload")).status_code == 403


def test_uploading_a_zip_through_the_form_stores_it_and_shows_the_version(
    client, uploader, reference_packs
):
    response = upload(client, zip_folder(reference_packs / "humaneval-mini"))

    cv = ContractVersion.objects.get(pack__pack_id="humaneval-mini")
    assert response.status_code == 302
    assert response["Location"] == reverse("packs:version", args=["humaneval-mini", 1])
    assert cv.uploaded_by == uploader
    page = client.get(response["Location"])
    assert "Stored version 1 of humaneval-mini: 10 tasks" in page.content.decode()


def test_uploading_the_files_one_by_one_works_too(client, uploader, make_pack):
    folder = make_pack({"id": "parts", "version": 1}, [mc_row("q1"), mc_row("q2")])

    response = client.post(
        reverse("pack-upload"),
        {
            "manifest": SimpleUploadedFile(
                "manifest.yaml", (folder / "manifest.yaml").read_bytes()
            ),
            "tasks": SimpleUploadedFile("tasks.jsonl", (folder / "tasks.jsonl").read_bytes()),
        },
    )

    assert response.status_code == 302
    assert ContractVersion.objects.get(pack__pack_id="parts").task_count == 2


@pytest.mark.parametrize("member", ["manifest.yaml/x", "tasks.jsonl/x", "manifest.yaml"])
def test_a_files_archive_holding_a_pack_file_is_refused_and_stores_nothing(
    client, uploader, make_pack, member
):
    folder = make_pack({"id": "parts", "version": 1}, [mc_row("q1")])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as files:
        files.writestr(member, "id: other\nversion: 9\n")

    response = client.post(
        reverse("pack-upload"),
        {
            "manifest": SimpleUploadedFile(
                "manifest.yaml", (folder / "manifest.yaml").read_bytes()
            ),
            "tasks": SimpleUploadedFile("tasks.jsonl", (folder / "tasks.jsonl").read_bytes()),
            "files": SimpleUploadedFile("files.zip", buffer.getvalue()),
        },
    )

    body = response.content.decode()
    assert response.status_code == 400, body[:2000]
    name = member.split("/")[0]
    assert f"files archive: member &#x27;{name}&#x27; is not allowed here" in body
    assert not Pack.objects.exists()


def test_a_row_error_names_file_line_and_field_and_stores_nothing(client, uploader, make_pack):
    bad = {"id": "q2", "family": "multiple_choice", "input": {"question": "?", "choices": "ab"}}
    folder = make_pack({"id": "broken", "version": 1}, [mc_row("q1"), bad])

    response = upload(client, zip_folder(folder))

    body = response.content.decode()
    assert response.status_code == 400
    assert "The pack was not stored." in body
    assert "tasks.jsonl" in body and "input.choices" in body
    assert '<td class="num">2</td>' in body
    assert not Pack.objects.exists()


def test_the_form_keeps_the_error_when_the_version_conflicts(client, uploader, make_pack):
    pack_import_folder(
        folder=make_pack({"id": "humaneval-mini", "version": 1}), uploaded_by=uploader
    )
    changed = make_pack({"id": "humaneval-mini", "version": 1}, [mc_row("q1", "C")])

    response = upload(client, zip_folder(changed))

    assert response.status_code == 409
    assert (
        "version 1 of humaneval-mini is already stored with different content; raise `version`"
        in response.content.decode()
    )


@pytest.mark.parametrize(
    ("member", "kind"),
    [("../escape.txt", tarfile.REGTYPE), ("/etc/evil", tarfile.REGTYPE), ("link", tarfile.SYMTYPE)],
)
def test_unsafe_archives_are_refused_through_the_form(client, uploader, member, kind):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(member)
        info.type = kind
        if kind == tarfile.SYMTYPE:
            info.linkname = "/etc/passwd"
            archive.addfile(info)
        else:
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))

    response = upload(client, buffer.getvalue(), name="pack.tar.gz")

    assert response.status_code == 400
    assert "The pack was not stored." in response.content.decode()
    assert not Pack.objects.exists()


def test_an_upload_over_the_size_cap_is_refused(client, uploader, settings):
    settings.SECUREBENCH_MAX_UPLOAD_BYTES = 1000

    response = upload(client, b"x" * 5000)

    assert response.status_code == 413
    assert "limit" in response.content.decode()
    assert not Pack.objects.exists()


def test_htmx_upload_errors_come_back_as_the_form_fragment(client, uploader):
    response = upload(client, b"not an archive", HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith("<form")
    assert "The pack was not stored." in body


def test_the_pack_list_filters_by_search_and_family(client, make_pack):
    pack_import_folder(folder=make_pack({"id": "algebra", "version": 1}))
    free = {"id": "f1", "family": "tool_call", "input": {"goal": "x"}, "eval": {}}
    pack_import_folder(folder=make_pack({"id": "tools", "version": 1}, [free]))

    assert "algebra" in client.get(reverse("packs:list"), {"q": "alg"}).content.decode()
    assert "tools" not in client.get(reverse("packs:list"), {"q": "alg"}).content.decode()
    by_family = client.get(reverse("packs:list"), {"family": "tool_call"}).content.decode()
    assert "tools" in by_family and "algebra" not in by_family


def test_the_pack_list_says_what_to_do_when_empty(client):
    body = client.get(reverse("packs:list")).content.decode()

    assert "No packs yet" in body


def test_the_version_page_shows_the_visibility_map_and_contract(client, reference_packs):
    pack_import_folder(folder=reference_packs / "terminal-task-smoke")

    body = client.get(reverse("packs:version", args=["terminal-task-smoke", 1])).content.decode()

    assert "Visibility map" in body
    assert 'class="sq lane-evaluation_inputs"' in body
    assert 'class="sq lane-hidden"' in body
    assert "declares no contract section" in body


def test_the_task_page_shows_the_agent_payload_and_redacted_cards(client, reference_packs):
    pack_import_folder(folder=reference_packs / "mmlu-abstract-algebra-mini")
    url = reverse(
        "packs:task", args=["mmlu-abstract-algebra-mini", 1, "mmlu-abstract-algebra-mini/0"]
    )

    body = client.get(url).content.decode()

    assert "Find the degree for the given field extension" in body
    assert "&lt;redacted&gt;" in body
    assert "&quot;answer&quot;" not in body and '"answer"' not in body


def test_public_asset_files_download_and_sealed_ones_have_no_url(client, make_pack):
    row = mc_row("q1")
    row["assets"] = [{"path": "table.csv"}]
    folder = make_pack(
        {"id": "demo", "version": 1},
        [row],
        files={"assets/table.csv": "a,b\n", "hidden/secret.txt": "sealed\n"},
    )
    pack_import_folder(folder=folder)

    public = client.get(reverse("packs:public-file", args=["demo", 1, "table.csv"]))
    sealed = client.get(reverse("packs:public-file", args=["demo", 1, "secret.txt"]))

    assert public.status_code == 200
    assert b"".join(public.streaming_content) == b"a,b\n"
    assert "attachment" in public["Content-Disposition"]
    assert sealed.status_code == 404


def test_unknown_objects_answer_404(client):
    assert client.get(reverse("packs:detail", args=["nope"])).status_code == 404
    assert client.get(reverse("packs:version", args=["nope", 1])).status_code == 404


def test_the_form_upload_checks_csrf_and_passes_with_the_token(make_pack):
    user = User.objects.create_user("csrf-author", password="pw-for-tests-only")
    user.user_permissions.add(Permission.objects.get(codename="add_contractversion"))
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    browser.get(reverse("pack-upload"))
    token = browser.cookies["csrftoken"].value
    archive = zip_folder(make_pack({"id": "csrf-pack", "version": 1}))

    forged = browser.post(reverse("pack-upload"), {"archive": SimpleUploadedFile("p.zip", archive)})
    genuine = browser.post(
        reverse("pack-upload"),
        {"archive": SimpleUploadedFile("p.zip", archive), "csrfmiddlewaretoken": token},
    )

    assert forged.status_code == 403
    assert genuine.status_code == 302
    assert Pack.objects.filter(pack_id="csrf-pack").exists()


def test_invalid_json_shows_the_offending_line_with_the_column_marked(client, uploader, make_pack):
    folder = make_pack({"id": "typo", "version": 1})
    (folder / "tasks.jsonl").write_text('{"id": "q1", "family": "multiple_choice",}\n')

    body = upload(client, zip_folder(folder)).content.decode()

    assert "invalid JSON: Expecting property name enclosed in double quotes" in body
    assert '<pre class="excerpt" hx-disable>{&quot;id&quot;: &quot;q1&quot;' in body
    assert "\n" + " " * 41 + "^</pre>" in body
