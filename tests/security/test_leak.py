"""No page, partial, API response or download shows a non-public value to an unprivileged user.

Every eval field and every hidden file of packs of all twelve families carries a unique marker;
the packs go in through the upload form; then a crawler follows every link, htmx partial and
API URL it can find, as each role with debug mode off, and no response may contain a marker.
With debug mode on, a reviewer's crawl reaches the privileged panels: there every marker shows,
and every look was recorded in the audit log. The panels' URLs then stay shut for every other
role, and for the reviewer once debug mode is off.
"""

from __future__ import annotations

import html
import io
import json
import re
import zipfile
from collections import deque
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from packs.models import ContractVersion, SealedValue
from packs.services import pack_import_folder
from runs.models import AuditEvent, Run
from runs.pipeline import score_results
from runs.services import RunMetadata, run_submit_reference
from tests.conftest import make_user, mc_row, zip_folder

pytestmark = pytest.mark.django_db

MARK = "SEALEDMARK"
# Numbers cannot carry a text marker; these are odd enough never to appear by chance.
NUMERIC_MARKS = ("0.000731", "7319")
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
]
SKIP_PREFIXES = ("/accounts/logout", "/static/", "/admin/logout", "/debug-mode/off")
# Sort/filter variants of one admin list, and login pages with a `next`, repeat what was seen.
REPEAT_VARIANTS = re.compile(r"^/admin/.*(\?|/history/|/password/|/delete/)|^/accounts/login/\?")
LINK_ATTRS = re.compile(r'(?:href|src|hx-get|action)\s*=\s*"([^"#]+)"')


def mark(label: str) -> str:
    return f"{MARK}-{label}"


def marked_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": "mc",
            "family": "multiple_choice",
            "input": {"question": "Pick one", "choices": ["a", "b"]},
            "assets": [{"path": "readme.txt"}],
            "eval": {"answer": mark("mc-answer")},
        },
        {
            "id": "sa",
            "family": "short_answer",
            "input": {"question": "How many?"},
            "eval": {"accepted_answers": [mark("sa-accepted"), 7319], "tolerance": 0.000731},
        },
        {
            "id": "fr",
            "family": "free_response",
            "input": {"prompt": "Explain"},
            "eval": {
                "reference_answer": mark("fr-reference"),
                "rubric": {
                    "type": "contains_any",
                    "accepted_answers": [mark("fr-accepted")],
                    "rejected_answers": [mark("fr-rejected")],
                    "min_token_f1": 0.5,
                },
            },
        },
        {
            "id": "cc",
            "family": "code_completion",
            "input": {"prompt": "def f(): ...", "language": "python"},
            "eval": {
                "tests": {"source": "inline", "code": f"# {mark('cc-tests')}\nassert f()\n"},
                "canonical_solution": mark("cc-canonical"),
                "reference_solution": mark("cc-reference"),
            },
        },
        {
            "id": "rp",
            "family": "repo_patch",
            "input": {"repo": "demo", "base_commit": "a" * 40, "instructions": "Fix it"},
            "eval": {
                "tests": {
                    "source": "command",
                    "command": ["python3", "-m", "pytest", mark("rp-command")],
                    "test_patch": {"source": "inline", "patch": mark("rp-test-patch")},
                },
                "candidate_policy": {"allow_paths": [mark("rp-allow")]},
                "gold_patch": mark("rp-gold"),
            },
        },
        {
            "id": "tt",
            "family": "terminal_task",
            "input": {"instructions": "Make the file"},
            "eval": {
                "checker": {"source": "pytest", "path": "tt/tests", "timeout_seconds": 30},
                "run_tests": {"path": "tt/run-tests.sh"},
                "expected_state": {"path": "out.txt", "content": mark("tt-expected")},
            },
        },
        {
            "id": "tt-command",
            "family": "terminal_task",
            "input": {"instructions": "Other form"},
            "eval": {"checker": {"command": ["sh", "-c", mark("tt-command")]}},
        },
        *deferred_rows(),
    ]


