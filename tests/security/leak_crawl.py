"""The crawler of the leak suites: every page, htmx partial, API operation and form a role can
reach, GET and POST, each response searched for markers in every encoding."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from django.test import Client

from tests.security.leak_markers import leaks_in
from tests.security.leak_world import HIDDEN_FILE_PATHS, LeakWorld

START_URLS = [
    "/",
    "/packs/",
    "/runs/",
    "/leaderboards/",
    "/runs/submit/",
    "/api/v1/packs/",
    "/api/v1/runs/",
    "/api/v1/schema/",
    "/admin/",
    "/upload/",
    "/audit/",
    "/evaluations/upload/",
    "/api/v1/evaluations/",
]
SKIP_PREFIXES = ("/accounts/logout", "/static/", "/admin/logout", "/debug-mode/off")
# Sort/filter variants of one admin list, and login pages with a `next`, repeat what was seen.
REPEAT_VARIANTS = re.compile(r"^/admin/.*(\?|/history/|/password/|/delete/)|^/accounts/login/\?")
LINK_ATTRS = re.compile(r'(?:href|src|hx-get|action)\s*=\s*"([^"#]+)"')
FORM = re.compile(r"<form\b([^>]*)>(.*?)</form>", re.DOTALL | re.IGNORECASE)
ATTR = re.compile(r'([\w:-]+)\s*=\s*"([^"]*)"')
FIELD = re.compile(r"<(input|textarea|select)\b([^>]*)>", re.IGNORECASE)
HX_POST = re.compile(r'hx-post\s*=\s*"([^"]+)"')


@dataclass(frozen=True)
class PostForm:
    """A form (or hx-post element) found on a page: where it posts and its named fields."""

    url: str
    fields: tuple[tuple[str, str], ...]
    multipart: bool


@dataclass
class Crawl:
    statuses: dict[str, int] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)
    forms: dict[str, PostForm] = field(default_factory=dict)


def response_text(response: Any) -> str:
    if getattr(response, "streaming", False):
        raw = b"".join(response.streaming_content)
    else:
        raw = response.content
    if raw.startswith(b"PK\x03\x04"):
        # A zip (the agent bundle) compresses its members: read each one, as a harness would.
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            return "\n".join(
                f"{name}\n{archive.read(name).decode('utf-8', 'replace')}"
                for name in archive.namelist()
            )
    return raw.decode("utf-8", "replace")


# Values made fresh for each response from a random source, never from stored data: the CSP
# nonce, the CSRF token (in a form's hidden field, or htmx's headers). By chance they may
# spell a marker, so they are left out of the
# search; nothing else is.
RANDOM_TOKENS = re.compile(
    r'nonce="[A-Za-z0-9+/=_-]*"'
    r'|name="csrfmiddlewaretoken" value="[A-Za-z0-9]*"'
    r'|"X-CSRFToken": "[A-Za-z0-9]*"'
)


def without_random_tokens(body: str) -> str:
    return RANDOM_TOKENS.sub("", body)


def assert_no_leak(where: str, response: Any, body: str | None = None) -> str:
    """The response's text, after checking it and its headers leak no marker in any form."""
    body = response_text(response) if body is None else body
    leaks = leaks_in(without_random_tokens(body))
    assert not leaks, f"{where} leaks {leaks}"
    # Content-Length is the body's size, counted by the server: a page of 17,319 bytes would
    # "contain" a numeric marker without carrying anything sealed.
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    header_leaks = leaks_in(json.dumps(headers, ensure_ascii=False))
    assert not header_leaks, f"{where} leaks {header_leaks} in a header"
    return body


def same_site(base: str, link: str) -> str | None:
    parts = urlsplit(urljoin(f"http://testserver{base}", link.replace("&amp;", "&")))
    if parts.netloc != "testserver":
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


def links_in(base: str, body: str) -> list[str]:
    found = [m.group(1) for m in LINK_ATTRS.finditer(body)]
    found += re.findall(r'"(https?://testserver/[^"\s]*)"', body)
    return [url for link in found if (url := same_site(base, link)) is not None]


