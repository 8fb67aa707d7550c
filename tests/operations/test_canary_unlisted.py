"""The site's canary pack is the operators' instrument, not a pack for users: it is listed on
/operations/ only (never on the pack list, the home page, the submit page, a leaderboard, a
run list or the API's listings, not even for an admin); its pages answer the reviewers and
admins who follow /operations/' links, and 404 for everyone else; its id cannot be taken by
an upload."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from operations.canary import CANARY_PACK_ID, canary_version
from runs.models import CandidateOrigin
from tests.conftest import make_user
from tests.operations.support import quiz, scored

pytestmark = pytest.mark.django_db

LISTINGS = {
    "pack list": "/packs/",
    "home page": "/",
    "submit page": "/runs/submit/",
    "leaderboards": "/leaderboards/",
    "run list": "/runs/",
    "API pack list": "/api/v1/packs/",
    "API run list": "/api/v1/runs/",
}


def signed_in(*roles: str, superuser: bool = False) -> Client:
    client = Client()
    client.force_login(make_user("-".join(roles) or "root", *roles, superuser=superuser))
    return client


@pytest.fixture
def canary_runs(broker, make_pack):
    """The canary's null run scored (its empty answers need no sandbox), beside a user's pack
    with a scored run of its own."""
    people = scored(quiz(make_pack), CandidateOrigin.ORACLE)
    canary = scored(canary_version(), CandidateOrigin.NULL)
    return people.run, canary.run


def test_no_listing_names_the_canary_even_for_an_admin(canary_runs):
    admin = signed_in(superuser=True)

    for name, url in LISTINGS.items():
        response = admin.get(url)
        assert response.status_code == 200, name
        body = response.content.decode()
        assert CANARY_PACK_ID not in body, name
        assert "site-canary" not in body, name  # the canary runs' agent
    assert "quiz" in admin.get("/packs/").content.decode()  # a user's pack still is listed
    # /operations/ is where it shows: its null run's failures, counted apart.
    operations = admin.get("/operations/").content.decode()
    assert re.search(r"Site canary: <strong>[1-9]", operations)


def test_its_pages_answer_reviewers_and_404_for_everyone_else(canary_runs):
    _people, canary = canary_runs
    pages = [
        reverse("packs:detail", args=[CANARY_PACK_ID]),
        reverse("packs:version", args=[CANARY_PACK_ID, 1]),
        reverse("runs:detail", args=[canary.pk]),
        f"/api/v1/packs/{CANARY_PACK_ID}/",
        f"/api/v1/runs/{canary.pk}/",
    ]
    reviewer = signed_in("reviewer")
    viewer = signed_in("viewer")
    submitter = signed_in("submitter")

    for url in pages:
        assert reviewer.get(url).status_code == 200, url
        assert viewer.get(url).status_code == 404, url
        assert submitter.get(url).status_code == 404, url


def test_an_upload_cannot_take_the_canarys_id(make_pack):
    folder = make_pack(
        {"id": CANARY_PACK_ID, "version": 1},
        [
            {
                "id": "q",
                "family": "multiple_choice",
                "input": {"question": "?", "choices": ["a", "b"]},
                "eval": {"answer": "a"},
            }
        ],
    )  # noqa: E501
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in folder.rglob("*"):
            archive.write(path, f"pack/{path.relative_to(folder)}")
    client = signed_in("pack maintainer")

    response = client.post(
        reverse("pack-upload"), {"archive": SimpleUploadedFile("pack.zip", buffer.getvalue())}
    )

    assert "reserved for the site" in response.content.decode()
    assert not canary_exists()


def canary_exists() -> bool:
    from packs.models import Pack  # noqa: PLC0415

    return Pack.objects.filter(pack_id=CANARY_PACK_ID).exists()
