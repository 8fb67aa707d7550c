"""Sending background jobs by name, so no module imports the Celery job modules.

Each app's ``jobs.py`` sits on top of its app: it imports the services that do the work, and
nothing imports it. The modules that queue work name the job instead (``"runs.reap_leases"``),
and Celery routes it by that name (``CELERY_TASK_ROUTES``). A lost message is never fatal:
every job has a sweep that sends it again, so a broker that cannot be reached is logged and
reported as ``False``.
"""

from __future__ import annotations

import logging

from celery import current_app
from kombu.exceptions import KombuError

logger = logging.getLogger(__name__)


def send_job(name: str, *args: object) -> bool:
    """Queue the job registered as ``name`` with ``args``; False if the broker refused it."""
    try:
        current_app.send_task(name, args=list(args))
    except (KombuError, OSError, ConnectionError) as exc:
        logger.warning("could not send %s%r: %s", name, args, exc)
        return False
    return True
