"""Loaded before Django (``-p tests.parallel`` in pytest's options): gives each pytest-xdist
worker a broker of its own.

`make test` runs the suite in several processes at once. The embedded broker already lives in
each test's own folder, but a Redis broker is shared: two processes would purge each other's
queues, and one's Celery workers would take the other's messages (result ids of another
database). Each xdist process therefore gets its own Redis database number (1, 2, …; a run
without xdist keeps the URL as given). Django reads CELERY_BROKER_URL when its settings load,
which pytest-django does before any conftest, hence a plugin loaded first.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit


def worker_index() -> int | None:
    """0 for xdist's gw0, 1 for gw1, …; None outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else None


def broker_url_for_worker(url: str, index: int) -> str:
    """The same Redis server, database ``index + 1``; other brokers unchanged."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url
    return urlunsplit(parts._replace(path=f"/{index + 1}"))


_index = worker_index()
if _index is not None and os.environ.get("CELERY_BROKER_URL"):
    os.environ["CELERY_BROKER_URL"] = broker_url_for_worker(os.environ["CELERY_BROKER_URL"], _index)
