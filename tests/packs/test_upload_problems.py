"""An upload that fails names every problem found in one pass, in each place an author reads
it: the upload page, the API's error body and `import_pack`'s output (text and --json).

The pack used here has three problems: a manifest `version` that is a string, line 2 of
tasks.jsonl that is not JSON, and line 3 whose multiple-choice input has no `choices`.
Before one pass, the manifest's problem hid both rows' problems.
"""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from packs.models import Pack
from tests.conftest import make_user, mc_row, zip_folder

pytestmark = pytest.mark.django_db

BAD_MANIFEST = "id: three-problems\nversion: '1'\n"
NO_CHOICES = {**mc_row("q3"), "input": {"question": "?"}}
THREE_PROBLEMS = [
    (
        "manifest.yaml",
        "2",
        "version",
        "must be an integer of at least 1 (not a string or boolean)",
    ),
    (
        "tasks.jsonl",
        "2",
        "",
        "invalid JSON: Expecting property name enclosed in double quotes (column 2)",
    ),
    ("tasks.jsonl", "3", "input.choices", "is required (task 'q3', multiple_choice)"),
]
CAP = 50  # CompileLimits.max_problems, which the site does not override


def tasks_text(*lines: str | dict) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)


THREE_PROBLEM_TASKS = tasks_text(mc_row("q1"), "{oops", NO_CHOICES)
# 60 lines that are not JSON: 50 listed, 10 counted.
SIXTY_PROBLEM_TASKS = tasks_text(*["{oops"] * 60)


def write_pack(folder: Path, manifest: str, tasks: str) -> Path:
    folder.mkdir()
    (folder / "manifest.yaml").write_text(manifest, encoding="utf-8")
    (folder / "tasks.jsonl").write_text(tasks, encoding="utf-8")
    return folder


