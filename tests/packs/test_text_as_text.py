"""A task's text as a person reads it: a text's size in characters (bytes stay bytes for
files and JSON values), and its prompt and starter code on the task page and in a trajectory
as prose with its line breaks and highlighted code, never one escaped JSON string; hostile
text stays escaped."""

from __future__ import annotations

import importlib
import re

import pytest
from django.apps import apps
from django.test import Client
from django.urls import reverse

from episodes import lifecycle, services
from packs.models import Resource
from packs.services import pack_import_folder
from runs.models import RunSource, TaskResult
from runs.services import RunMetadata
from tests.conftest import make_user, mc_row

pytestmark = pytest.mark.django_db

STARTER = (
    "def add(a: int, b: int) -> int:\n"
    '    """Add two numbers.\n\n    >>> add(1, 2)\n    3\n    """\n'
)
PROMPT = "Write add(a, b).\nReturn their sum; <b>do not</b> print it."
CODE_ROW = {
    "id": "add",
    "family": "code_completion",
    "input": {"prompt": PROMPT, "language": "python", "starter_code": STARTER},
    "eval": {"tests": {"source": "inline", "code": "assert add(1, 2) == 3"}},
}


@pytest.fixture
def client(client):
    client.force_login(make_user("reader", "viewer"))
    return client


def section(body: str, element_id: str) -> str:
    """The HTML from the element with this id up to the raw payload behind "Exactly as sent"."""
    start = body.index(f'id="{element_id}"')
    return body[start : body.index("<details", start)]


def test_a_one_letter_answer_is_one_character_and_json_stays_in_bytes(client, make_pack):
    pack_import_folder(
        folder=make_pack({"id": "sizes", "version": 1}, [mc_row("q1", "B"), CODE_ROW])
    )

    def read(url: str) -> str:
        return client.get(url).content.decode().replace("\xa0", " ")

    mc = read(reverse("packs:task", args=["sizes", 1, "q1"]))
    code = read(reverse("packs:task", args=["sizes", 1, "add"]))
    matrix = read(reverse("packs:version", args=["sizes", 1]))

    assert "&lt;redacted&gt; · 1 character ·" in mc
    assert "3 bytes" not in mc
    # The tests value is a JSON object: its size stays the bytes of its encoding.
    tests_bytes = len(b'{"code":"assert add(1, 2) == 3","source":"inline"}')
    assert f"&lt;redacted&gt; · {tests_bytes} bytes ·" in code
    assert "answer · hidden · text · 1 character" in matrix


def test_sizes_stored_before_are_counted_again_in_characters(make_pack):
    version = pack_import_folder(
        folder=make_pack({"id": "old", "version": 1}, [mc_row("q1", "Été")])
    ).contract_version
    answer = Resource.objects.get(task__contract_version=version, name="answer")
    Resource.objects.filter(pk=answer.pk).update(size=len('"Été"'.encode()))  # as stored before

    migration = importlib.import_module("packs.migrations.0004_text_resource_sizes_in_characters")
    migration.text_sizes_in_characters(apps, None)

    answer.refresh_from_db()
    assert answer.size == 3


def test_the_task_page_shows_prose_as_text_and_code_highlighted(client, make_pack):
    pack_import_folder(folder=make_pack({"id": "readable", "version": 1}, [CODE_ROW]))

    body = client.get(reverse("packs:task", args=["readable", 1, "add"])).content.decode()
    payload = section(body, "agent-payload")

    # The prompt: escaped text keeping its line break, no JSON escapes.
    assert "Write add(a, b).\nReturn their sum; &lt;b&gt;do not&lt;/b&gt; print it." in payload
    assert "<b>do not</b>" not in body
    # The starter code: highlighted by Pygments, its docstring quotes as quotes.
    assert 'class="highlight"' in payload
    code_text = re.sub(r"<[^>]+>", "", payload)
    assert "def add(a: int, b: int) -&gt; int:" in code_text
    assert '"""Add two numbers.' in code_text
    for escaped in ("\\n", '\\"', "\\&quot;"):
        assert escaped not in payload
    # The exact task.json is still one click away.
    assert "Exactly as sent" in body


def test_a_trajectory_shows_the_task_as_text_and_code(make_pack):
    version = pack_import_folder(
        folder=make_pack({"id": "live-code", "version": 1}, [CODE_ROW])
    ).contract_version
    owner = make_user("sam", "submitter")
    opened = services.episode_run_open(
        contract_version=version,
        metadata=RunMetadata(agent_name="live-agent"),
        source=RunSource.FORM,
        user=owner,
    )
    episode, _secret = services.episode_spawn(opened.episode_run, {"metadata": {"id": "add"}})
    lifecycle.episode_reset(episode)
    lifecycle.episode_step(
        episode, method="cube/step", name="final_step", arguments={}, action_id=None
    )
    result = TaskResult.objects.get(evaluation__run=opened.run, task__task_id="add")
    client = Client()
    client.force_login(owner)

    body = client.get(reverse("episodes:trajectory", args=[opened.run.pk, result.pk]))
    payload = body.content.decode()
    task_part = payload[payload.index('<div class="part-label">task</div>') :]
    task_part = task_part[: task_part.index("<details>")]

    assert "Write add(a, b).\nReturn their sum; &lt;b&gt;do not&lt;/b&gt; print it." in task_part
    assert 'class="highlight"' in task_part
    assert '"""Add two numbers.' in re.sub(r"<[^>]+>", "", task_part)
    assert "Exactly as sent" in payload
