"""The guides of docs/ served at /docs/NAME/ (dashboard.guides): every guide renders inside the
site's pages with an anchor on each heading, the index lists them, an unknown name or a path
that reaches for another file is a 404, and a guide's raw HTML and foreign links never reach
the page as markup."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from dashboard import guides
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer() -> Client:
    client = Client()
    client.force_login(make_user("reader", "viewer"))
    return client


@pytest.mark.parametrize("name", guides.guide_names())
def test_every_guide_renders_in_the_site_with_an_anchor_on_each_heading(viewer: Client, name):
    response = viewer.get(f"/docs/{name}/")

    assert response.status_code == 200
    body = response.content.decode()
    assert 'class="topbar"' in body and 'href="/static/css/site.css"' in body
    text = (guides.guides_dir() / f"{name}.md").read_text()
    for anchor in guides.heading_ids(text):
        assert f'id="{anchor}"' in body and f'href="#{anchor}"' in body, anchor
    # Code blocks are <pre>, tables framed like the site's own; nothing left as Markdown.
    if "```" in text:
        assert "<pre><code" in body and "```" not in body
    if "|---|" in text:
        assert '<div class="table-wrap guide-table"><table>' in body


def test_a_section_is_one_address_away(viewer: Client):
    body = viewer.get(reverse("dashboard:guide", args=["authors"])).content.decode()

    assert reverse("dashboard:guide", args=["authors"]) == "/docs/authors/"
    assert '<h3 id="what-is-a-draft">What is a draft?' in body
    # Links between guides are links between the pages.
    assert 'href="/docs/agents/"' in body and 'href="/docs/security/#debug-mode"' in body


def test_the_index_lists_every_guide_with_its_first_paragraph(viewer: Client):
    response = viewer.get("/docs/")

    assert response.status_code == 200
    body = response.content.decode()
    for found in guides.all_guides():
        assert f'href="/docs/{found.name}/"' in body and found.title in body
    assert "This guide is for the people who write benchmark packs" in body


@pytest.mark.parametrize(
    "path",
    [
        "/docs/nothing/",
        "/docs/Authors/",
        "/docs/authors.md/",
        "/docs/../README.md",
        "/docs/%2e%2e/",
        "/docs/..%2fREADME/",
        "/docs/%2e%2e%2fREADME/",
        "/docs/authors/../../securebench_site/settings/",
        "/docs/README/",
        "/docs/agents/extra/",
    ],
)
def test_only_the_guides_of_docs_are_served(viewer: Client, path: str):
    response = viewer.get(path, follow=True)

    assert response.status_code == 404
    assert b"SECRET_KEY" not in response.content and b"# SecureBench site" not in response.content


def test_a_file_in_docs_that_is_not_a_guide_name_is_not_served(viewer: Client, settings, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n")
    (docs / "Secret_Notes.md").write_text("# Not a slug\n")
    (docs / "draft.txt").write_text("not Markdown\n")
    settings.BASE_DIR = tmp_path

    assert guides.guide_names() == ["notes"]
    assert viewer.get("/docs/notes/").status_code == 200
    for name in ("Secret_Notes", "secret_notes", "draft", "draft.txt"):
        assert viewer.get(f"/docs/{name}/").status_code == 404


def test_guides_are_open_to_anyone_and_linked_from_every_page(client: Client):
    # Signed out, or signed in without a role: the guides are the repository's own docs.
    page = client.get("/docs/authors/")
    assert page.status_code == 200
    assert 'href="/docs/"' in client.get("/accounts/login/").content.decode()

    no_role = Client()
    no_role.force_login(make_user("nobody"))
    assert no_role.get("/docs/security/").status_code == 200
    assert 'href="/docs/"' in no_role.get("/docs/").content.decode()


def write_guide(tmp_path: Path, settings, text: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "probe.md").write_text(text)
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## Part two\n")
    settings.BASE_DIR = tmp_path


def test_raw_html_in_a_guide_is_shown_as_text(viewer: Client, settings, tmp_path):
    write_guide(
        tmp_path,
        settings,
        "# Probe\n\n<script>alert(1)</script>\n\nInline <img src=x onerror=alert(2)> and "
        "<b>bold</b>; stored output shows `<redacted>` and <redacted>.\n\n"
        '<div onclick="alert(3)">\nblock\n</div>\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n',
    )

    body = viewer.get("/docs/probe/").content.decode()
    article = re.search(r'<article class="guide".*?</article>', body, re.S).group(0)

    assert "<script" not in article and "<img" not in article and "<div onclick" not in article
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in article
    assert "&lt;b&gt;bold&lt;/b&gt;" in article and "<code>&lt;redacted&gt;</code>" in article
    # The CSP refuses inline styles: table alignment is an attribute.
    assert 'align="left"' in article and "style=" not in article


def test_a_link_keeps_its_target_only_when_the_site_serves_it(viewer: Client, settings, tmp_path):
    write_guide(
        tmp_path,
        settings,
        "# Probe\n\n## Here\n\n[same page](#here) [other guide](other.md#part-two) "
        "[other, dot slash](./other.md) [readme](../README.md) [web](https://example.org/x) "
        "[results](../bench/RESULTS.md) [script](javascript:alert(1)) [data](data:text/html,x) "
        "[missing guide](missing.md#x) [settings](../securebench_site/settings.py)\n",
    )

    body = viewer.get("/docs/probe/").content.decode()
    links = re.findall(r'<a href="([^"]*)">([^<]*)</a>', body)
    spans = re.findall(r'<span class="repo-path"[^>]*>([^<]*)</span>', body)

    assert ("#here", "same page") in links
    assert ("/docs/other/#part-two", "other guide") in links
    assert ("/docs/other/", "other, dot slash") in links
    assert ("/docs/", "readme") in links
    assert ("https://example.org/x", "web") in links
    assert set(spans) == {"results", "script", "data", "missing guide", "settings"}
    assert "javascript:" not in body and "data:text" not in body


def test_an_edited_guide_is_rendered_again(viewer: Client, settings, tmp_path):
    write_guide(tmp_path, settings, "# Probe\n\nFirst words.\n")
    assert "First words." in viewer.get("/docs/probe/").content.decode()

    page = tmp_path / "docs" / "probe.md"
    page.write_text("# Probe\n\nSecond words.\n")
    stat = page.stat()
    os.utime(page, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    assert "Second words." in viewer.get("/docs/probe/").content.decode()