class ErrorSummary(HTMLParser):
    """What the page shows in its error summary: the text, and the problem table's rows as
    (file, line, field, message), with any quoted line (the excerpt) left out."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.rows: list[tuple[str, ...]] = []
        self._depth = 0  # <div> nesting inside the summary; 0 = outside it
        self._cells: list[str] | None = None
        self._in_pre = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div" and (self._depth or ("role", "alert") in attrs):
            self._depth += 1
        elif tag == "tr" and self._depth:
            self._cells = []
        elif tag == "td" and self._cells is not None:
            self._cells.append("")
        elif tag == "pre":
            self._in_pre = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._depth:
            self._depth -= 1
        elif tag == "tr" and self._cells:
            self.rows.append(tuple(cell.strip() for cell in self._cells))
            self._cells = None
        elif tag == "pre":
            self._in_pre = False

    def handle_data(self, data: str) -> None:
        if not self._depth:
            return
        self.text.append(data)
        if self._cells and not self._in_pre:
            self._cells[-1] += data

    @classmethod
    def of(cls, html: str) -> ErrorSummary:
        summary = cls()
        summary.feed(html)
        return summary

    @property
    def sentence(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.text)).strip()


@pytest.fixture
def author_client(client):
    client.force_login(make_user("author", "pack maintainer"))
    return client


def post_parts(client, manifest: str, tasks: str):
    page = client.get(reverse("pack-upload"))
    assert page.status_code == 200 and 'name="tasks"' in page.content.decode()
    return client.post(
        reverse("pack-upload"),
        {
            "manifest": SimpleUploadedFile("manifest.yaml", manifest.encode()),
            "tasks": SimpleUploadedFile("tasks.jsonl", tasks.encode()),
        },
    )


# --- the upload page ---------------------------------------------------------------------------


def test_the_upload_page_lists_the_manifest_problem_and_both_row_problems(author_client):
    response = post_parts(author_client, BAD_MANIFEST, THREE_PROBLEM_TASKS)

    summary = ErrorSummary.of(response.content.decode())
    assert response.status_code == 400
    assert summary.sentence.startswith("The pack was not stored.")
    assert "3 problems found:" in summary.sentence
    assert summary.rows == THREE_PROBLEMS
    assert not Pack.objects.exists()


def test_the_upload_page_shows_the_cap_and_counts_the_rest(author_client):
    response = post_parts(author_client, "id: many\nversion: 1\n", SIXTY_PROBLEM_TASKS)

    summary = ErrorSummary.of(response.content.decode())
    assert "60 problems found; the first 50 are listed:" in summary.sentence
    assert [row[1] for row in summary.rows] == [str(line) for line in range(1, CAP + 1)]
    assert "…and 10 more problems, not listed: fix these and upload again" in summary.sentence
    assert not Pack.objects.exists()


def test_a_pack_without_problems_still_uploads_from_the_page(author_client):
    response = post_parts(author_client, "id: fine\nversion: 1\n", tasks_text(mc_row("q1")))

    assert response.status_code == 302
    assert Pack.objects.get().pack_id == "fine"


# --- the API -----------------------------------------------------------------------------------


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=make_user("harness", "pack maintainer"))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def post_archive(api: APIClient, folder: Path):
    archive = SimpleUploadedFile("pack.zip", zip_folder(folder))
    return api.post("/api/v1/uploads/", {"archive": archive}, format="multipart")


def test_the_api_error_body_lists_every_problem_and_keeps_its_detail(api, tmp_path):
    response = post_archive(api, write_pack(tmp_path / "p", BAD_MANIFEST, THREE_PROBLEM_TASKS))

    body = response.json()
    assert response.status_code == 400
    assert body["detail"] == (
        "3 problems; the first: manifest.yaml, line 2, field version: must be an integer of at"
        " least 1 (not a string or boolean)"
    )
    listed = [(p["file"], str(p["line"]), p["field"] or "", p["message"]) for p in body["problems"]]
    assert listed == THREE_PROBLEMS
    assert body["problems"][1]["excerpt"] == "{oops" and body["problems"][1]["column"] == 2
    assert (body["problem_count"], body["more_problems"]) == (3, 0)
    assert not Pack.objects.exists()


def test_the_api_lists_up_to_the_cap_and_counts_the_rest(api, tmp_path):
    folder = write_pack(tmp_path / "p", "id: many\nversion: 1\n", SIXTY_PROBLEM_TASKS)

    body = post_archive(api, folder).json()

    assert len(body["problems"]) == CAP
    assert (body["problem_count"], body["more_problems"]) == (60, 10)
    assert body["detail"].startswith("60 problems; the first: tasks.jsonl, line 1: invalid JSON")


# --- import_pack -------------------------------------------------------------------------------


def import_pack(*args: str) -> tuple[str, str]:
    """(stdout, the CommandError's message) of a failing import_pack."""
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("import_pack", *args, stdout=out)
    return out.getvalue(), str(failed.value)


def test_import_pack_prints_one_line_per_problem(tmp_path):
    folder = write_pack(tmp_path / "p", BAD_MANIFEST, THREE_PROBLEM_TASKS)

    _, message = import_pack(str(folder))

    assert message.splitlines() == [
        f"{folder}: pack not stored, 3 problems:",
        "manifest.yaml, line 2, field version: must be an integer of at least 1"
        " (not a string or boolean)",
        "tasks.jsonl, line 2: invalid JSON: Expecting property name enclosed in double quotes"
        " (column 2)",
        "tasks.jsonl, line 3, field input.choices: is required (task 'q3', multiple_choice)",
    ]
    assert not Pack.objects.exists()


def test_import_pack_json_lists_every_problem_and_still_fails(tmp_path):
    folder = write_pack(tmp_path / "p", BAD_MANIFEST, THREE_PROBLEM_TASKS)

    out, message = import_pack(str(folder), "--json")

    answer = json.loads(out)
    assert answer["stored"] is False
    assert [(p["file"], p["line"], p["field"]) for p in answer["problems"]] == [
        ("manifest.yaml", 2, "version"),
        ("tasks.jsonl", 2, None),
        ("tasks.jsonl", 3, "input.choices"),
    ]
    assert (answer["problem_count"], answer["more_problems"]) == (3, 0)
    assert message == f"{folder}: pack not stored"


def test_import_pack_shows_the_cap_and_counts_the_rest(tmp_path):
    folder = write_pack(tmp_path / "p", "id: many\nversion: 1\n", SIXTY_PROBLEM_TASKS)

    _, message = import_pack(str(folder))

    lines = message.splitlines()
    assert lines[0] == f"{folder}: pack not stored, 60 problems:"
    assert len(lines) == 1 + CAP + 1
    assert lines[-1] == "and 10 more problems"
