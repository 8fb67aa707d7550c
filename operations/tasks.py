"""Celery tasks of the operations layer (thin: the work is in operations.canary)."""

from __future__ import annotations

from celery import shared_task

from operations import canary


@shared_task(name="operations.tasks.run_canary", ignore_result=True)
def run_canary() -> int:
    return canary.canary_start().pk
