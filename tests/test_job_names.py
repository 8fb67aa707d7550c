"""Background jobs are sent by name (job_queue.send_job), so a name must mean a job: every name
the code sends, routes or schedules is one a worker registers, and each app's jobs are named
after their app. A typo would otherwise be a message no worker ever takes, found only when a
submission sits queued."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.conf import settings

from securebench_site.celery import app

ROOT = Path(__file__).resolve().parent.parent
APPS = ("runs", "episodes", "pack_health", "operations")
# A job's name as the code spells it: "<app>.<function>".
JOB_NAME = re.compile(rf"^({'|'.join(APPS)})\.[a-z_]+$")

# Autodiscovery as a worker does it: Celery's Django fixup closes database connections there.
pytestmark = pytest.mark.django_db


def registered_jobs() -> set[str]:
    app.loader.import_default_modules()  # what a worker does at start: autodiscovery
    return {name for name in app.tasks if not name.startswith("celery.")}


def names_sent_in(path: Path) -> set[str]:
    """Job names handed to send_job: literals, constants, and the module's ``*_JOB`` constants."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    constants = {
        target.id: node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value.value, str)
    }
    sent: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "send_job":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant):
                sent.add(str(first.value))
            elif isinstance(first, ast.Name) and first.id in constants:
                sent.add(constants[first.id])
    # A helper that takes the name as a parameter is handed one of these constants.
    return sent | {value for name, value in constants.items() if name.endswith("_JOB")}


def all_names_sent() -> set[str]:
    return {
        name
        for package in (*APPS, "dashboard", "packs")
        for path in (ROOT / package).rglob("*.py")
        for name in names_sent_in(path)
    }


def test_every_name_sent_is_a_registered_job() -> None:
    sent = all_names_sent()
    assert sent, "no send_job call found: the scan is broken"
    assert sent - registered_jobs() == set()


def test_every_route_and_schedule_names_a_registered_job() -> None:
    jobs = registered_jobs()
    routed = set(settings.CELERY_TASK_ROUTES)
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert (routed | scheduled) - jobs == set()


def test_each_job_is_named_after_its_app() -> None:
    jobs = registered_jobs()
    assert jobs, "no job registered: autodiscovery is broken"
    assert {name for name in jobs if not JOB_NAME.match(name)} == set()
    for name in jobs:
        module = app.tasks[name].__module__
        assert module == f"{name.split('.')[0]}.jobs", (name, module)


def test_the_scan_sees_a_name_sent_through_a_constant(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        'JOB = "runs.no_such_job"\nsend_job(JOB, 1)\nsend_job("episodes.typo", 2)\n'
        'LATER_JOB = "runs.later"\n'
    )
    assert names_sent_in(probe) == {"runs.no_such_job", "episodes.typo", "runs.later"}