def deferred_rows() -> list[dict[str, Any]]:
    eval_keys = {
        "tool_call": ["initial_state", "expected_calls", "expected_final_state"],
        "browser_task": ["credentials", "success_check"],
        "desktop_task": ["success_check"],
        "artifact_task": ["reference_artifact", "rubric"],
        "multimodal_qa": ["answer", "rubric"],
        "preference_pair": ["preference", "rubric"],
        "invented_family": ["anything"],
    }
    return [
        {
            "id": family,
            "family": family,
            "input": {"prompt": f"a {family} task"},
            "eval": {key: {"value": mark(f"{family}-{key}")} for key in keys}
            | {"unlisted_key": mark(f"{family}-unlisted")},
        }
        for family, keys in eval_keys.items()
    ]


@pytest.fixture
def marked_pack(make_pack) -> Path:
    return make_pack(
        {"id": "leaky", "version": 1, "title": "Leak test pack"},
        marked_rows(),
        files={
            "hidden/tt/tests/test_outputs.py": f"# {mark('tt-checker-file')}\n",
            "hidden/tt/run-tests.sh": f"echo {mark('tt-run-tests')}\n",
            "hidden/unreferenced.txt": mark("unreferenced-hidden-file"),
            "assets/readme.txt": "public asset\n",
        },
    )


def expected_markers(pack_folder: Path) -> set[str]:
    """Every marker of the pack: in its rows' eval values and in its hidden files."""
    text = (pack_folder / "tasks.jsonl").read_text()
    text += "\n".join(p.read_text() for p in (pack_folder / "hidden").rglob("*") if p.is_file())
    return set(re.findall(rf"{MARK}-[\w-]+", text))


