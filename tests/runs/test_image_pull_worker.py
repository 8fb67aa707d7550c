"""A newcomer's Docker host without the pack's image: the worker pulls it the first time a
verification needs it (SECUREBENCH_IMAGE_PULL=missing, the default), the run page says the
result waits for that pull while it lasts, and the run is then scored as usual. The registry
is a real one on loopback (tests/registry.py), slowed down so the wait can be watched."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from packs.services import pack_import_folder
from runs.models import Evaluation, RunSource, TaskResult
from runs.services import RunMetadata, run_submit_reference
from tests.components import LOCAL_IMAGE
from tests.conftest import make_user
from tests.registry import LocalRegistry, pack_with_image, remove_image
from tests.runs.conftest import DockerRun, WorkerPool, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    served = LocalRegistry(tmp_path / "registry", manifest_delay=3.0)
    served.folder.mkdir()
    served.start()
    yield served
    served.stop()


def test_the_worker_pulls_a_missing_image_and_the_run_page_shows_the_wait(
    docker_run: DockerRun, workers: WorkerPool, registry: LocalRegistry, tmp_path: Path
) -> None:
    image = registry.publish(LOCAL_IMAGE, "securebench-test/python", uuid.uuid4().hex[:12])
    try:
        version = pack_import_folder(
            folder=pack_with_image(tmp_path / "pack", image)
        ).contract_version
        # No fallback image on this host: only a pull can give the pack's image.
        workers.start(env={**docker_run.worker_env, "SECUREBENCH_DEFAULT_IMAGE": ""})
        run, evaluation = run_submit_reference(
            contract_version=version,
            origin="oracle",
            metadata=RunMetadata(agent_name="oracle"),
            source=RunSource.COMMAND,
        )
        waiting = TaskResult.objects.filter(
            evaluation=evaluation, waiting_for__startswith="pulling"
        )
        wait_for(waiting.exists, 120, "a result waiting for the pull")
        assert waiting.first().waiting_for == f"pulling image {image}"
        reader = Client()
        reader.force_login(make_user("admin", superuser=True))
        progress = reader.get(
            reverse("runs:progress", args=[run.pk, evaluation.number]),
            headers={"HX-Request": "true"},
        )
        assert f"pulling image {image}" in progress.content.decode()

        wait_for(lambda: Evaluation.objects.get(pk=evaluation.pk).is_done, 300, "the run")

        results = TaskResult.objects.filter(evaluation=evaluation)
        assert set(results.values_list("status", flat=True)) == {"passed"}
        assert set(results.values_list("sandbox_image", flat=True)) == {image}
        assert set(results.values_list("waiting_for", flat=True)) == {""}
    finally:
        remove_image(image)
