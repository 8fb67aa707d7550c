"""A draft stays unseen in what it says, not only at its own URL: its title and description
reach the pack list, the pack page, search and the API only once it is published, and an
upload gives a non-maintainer the same answer whether or not a draft holds that version."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from pack_health.services import version_publish
from packs.models import ContractVersion, Pack, VersionState
from packs.services import pack_import_folder
from tests.conftest import make_user, mc_row

pytestmark = pytest.mark.django_db

DRAFT_TITLE = "Unreleased pack title"
DRAFT_WORD = "zetaquorn"  # only in the draft's description


@pytest.fixture
def maintainer():
    return make_user("owner", "pack maintainer", "submitter")


@pytest.fixture
def draft(make_pack, settings, maintainer) -> ContractVersion:
    """gate v1 published, then v2 stored behind the gate (a real draft) with new wording."""
    manifest: dict[str, Any] = {"id": "gate", "title": "Gate pack", "description": "public"}
    pack_import_folder(
        folder=make_pack({**manifest, "version": 1}, [mc_row("q1")]), uploaded_by=maintainer
    )
    settings.SECUREBENCH_PUBLISH_GATE = True
    wording = {"title": DRAFT_TITLE, "description": f"moves the answers to {DRAFT_WORD}"}
    version = pack_import_folder(
        folder=make_pack({**manifest, **wording, "version": 2}, [mc_row("q1"), mc_row("q2")]),
        uploaded_by=maintainer,
    ).contract_version
    assert version.state == VersionState.DRAFT
    return version


def viewer() -> Client:
    client = Client()
    client.force_login(make_user("someone", "submitter"))
    return client


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def seen_by_a_viewer() -> dict[str, str]:
    client = viewer()
    api = api_for(make_user("bot", "submitter"))
    return {
        "list": client.get(reverse("packs:list")).content.decode(),
        "pack page": client.get(reverse("packs:detail", args=["gate"])).content.decode(),
        "search": client.get(reverse("packs:list") + f"?q={DRAFT_WORD}").content.decode(),
        "api": json.dumps(api.get(reverse("api-pack", args=["gate"])).json()),
        "api list": json.dumps(api.get(reverse("api-packs")).json()),
    }


def test_a_drafts_wording_is_not_shown_to_a_viewer(draft):
    seen = seen_by_a_viewer()

    search = seen.pop("search")  # its box holds the word searched for
    for where, text in seen.items():
        assert DRAFT_TITLE not in text, where
        assert DRAFT_WORD not in text, where
        assert "Gate pack" in text, where
    assert DRAFT_TITLE not in search
    assert 'href="/packs/gate/"' not in search  # the draft's words find nothing


def test_publishing_the_draft_brings_its_wording_to_everyone(draft, maintainer):
    version_publish(draft, maintainer, reason="checked by hand")

    seen = seen_by_a_viewer()

    assert DRAFT_TITLE in seen["list"] and DRAFT_TITLE in seen["api"]
    assert 'href="/packs/gate/"' in seen["search"]
    assert Pack.objects.get(pack_id="gate").latest_version == 2


def archive(version: int) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("manifest.yaml", f"id: gate\nversion: {version}\n")
        zipped.writestr("tasks.jsonl", json.dumps(mc_row("zz")) + "\n")
    return SimpleUploadedFile("pack.zip", buffer.getvalue())


def test_an_upload_tells_a_non_maintainer_nothing_of_a_draft(draft):
    rival = api_for(make_user("rival", "pack maintainer", "submitter"))

    answers = {
        version: rival.post(reverse("api-pack-upload"), {"archive": archive(version)})
        for version in (2, 3)  # 2: the draft's number; 3: no version at all
    }

    assert {answer.status_code for answer in answers.values()} == {409}
    details = {answer.json()["detail"] for answer in answers.values()}
    assert len(details) == 1, details
    assert "maintained by other users" in details.pop()
