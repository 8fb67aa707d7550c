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


# --- every collected test reports ---------------------------------------------------------------
# A test that never reports (a worker that went away quietly, a test that was never scheduled)
# must not let a run pass: the controller compares what the workers collected with what they
# reported, and fails the run naming the tests that never ran.

_collected: set[str] = set()
_reported: set[str] = set()


def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    _collected.update(ids)


def pytest_runtest_logreport(report: object) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the controller sees every worker's
        _reported.add(report.nodeid)  # type: ignore[attr-defined]


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    missing = sorted(_collected - _reported)
    if missing:
        listed = "\n  ".join(missing[:50])
        print(f"\n{len(missing)} collected tests never reported a result:\n  {listed}")
        session.exitstatus = 1  # type: ignore[attr-defined]