@pytest.fixture
def stored_pack(client, marked_pack) -> ContractVersion:
    # The uploader becomes the pack's maintainer.
    author = make_user("author", "pack maintainer")
    client.force_login(author)
    response = client.post(
        "/upload/", {"archive": SimpleUploadedFile("leaky.zip", zip_folder(marked_pack))}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    client.logout()
    return ContractVersion.objects.get(pack__pack_id="leaky")


@pytest.fixture
def scored_runs(stored_pack) -> list[Run]:
    """An oracle run (its candidates are the sealed values themselves) and a null run, scored
    by the real pipeline code in this process: verdicts, details and logs all stored."""
    runs = []
    for origin in ("oracle", "null"):
        run, evaluation = run_submit_reference(
            contract_version=stored_pack,
            origin=origin,
            metadata=RunMetadata(agent_name=f"{origin}-agent"),
            source="command",
        )
        for _attempt in range(3):  # our own transient faults are retried, as a worker would
            queued = list(evaluation.results.filter(status="queued").values_list("pk", flat=True))
            score_results(queued, worker="leak-test")
        runs.append(run)
    statuses = [
        list(
            r.evaluations.get().results.values_list(
                "family", "status", "failure_reason", "attempts"
            )
        )
        for r in runs
    ]
    assert all(run.evaluations.get().is_done for run in runs), statuses
    return runs


# Values for the path parameters of the OpenAPI schema's operations. A new parameter name
# fails the test until it is given values here: no endpoint escapes the crawl unnoticed.
HIDDEN_FILE_PATHS = ("tt/tests/test_outputs.py", "tt/run-tests.sh", "unreferenced.txt")


def schema_urls(runs: list[Run]) -> list[str]:
    """Every GET operation the OpenAPI schema lists, with real ids filled in (and, for file
    paths, the hidden files' paths too: an attacker would try them). The schema is read as a
    superuser: the list of endpoints to try must not depend on the role being tested."""
    reader = Client()
    reader.force_login(make_user("schema-reader", superuser=True))
    response = reader.get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(response_text(response))
    values = {
        "pack_id": ["leaky"],
        "version": ["1"],
        "run_id": [str(run.pk) for run in runs],
        "number": ["1"],
        "path": ["readme.txt", *HIDDEN_FILE_PATHS],
    }
    urls = []
    for template, operations in schema["paths"].items():
        if "get" not in operations:
            continue
        expanded = [template]
        for name in re.findall(r"{(\w+)}", template):
            assert name in values, f"no crawl values for path parameter {name!r} of {template}"
            expanded = [url.replace(f"{{{name}}}", v) for url in expanded for v in values[name]]
        urls += expanded
    return urls


def crawl(client: Client, extra: list[str] | None = None) -> dict[str, int]:
    """GET every reachable same-site URL (and its htmx variant); returns url → status."""
    seen: dict[str, int] = {}
    queue = deque([*START_URLS, *(extra or [])])
    while queue:
        url = queue.popleft()
        if url in seen or url.startswith(SKIP_PREFIXES) or REPEAT_VARIANTS.match(url):
            continue
        assert len(seen) < 2000, "the crawl is not converging"
        # htmx partials exist on site pages only; the admin and the API ignore the header.
        variants = (False,) if url.startswith(("/admin/", "/api/")) else (False, True)
        for htmx in variants:
            headers = {"HX-Request": "true"} if htmx else {}
            response = client.get(url, headers=headers)
            body = response_text(response)
            assert_no_marker(url, body, response)
            seen[url] = response.status_code
            queue.extend(links_in(url, body))
    return seen


def response_text(response) -> str:
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


def assert_no_marker(url: str, body: str, response) -> None:
    headers = json.dumps(dict(response.headers))
    assert MARK not in body, f"{url} leaks a marker"
    assert MARK not in headers, f"{url} leaks a marker in a header"
    for number in NUMERIC_MARKS:
        # Delimited, so a digest that happens to contain the digits is no match.
        pattern = rf"(?<![\w.]){re.escape(number)}(?!\w)"
        assert not re.search(pattern, body), f"{url} leaks {number}"


def links_in(base: str, body: str) -> list[str]:
    found = [m.group(1).replace("&amp;", "&") for m in LINK_ATTRS.finditer(body)]
    found += re.findall(r'"(https?://testserver/[^"\s]*)"', body)
    links = []
    for link in found:
        absolute = urljoin(f"http://testserver{base}", link)
        parts = urlsplit(absolute)
        if parts.netloc == "testserver":
            links.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return links


def test_the_marked_values_really_are_stored(stored_pack):
    sealed = json.dumps(list(SealedValue.objects.values_list("value", flat=True)))

    assert sealed.count(MARK) >= 25
    assert stored_pack.task_count == len(marked_rows())


ROLES = [
    "anonymous",
    "no role",
    "viewer",
    "submitter",
    "maintainer of this pack",
    "maintainer of another pack",
    "reviewer",
    "superuser",
]


def sign_in(client: Client, role: str, make_pack) -> User | None:
    """A user of the role, signed in (debug mode off), or None for anonymous."""
    if role == "anonymous":
        return None
    if role == "maintainer of this pack":
        user = User.objects.get(username="author")
    elif role == "maintainer of another pack":
        user = make_user("other-maintainer", "pack maintainer")
        other = pack_import_folder(folder=make_pack({"id": "other", "version": 1}, [mc_row("q")]))
        other.contract_version.pack.maintainers.add(user)
    elif role == "superuser":
        user = make_user("root", superuser=True)
    else:
        roles = {"no role": (), "viewer": ("viewer",), "submitter": ("submitter",)}
        user = make_user(role.replace(" ", "-"), *roles.get(role, (role,)))
    client.force_login(user)
    return user


def switch_debug_mode_on(client: Client, reason: str) -> None:
    response = client.post("/debug-mode/", {"reason": reason, "next": "/packs/"})
    assert response.status_code == 302, response.content.decode()[:2000]


@pytest.mark.parametrize("role", ROLES)
def test_no_page_api_partial_or_download_shows_a_sealed_value(
    client, stored_pack, scored_runs, make_pack, role
):
    sign_in(client, role, make_pack)

    seen = crawl(client, schema_urls(scored_runs))

    if role in ("anonymous", "no role"):
        # Nothing but the sign-in page (anonymous) or 403s (an account without a role).
        assert not any("/packs/leaky/" in url and status == 200 for url, status in seen.items())
        assert all(status < 500 for status in seen.values())
        return

    task_pages = [url for url in seen if "/packs/leaky/v1/tasks/" in url]
    assert len(task_pages) >= len(marked_rows()), "the crawler must reach every task page"
    assert any("/api/v1/packs/leaky/versions/1/tasks/" in url for url in seen)
    assert any("/files/readme.txt" in url for url in seen)
    bundle = "/api/v1/packs/leaky/versions/1/agent-bundle/"
    assert seen.get(bundle) == 200, "the agent bundle was not crawled"
    for path in HIDDEN_FILE_PATHS:
        assert seen[f"/api/v1/packs/leaky/versions/1/files/{path}"] == 404
    for run in scored_runs:
        result_pages = [url for url in seen if url.startswith(f"/runs/{run.pk}/results/")]
        assert len(result_pages) >= len(marked_rows()), "the crawler must reach every result"
        assert f"/api/v1/runs/{run.pk}/evaluations/1/results/" in seen
    assert all(status < 500 for status in seen.values())


def test_a_reviewer_in_debug_mode_sees_every_marker_and_every_look_is_audited(
    client, marked_pack, stored_pack, scored_runs, make_pack
):
    reviewer = make_user("reviewer", "reviewer")
    client.force_login(reviewer)
    switch_debug_mode_on(client, "leak test: checking the privileged panels")

    seen, bodies = crawl_privileged(client)

    # Highlighted code splits a marker into tokens: read the text, as the reviewer does.
    text = html.unescape(re.sub(r"<[^>]+>", "", "\n".join(bodies.values())))
    shown = set(re.findall(rf"{MARK}-[\w-]+", text))
    assert expected_markers(marked_pack) <= shown
    privileged = [url for url in seen if "/privileged/" in url]
    assert any("/resource/" in url for url in privileged)
    assert any("/file/" in url for url in privileged)
    assert any(url.endswith("/privileged/logs/") for url in privileged)
    assert any(url.endswith("/privileged/candidate/") for url in privileged)
    assert all(status < 500 for status in seen.values())
    events = AuditEvent.objects.filter(user=reviewer)
    assert events.filter(action="debug_mode_on").count() == 1
    assert events.filter(action="view_resource", pack_id="leaky").count() >= len(
        SealedValue.objects.filter(resource__task__contract_version=stored_pack)
    )
    assert events.filter(action="view_file").exists()
    assert events.filter(action="view_logs").exists() and events.filter(action="view_candidate")
    assert events.exclude(reason="leak test: checking the privileged panels").count() == 0
    assert set(events.values_list("ip_address", flat=True)) == {"127.0.0.1"}

    # The same URLs, as every other role (debug mode off) and as the reviewer after switching
    # it off: never a 200, never a marker.
    assert client.post("/debug-mode/off/").status_code == 302
    closed = {"reviewer (off)": client}
    for role in ROLES:
        if role == "reviewer":
            continue
        other = Client()
        sign_in(other, role, make_pack)
        closed[role] = other
    for role, other in closed.items():
        for url in privileged:
            for headers in ({}, {"HX-Request": "true"}):
                response = other.get(url, headers=headers)
                assert response.status_code in (302, 403, 404), (role, url, response.status_code)
                assert_no_marker(url, response_text(response), response)


def crawl_privileged(client: Client) -> tuple[dict[str, int], dict[str, str]]:
    """The crawl of a user in debug mode: markers are expected, bodies are kept."""
    seen: dict[str, int] = {}
    bodies: dict[str, str] = {}
    queue = deque(START_URLS)
    while queue:
        url = queue.popleft()
        if url in seen or url.startswith(SKIP_PREFIXES) or REPEAT_VARIANTS.match(url):
            continue
        assert len(seen) < 3000, "the crawl is not converging"
        variants = (False,) if url.startswith(("/admin/", "/api/")) else (False, True)
        for htmx in variants:
            response = client.get(url, headers={"HX-Request": "true"} if htmx else {})
            body = response_text(response)
            seen[url] = response.status_code
            bodies[f"{url} htmx={htmx}"] = body
            queue.extend(links_in(url, body))
    return seen, bodies
