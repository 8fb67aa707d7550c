"""The agent bundle: the same payloads as the task API, public assets, nothing sealed."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from packs.agent_bundle import folder_name
from packs.models import SealedValue
from packs.services import pack_import_folder
from tests.conftest import mc_row

pytestmark = pytest.mark.django_db

MARK = "BUNDLE-SEALED-MARK-71c2"


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("bundle-admin", password=None))
    return client


@pytest.fixture
def version(make_pack):
    with_assets = mc_row("set/q1", answer=MARK)
    with_assets["assets"] = [{"path": "data"}]
    folder = make_pack(
        {"id": "bundled", "version": 1},
        [with_assets, mc_row("set/q2", answer=MARK), mc_row("plain", answer=MARK)],
        files={
            "assets/data/a.csv": "x,y\n1,2\n",
            "assets/data/nested/b.txt": "b\n",
            "hidden/secret.txt": f"{MARK}\n",
        },
    )
    return pack_import_folder(folder=folder).contract_version


def download(api: APIClient) -> zipfile.ZipFile:
    response = api.get("/api/v1/packs/bundled/versions/1/agent-bundle/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "bundled-v1-agent-bundle.zip" in response["Content-Disposition"]
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


def test_the_bundle_holds_each_tasks_api_payload_under_its_indexed_folder(api, version):
    bundle = download(api)
    index = json.loads(bundle.read("index.json"))
    api_tasks = api.get("/api/v1/packs/bundled/versions/1/tasks/").json()["results"]

    assert index["pack"] == "bundled" and index["version"] == 1
    assert index["digest"] == version.digest and index["task_count"] == 3
    assert [t["task_id"] for t in index["tasks"]] == ["set/q1", "set/q2", "plain"]
    for entry, api_task in zip(index["tasks"], api_tasks, strict=True):
        assert entry["task_id"] == api_task["task_id"]
        assert entry["candidate_kind"] == api_task["candidate_kind"]
        assert json.loads(bundle.read(f"{entry['folder']}/task.json")) == api_task["payload"]
    folders = [t["folder"] for t in index["tasks"]]
    assert folders[2] == "tasks/plain"
    assert all("/" not in folder.removeprefix("tasks/") for folder in folders)


def test_the_bundle_carries_a_tasks_public_assets_only(api, version):
    bundle = download(api)
    folder = json.loads(bundle.read("index.json"))["tasks"][0]["folder"]

    assert bundle.read(f"{folder}/assets/data/a.csv") == b"x,y\n1,2\n"
    assert bundle.read(f"{folder}/assets/data/nested/b.txt") == b"b\n"
    assert sorted(n for n in bundle.namelist() if "/assets/" in n) == [
        f"{folder}/assets/data/a.csv",
        f"{folder}/assets/data/nested/b.txt",
    ]


def test_the_bundle_never_carries_a_sealed_value_or_hidden_file(api, version):
    assert MARK in json.dumps(list(SealedValue.objects.values_list("value", flat=True)))
    bundle = download(api)

    for name in bundle.namelist():
        assert MARK.encode() not in bundle.read(name), name
        assert "hidden" not in name and "secret" not in name


def test_the_same_version_always_gives_the_same_bytes(api, version):
    first = b"".join(api.get("/api/v1/packs/bundled/versions/1/agent-bundle/").streaming_content)
    again = b"".join(api.get("/api/v1/packs/bundled/versions/1/agent-bundle/").streaming_content)

    assert first == again


def test_the_version_links_its_bundle(api, version):
    detail = api.get("/api/v1/packs/bundled/versions/1/").json()

    assert detail["agent_bundle_url"].endswith("/api/v1/packs/bundled/versions/1/agent-bundle/")


def test_an_unknown_version_has_no_bundle(api, version):
    assert api.get("/api/v1/packs/bundled/versions/9/agent-bundle/").status_code == 404


@pytest.mark.database_independent
def test_folder_names_are_safe_distinct_and_deterministic():
    taken: set[str] = set()
    names = [folder_name(task_id, taken) for task_id in ("a/b", "a_b", "A_B", "..", "x" * 300)]

    assert names[0].startswith("a_b-") and names[1] == "a_b"
    assert names[2].startswith("A_B-")  # "a_b" is taken on a case-insensitive disk
    assert names[3].startswith("task-")
    assert len(names[4]) < 100
    assert len({name.casefold() for name in names}) == len(names)
    assert folder_name("a/b", set()) == names[0]