def forms_in(base: str, body: str) -> list[PostForm]:
    """POST forms and hx-post elements, with their named fields and default values."""
    forms = []
    for match in FORM.finditer(body):
        attrs = dict(ATTR.findall(match.group(1)))
        target = attrs.get("hx-post") or (
            attrs.get("action", base) if attrs.get("method", "").lower() == "post" else None
        )
        if target is None or (url := same_site(base, target or base)) is None:
            continue
        fields = []
        for _tag, field_attrs in FIELD.findall(match.group(2)):
            named = dict(ATTR.findall(field_attrs))
            if "name" in named:
                fields.append((named["name"], named.get("value", "")))
        multipart = "multipart" in attrs.get("enctype", "") + attrs.get("hx-encoding", "")
        forms.append(PostForm(url, tuple(fields), multipart))
    # An hx-post on any other element (a button, a link) posts no fields.
    in_forms = {form.url for form in forms}
    for target in HX_POST.findall(body):
        url = same_site(base, target)
        if url is not None and url not in in_forms:
            forms.append(PostForm(url, (), False))
    return forms


def crawl(client: Client, extra: list[str] | None = None, *, expect_markers: bool = False) -> Crawl:
    """GET every reachable same-site URL, plain and as an htmx request; every response is
    checked for markers unless ``expect_markers`` (a privileged crawl keeps the bodies)."""
    result = Crawl()
    queue = deque([*START_URLS, *(extra or [])])
    while queue:
        url = queue.popleft()
        if url in result.statuses or url.startswith(SKIP_PREFIXES) or REPEAT_VARIANTS.match(url):
            continue
        assert len(result.statuses) < 3000, "the crawl is not converging"
        # htmx partials exist on site pages only; the admin and the API ignore the header.
        variants = (False,) if url.startswith(("/admin/", "/api/")) else (False, True)
        for htmx in variants:
            response = client.get(url, headers={"HX-Request": "true"} if htmx else {})
            body = response_text(response)
            if expect_markers:
                result.bodies[f"{url} htmx={htmx}"] = body
            else:
                assert_no_leak(f"GET {url} (htmx={htmx})", response, body)
            result.statuses[url] = response.status_code
            queue.extend(links_in(url, body))
            for form in forms_in(url, body):
                result.forms.setdefault(form.url, form)
    return result


# --- the OpenAPI schema ------------------------------------------------------------------------


def api_schema(world: LeakWorld) -> dict[str, Any]:
    """Read as a superuser: the endpoints to try must not depend on the role tested."""
    reader = world.client_for("superuser")
    response = reader.get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response_text(response))


def path_values(world: LeakWorld) -> dict[str, list[str]]:
    # A new path parameter fails the crawl until it is given values here: no endpoint
    # escapes the crawl unnoticed. File paths include the hidden ones: an attacker tries them.
    return {
        "pack_id": ["leaky"],
        "name": ["leaky-eval"],
        "version": ["1"],
        "run_id": [str(run.pk) for run in world.runs],
        "number": ["1"],
        "path": ["readme.txt", *HIDDEN_FILE_PATHS],
    }


def expand(template: str, values: dict[str, list[str]]) -> list[str]:
    expanded = [template]
    for name in re.findall(r"{(\w+)}", template):
        assert name in values, f"no crawl values for path parameter {name!r} of {template}"
        expanded = [url.replace(f"{{{name}}}", v) for url in expanded for v in values[name]]
    return expanded


def schema_operations(world: LeakWorld, method: str) -> list[tuple[str, str]]:
    """(operation id, url) of every operation of the schema with this method, ids filled."""
    schema = api_schema(world)
    values = path_values(world)
    return [
        (operations[method]["operationId"], url)
        for template, operations in schema["paths"].items()
        if method in operations
        for url in expand(template, values)
    ]


def schema_get_urls(world: LeakWorld) -> list[str]:
    return [url for _operation, url in schema_operations(world, "get")]
