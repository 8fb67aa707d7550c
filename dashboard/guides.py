"""The guides of docs/ as pages of the site (/docs/NAME/), so that a page can link to the
section that explains it (``{% url 'dashboard:guide' 'authors' %}#what-is-a-draft``).

Only the Markdown files directly in docs/ whose name is a plain slug are guides: a name is
looked up among them, never joined onto a path, so no URL reaches another file. The guides are
our own files, but they are rendered as if they were not: raw HTML in them is shown as text,
and a link keeps its target only when it is a heading of the page, another guide, or a web
address; a link to any other file of the repository (which the site does not serve) is shown
as its path.
"""

from __future__ import annotations

import functools
import html
import re
import xml.etree.ElementTree as etree
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import markdown
from django.conf import settings
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from markdown.treeprocessors import Treeprocessor

NAME = re.compile(r"[a-z][a-z0-9-]*")
# The index lists these first, in this order (one guide per reader); any other guide follows.
READERS = ("authors", "agents", "operators", "security", "contributing")
WEB_SCHEMES = frozenset({"http", "https", "mailto"})
# toc: ids on every heading (the anchors pages link to) and a permalink beside each; tables
# with the `align` attribute, as the site's CSP refuses inline styles.
EXTENSIONS = ("toc", "fenced_code", "tables")
EXTENSION_CONFIGS = {
    "toc": {"permalink": "#", "permalink_class": "anchor", "permalink_title": "Link here"},
    "tables": {"use_align_attribute": True},
}


@dataclass(frozen=True)
class Section:
    """A heading of a guide, with the headings one level below it."""

    id: str
    title: str
    children: tuple[Section, ...] = ()


@dataclass(frozen=True)
class Guide:
    name: str
    title: str
    summary: SafeString  # the first paragraph, rendered
    body: SafeString  # the whole guide, rendered
    sections: tuple[Section, ...]  # the level-2 headings (and their level-3 ones)

    @property
    def short_title(self) -> str:
        """The title's head ("Pack authors" of "Pack authors: packs, contracts, …")."""
        return self.title.partition(":")[0]


def guides_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def guide_names() -> list[str]:
    """The guides there are, readers' guides first."""
    found = {
        path.stem
        for path in guides_dir().glob("*.md")
        if path.is_file() and NAME.fullmatch(path.stem)
    }
    return [name for name in READERS if name in found] + sorted(found - set(READERS))


def guide(name: str) -> Guide | None:
    """The guide called ``name``, or None when there is none."""
    if name not in guide_names():
        return None
    path = guides_dir() / f"{name}.md"
    return _rendered(str(path), path.stat().st_mtime_ns)


def all_guides() -> list[Guide]:
    return [found for name in guide_names() if (found := guide(name)) is not None]


def heading_ids(text: str) -> frozenset[str]:
    """The anchors a guide's headings get, for checking links against (the same settings as
    the pages, so a link that passes here lands on its section there)."""
    converter = _converter(lambda href: href)
    converter.convert(text)
    return frozenset(_all_ids(_sections(converter.toc_tokens, depth=6)))


# The file's modification time is part of the key: an edited guide is rendered again.
@functools.lru_cache(maxsize=32)
def _rendered(path: str, mtime_ns: int) -> Guide:
    del mtime_ns  # only part of the cache key
    name = Path(path).stem
    text = Path(path).read_text(encoding="utf-8")
    converter = _converter(site_href)
    body = converter.convert(text)
    tokens = converter.toc_tokens
    top = tokens[0] if len(tokens) == 1 and tokens[0]["level"] == 1 else None
    title = html.unescape(top["name"]) if top else name.capitalize()
    sections = _sections(top["children"] if top else tokens, depth=2)
    # Safe: the converter escapes raw HTML and keeps only the links site_href allows.
    return Guide(
        name=name,
        title=title,
        summary=mark_safe(_first_paragraph(body)),  # noqa: S308 - escaped by the converter
        body=mark_safe(body),  # noqa: S308 - escaped by the converter
        sections=sections,
    )


def _converter(link: Callable[[str], str | None]) -> markdown.Markdown:
    converter = markdown.Markdown(
        extensions=list(EXTENSIONS), extension_configs=EXTENSION_CONFIGS, output_format="html"
    )
    # Raw HTML, as a block or inline, is text: escaped like any other.
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    # After the inline patterns (priority 20) have made the links.
    converter.treeprocessors.register(SiteLinks(converter, link), "site_links", 10)
    return converter


class SiteLinks(Treeprocessor):
    """Gives each link its target on the site (see site_href): one with none is shown as the
    path it named. Tables get a scrolling frame, as on the site's other pages."""

    def __init__(self, md: markdown.Markdown, link: Callable[[str], str | None]) -> None:
        super().__init__(md)
        self.link = link

    def run(self, root: etree.Element) -> None:
        for element in root.iter("a"):
            target = self.link(element.get("href", ""))
            if target is None:
                element.tag = "span"
                element.set("class", "repo-path")
                element.set("title", "a file of the repository, not served by the site")
                del element.attrib["href"]
            else:
                element.set("href", target)
        for position, child in enumerate(list(root)):
            if child.tag == "table":
                frame = etree.Element("div", {"class": "table-wrap guide-table"})
                frame.append(child)
                root.remove(child)
                root.insert(position, frame)


def site_href(href: str) -> str | None:
    """Where a guide's link points on the site: the same heading, another guide's page (and
    heading), the guides' index for the README, a web address as it is; None for anything
    else (another file of the repository, an unknown scheme)."""
    parts = urlsplit(href)
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    if parts.scheme or parts.netloc:
        return href if parts.scheme in WEB_SCHEMES else None
    if not parts.path:
        return fragment or None
    path = parts.path.removeprefix("./")
    if path == "../README.md":
        return reverse("dashboard:guides")
    stem = path.removesuffix(".md")
    if path.endswith(".md") and stem in guide_names():
        return reverse("dashboard:guide", args=[stem]) + fragment
    return None


def _sections(tokens: list[dict], *, depth: int) -> tuple[Section, ...]:
    return tuple(
        Section(
            id=token["id"],
            title=html.unescape(token["name"]),
            children=_sections(token["children"], depth=depth - 1) if depth > 1 else (),
        )
        for token in tokens
    )


def _all_ids(sections: tuple[Section, ...]) -> list[str]:
    ids: list[str] = []
    for section in sections:
        ids += [section.id, *_all_ids(section.children)]
    return ids


def _first_paragraph(body: str) -> str:
    found = re.search(r"<p>(.*?)</p>", body, re.DOTALL)
    return found.group(1) if found else ""
