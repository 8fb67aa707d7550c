"""The Celery app: `celery -A securebench_site worker` starts a worker."""

from __future__ import annotations

import os

from celery import Celery

from securebench_site import broker  # noqa: F401 - registers the safe filesystem transport

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "securebench_site.settings")

app = Celery("securebench_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _prepare_filesystem_broker(sender: Celery, **kwargs: object) -> None:
    # kombu's filesystem transport expects its folders to exist; it is the embedded default.
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder"):
        folder = options.get(key)
        if folder:
            os.makedirs(folder, exist_ok=True)
