"""Background jobs of the operations layer (Celery tasks sent by name, so nothing imports this
module): thin; the work is in operations.canary."""

from __future__ import annotations

from celery import shared_task

from operations import canary


@shared_task(name="operations.run_canary", ignore_result=True)
def run_canary() -> int:
    return canary.canary_start().pk
