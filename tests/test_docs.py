"""The README stays a front door and the guides of docs/ hold together: every guide link of the
templates lands on an existing guide and heading, every relative link of the README and the
guides on an existing file (and heading), every heading has the same anchor on GitHub and on
the site, and every repository path the guides name exists.

Anchors are computed with the site's own renderer (dashboard.guides), so a link that passes
here lands on its section at /docs/NAME/.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from dashboard import guides
from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
TEMPLATES = REPO_ROOT / "templates"
README_LIMIT = 12_000
# {% url 'dashboard:guide' 'authors' %}#what-is-a-draft, either quote style, anchor optional.
GUIDE_LINK = re.compile(
    r"""\{%\s*url\s+['"]dashboard:guide['"]\s+['"]([^'"]+)['"]\s*%\}(?:#([\w-]+))?"""
)
MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A repository path in a code span: a top-level folder of the checkout, then more of the path.
TOP_FOLDERS = (
    "bench",
    "dashboard",
    "deploy",
    "docs",
    "episodes",
    "examples",
    "job_queue",
    "operations",
    "pack_health",
    "packs",
    "runs",
    "securebench_site",
    "static",
    "templates",
    "tests",
    "verifiers",
)
REPO_PATH = re.compile(rf"`((?:{'|'.join(TOP_FOLDERS)})/[\w./-]*)`")

pytestmark = pytest.mark.database_independent


def documents() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """The text without its fenced code blocks (their brackets are not links)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def anchors_of(path: Path) -> frozenset[str]:
    return guides.heading_ids(path.read_text())


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\*", "", heading).strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def test_the_readme_is_a_front_door_of_at_most_12000_characters():
    length = len(README.read_text(encoding="utf-8"))

    assert length <= README_LIMIT, f"README.md is {length} characters: move sections to docs/"


def test_the_readme_links_to_every_guide():
    links = {target.split("#")[0] for target in MARKDOWN_LINK.findall(README.read_text())}

    assert {f"docs/{name}.md" for name in guides.guide_names()} <= links
    assert guides.guide_names()[:4] == ["authors", "agents", "operators", "security"]


def test_every_guide_link_of_the_templates_names_a_guide_and_a_heading_of_it():
    found = 0
    for template in sorted(TEMPLATES.rglob("*.html")):
        for name, anchor in GUIDE_LINK.findall(template.read_text()):
            found += 1
            where = f"{template.relative_to(REPO_ROOT)}: {name}#{anchor}"
            assert name in guides.guide_names(), f"{where}: no docs/{name}.md"
            if anchor:
                assert anchor in anchors_of(DOCS / f"{name}.md"), f"{where}: no such heading"
    # The pages that explain themselves: drafts, scoring, uploads, health, episodes, debug mode.
    assert found >= 15


def test_no_template_writes_a_guide_address_by_hand():
    for template in sorted(TEMPLATES.rglob("*.html")):
        assert not re.search(r"""href=["']/docs/""", template.read_text()), template


@pytest.mark.parametrize("document", documents(), ids=lambda path: path.name)
def test_every_relative_link_of_a_document_lands_on_a_file_and_heading(document: Path):
    for target in MARKDOWN_LINK.findall(prose(document.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.exists(), f"{document.name}: {target} names no file"
        if anchor:
            assert linked.suffix == ".md", f"{document.name}: {target}"
            assert anchor in anchors_of(linked), f"{document.name}: {target}: no such heading"


@pytest.mark.parametrize("document", documents(), ids=lambda path: path.name)
def test_every_heading_has_the_same_anchor_on_github_and_on_the_site(document: Path):
    """A link written once (docs/authors.md#scoring) must work in both places."""
    headings = re.findall(r"^#{1,6} (.+)$", prose(document.read_text()), re.M)

    assert {github_slug(heading) for heading in headings} == anchors_of(document)
    assert len(headings) == len(anchors_of(document)), f"{document.name}: a heading repeats"


@pytest.mark.parametrize("document", documents(), ids=lambda path: path.name)
def test_every_repository_path_a_document_names_exists(document: Path):
    for path in REPO_PATH.findall(document.read_text()):
        assert (REPO_ROOT / path).exists(), f"{document.name} names {path}, which is not there"
