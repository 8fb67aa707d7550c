"""Caching headers: a fragment is never cached as the page it belongs to, and nothing shown
in debug mode stays in a browser cache after the mode (where it could be read again without
the server, and so without the audit log)."""

from __future__ import annotations

import pytest
from django.test import Client

from packs.services import pack_import_folder
from tests.conftest import make_user, mc_row

pytestmark = pytest.mark.django_db
PAGES = ["/packs/", "/packs/demo/v1/", "/packs/demo/v1/tasks/q1"]
PRIVILEGED = [
    "/privileged/packs/demo/v1/files/",
    "/privileged/packs/demo/v1/resource/?task=q1&name=answer",
]


@pytest.fixture
def reviewer_client(make_pack) -> Client:
    pack_import_folder(
        folder=make_pack({"id": "demo", "version": 1}, [mc_row("q1")]),
        uploaded_by=make_user("maint", "pack maintainer"),
    )
    client = Client()
    client.force_login(make_user("rev", "reviewer"))
    return client


@pytest.mark.parametrize("url", PAGES + PRIVILEGED)
def test_a_page_and_its_fragment_vary_on_the_htmx_header(reviewer_client, url):
    assert reviewer_client.post("/debug-mode/", {"reason": "checking a report"}).status_code == 302

    page = reviewer_client.get(url)
    fragment = reviewer_client.get(url, headers={"HX-Request": "true"})

    assert page.status_code == fragment.status_code == 200
    for response in (page, fragment):
        assert "HX-Request" in response.get("Vary", ""), (url, response.get("Vary"))


@pytest.mark.parametrize("url", PAGES + PRIVILEGED)
def test_whatever_is_answered_in_debug_mode_is_not_stored(reviewer_client, url):
    assert reviewer_client.post("/debug-mode/", {"reason": "checking a report"}).status_code == 302

    for headers in ({}, {"HX-Request": "true"}):
        response = reviewer_client.get(url, headers=headers)
        assert response.status_code == 200
        assert "no-store" in response.get("Cache-Control", ""), (url, headers)


@pytest.mark.parametrize("url", PAGES)
def test_pages_outside_debug_mode_keep_the_browsers_usual_caching(reviewer_client, url):
    response = reviewer_client.get(url)

    assert response.status_code == 200
    assert "no-store" not in response.get("Cache-Control", "")
