"""The images published versions need, which live Docker worker hosts hold them, and an
admin's "pull now" (a broadcast every worker answers by pulling on its own engine)."""

from __future__ import annotations

from dataclasses import dataclass

from celery import current_app

from operations.models import WorkerBeat
from operations.worker_control import PULL_COMMAND
from packs.models import Task, VersionState

IMAGE_LIMIT = 50


@dataclass(frozen=True)
class ImageRow:
    image: str
    held_by: list[str]  # worker hosts whose engine has it
    missing_on: list[str]  # live Docker worker hosts whose engine does not


def images_needed(limit: int = IMAGE_LIMIT) -> list[str]:
    """Every image a task of a published version names, in name order."""
    names = (
        Task.objects.filter(contract_version__state=VersionState.PUBLISHED)
        .exclude(environment__image=None)
        .values_list("environment__image", flat=True)
        .distinct()
        .order_by("environment__image")
    )
    return [name for name in names[:limit] if isinstance(name, str) and name.strip()]


def image_rows(alive: list[WorkerBeat], needed: list[str] | None = None) -> list[ImageRow]:
    docker_hosts = [beat for beat in alive if beat.sandbox == "docker"]
    rows = []
    for image in images_needed() if needed is None else needed:
        held = sorted({beat.host for beat in docker_hosts if image in (beat.images or [])})
        missing = sorted({beat.host for beat in docker_hosts} - set(held))
        rows.append(ImageRow(image, held, missing))
    return rows


def request_pull(image: str) -> None:
    """Ask every worker to pull ``image`` now (workers without Docker ignore it)."""
    # The project's Celery app, current once Django is set up (operations sits below it).
    current_app.control.broadcast(PULL_COMMAND, arguments={"image": image})
