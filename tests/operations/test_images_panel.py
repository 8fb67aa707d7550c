"""The operations page's images panel: the images published versions need, which live Docker
worker hosts have them, and an admin's "pull now", which every worker answers by pulling on
its own engine (a real worker, a real registry on loopback: tests/registry.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from operations.models import WorkerBeat
from packs.services import pack_import_folder
from tests.components import LOCAL_IMAGE
from tests.conftest import EXAMPLES, make_user
from tests.registry import LocalRegistry, pack_with_image, remove_image
from tests.runs.conftest import DockerRun, WorkerPool, wait_for
from verifiers.sandbox.docker_engine import image_present

PACK_IMAGE = "python:3.12-slim"  # what examples/python-functions names


def beat(node: str, host: str, images: list[str], sandbox: str = "docker") -> WorkerBeat:
    now = timezone.now()
    return WorkerBeat.objects.create(
        node=node, host=host, pid=1, sandbox=sandbox, images=images, started_at=now, last_seen=now
    )


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_panel_shows_which_hosts_have_each_needed_image_and_only_admins_may_pull() -> None:
    pack_import_folder(folder=EXAMPLES / "python-functions")
    beat("celery@a", "host-a", [PACK_IMAGE, "other:1"])
    beat("celery@b", "host-b", ["other:1"])
    beat("celery@c", "host-c", [], sandbox="bwrap")  # needs no image: not listed
    admin = signed_in(make_user("admin", superuser=True))
    reviewer = signed_in(make_user("rev", "reviewer"))

    page = admin.get(reverse("operations:overview")).content.decode()

    panel = page[page.index("<h2>Images</h2>") : page.index("<h2>Running")]
    row = panel[panel.index(PACK_IMAGE) :]
    row = row[: row.index("</tr>")]
    assert "host-a" in row and "host-b" in row and "host-c" not in row
    assert row.index("host-a") < row.index("host-b")  # on host-a, missing on host-b
    assert "Pull now" in row
    assert "Pull now" not in reviewer.get(reverse("operations:overview")).content.decode()
    url = reverse("operations:pull-image")
    assert reviewer.post(url, {"image": PACK_IMAGE}).status_code == 403
    # Only an image a published version needs: not a way to make workers pull anything.
    assert admin.post(url, {"image": "attacker/miner:latest"}).status_code == 400


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    served = LocalRegistry(tmp_path / "registry")
    served.folder.mkdir()
    served.start()
    yield served
    served.stop()


@pytest.mark.django_db(transaction=True)
def test_pull_now_makes_every_docker_worker_pull_and_the_panel_shows_it(
    docker_run: DockerRun, workers: WorkerPool, registry: LocalRegistry, tmp_path: Path
) -> None:
    image = registry.publish(LOCAL_IMAGE, "securebench-test/python", uuid.uuid4().hex[:12])
    try:
        pack_import_folder(folder=pack_with_image(tmp_path / "pack", image))
        workers.start(env={**docker_run.worker_env, "SECUREBENCH_HEARTBEAT_SECONDS": "1"})
        wait_for(lambda: WorkerBeat.objects.filter(sandbox="docker").exists(), 60, "a beat")
        admin = signed_in(make_user("admin", superuser=True))
        assert not image_present(docker_run.client, image)

        response = admin.post(reverse("operations:pull-image"), {"image": image})

        assert response.status_code == 302
        wait_for(lambda: image_present(docker_run.client, image), 120, "the pull")
        wait_for(
            lambda: image in WorkerBeat.objects.get(sandbox="docker").images,
            60,
            "the worker's heartbeat to list the image",
        )
        page = admin.get(reverse("operations:overview")).content.decode()
        row = page[page.index(image) :]
        row = row[: row.index("</tr>")]
        assert "Pull now" not in row, "no host misses it any more"
    finally:
        remove_image(image)
