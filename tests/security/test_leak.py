"""No page, partial, API response or download shows a non-public value to an unprivileged user.

Every eval field and every hidden file of packs of all twelve families carries a unique marker;
the packs go in through the upload form; then a crawler follows every link, htmx partial and
API URL it can find, as each kind of user, and no response may contain a marker.
"""

from __future__ import annotations

import json
import re
from collections import deque
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from packs.models import ContractVersion, SealedValue
from runs.models import Run
from runs.pipeline import score_results
from runs.services import RunMetadata, run_submit_reference
from tests.conftest import zip_folder

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
]
SKIP_PREFIXES = ("/accounts/logout", "/static/", "/admin/logout")
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


@pytest.fixture
def stored_pack(client, marked_pack) -> ContractVersion:
    author = User.objects.create_user("author", password="pw-for-tests-only")
    author.user_permissions.add(Permission.objects.get(codename="add_contractversion"))
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


def crawl(client: Client) -> dict[str, int]:
    """GET every reachable same-site URL (and its htmx variant); returns url → status."""
    seen: dict[str, int] = {}
    queue = deque(START_URLS)
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
        return b"".join(response.streaming_content).decode("utf-8", "replace")
    return response.content.decode("utf-8", "replace")


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


@pytest.mark.parametrize("role", ["anonymous", "viewer", "uploader", "superuser"])
def test_no_page_api_partial_or_download_shows_a_sealed_value(
    client, stored_pack, scored_runs, role
):
    if role == "viewer":
        client.force_login(User.objects.create_user("viewer", password="pw-for-tests-only"))
    elif role == "uploader":
        client.force_login(User.objects.get(username="author"))
    elif role == "superuser":
        client.force_login(User.objects.create_superuser("root", password="pw-for-tests-only"))

    seen = crawl(client)

    task_pages = [url for url in seen if "/packs/leaky/v1/tasks/" in url]
    assert len(task_pages) >= len(marked_rows()), "the crawler must reach every task page"
    assert any("/api/v1/packs/leaky/versions/1/tasks/" in url for url in seen)
    assert any("/files/readme.txt" in url for url in seen)
    for run in scored_runs:
        result_pages = [url for url in seen if url.startswith(f"/runs/{run.pk}/results/")]
        assert len(result_pages) >= len(marked_rows()), "the crawler must reach every result"
        assert f"/api/v1/runs/{run.pk}/evaluations/1/results/" in seen
    assert all(status < 500 for status in seen.values())
