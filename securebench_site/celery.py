"""The Celery app: `celery -A securebench_site worker` starts a worker."""

from __future__ import annotations

import logging
import os

from celery import Celery
from celery.signals import worker_init, worker_process_shutdown

from operations import worker_control  # noqa: F401 - registers the "pull now" control command
from operations.heartbeat import Heartbeat
from securebench_site import broker  # noqa: F401 - registers the safe filesystem transport
from verifiers.sandbox import SandboxUnavailable
from verifiers.sandbox.docker_pool import drain_process_pool
from verifiers.staging import stage_all

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "securebench_site.settings")

logger = logging.getLogger(__name__)

app = Celery("securebench_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each app's background jobs are in its `jobs` module (`tasks` would read as the benchmark tasks).
app.autodiscover_tasks(related_name="jobs")
# Each worker writes a heartbeat (operations.heartbeat reads its models only once it runs).
app.steps["worker"].add(Heartbeat)


@app.on_after_configure.connect
def _prepare_filesystem_broker(sender: Celery, **kwargs: object) -> None:
    # kombu's filesystem transport expects its folders to exist; it is the embedded default.
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder"):
        folder = options.get(key)
        if folder:
            os.makedirs(folder, exist_ok=True)


@worker_init.connect
def _stage_trusted_files(**kwargs: object) -> None:
    # The files sandboxes mount are copied where the sandbox uid can read them (the checkout
    # may be private); a failure here is logged, and each verification tries again.
    try:
        logger.info("trusted sandbox files staged in %s", stage_all())
    except (SandboxUnavailable, OSError) as exc:
        logger.error("could not stage the trusted sandbox files: %s", exc)


@worker_process_shutdown.connect
def _drain_container_pool(**kwargs: object) -> None:
    # A pool process ends through billiard's own exit path, which skips `atexit`: its idle
    # containers (verifiers.sandbox.docker_pool) are removed here, on a warm or cold shutdown.
    # A SIGKILLed process leaves them to the stale-container janitor.
    drain_process_pool()
