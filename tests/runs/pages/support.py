"""Data and fixtures shared by the page tests (this folder):
contract versions, runs and evaluations made as the worker makes them, and a signed-in
viewer."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.models import (
    Evaluation,
    EvaluationStatus,
    ResultStatus,
    Run,
    RunSource,
    TaskResult,
    WorkQueue,
)
from runs.stats import wilson_interval
from tests.conftest import mc_row

MARK = "PRIVILEGED-MARK-9f3e"
PASSED, FAILED, ERROR = ResultStatus.PASSED, ResultStatus.FAILED, ResultStatus.ERROR
QUEUED, RUNNING, PENDING = ResultStatus.QUEUED, ResultStatus.RUNNING, ResultStatus.PENDING


# --- data ------------------------------------------------------------------------------------


def import_version(make_pack, pack_id: str = "demo", tasks: int = 4, version: int = 1, **extra):
    rows = [mc_row(f"q{i}") for i in range(1, tasks + 1)]
    rows += extra.get("rows", [])
    manifest = {"id": pack_id, "version": version, **extra.get("manifest", {})}
    return pack_import_folder(folder=make_pack(manifest, rows)).contract_version


def make_run(cv: ContractVersion, agent: str = "agent-a", **fields) -> Run:
    fields.setdefault("submitted_at", timezone.now())
    return Run.objects.create(
        contract_version=cv, agent_name=agent, source=RunSource.FORM, **fields
    )


def make_evaluation(
    run: Run,
    statuses: list[str],
    *,
    number: int = 1,
    done: bool | None = None,
    queue: str = WorkQueue.TEXT,
    **fields,
) -> Evaluation:
    """An evaluation with one result per status, on the version's tasks in order.

    Done (when every status is final) means the totals, score, interval and family summary are
    filled as the worker fills them."""
    tasks = list(run.contract_version.tasks.order_by("position")[: len(statuses)])
    assert len(tasks) == len(statuses)
    final = all(s in (PASSED, FAILED, ERROR, PENDING) for s in statuses)
    done = final if done is None else done
    evaluation = Evaluation.objects.create(
        run=run,
        number=number,
        evaluator="securebench@1",
        status=EvaluationStatus.DONE if done else EvaluationStatus.RUNNING,
        finished_at=timezone.now() if done else None,
    )
    lease = timezone.now() + timedelta(minutes=1)
    TaskResult.objects.bulk_create(
        TaskResult(
            evaluation=evaluation,
            task=task,
            family=task.family,
            position=task.position,
            queue=queue,
            status=status,
            score=1.0 if status == PASSED else 0.0,
            failure_reason="wrong_answer" if status == FAILED else "",
            duration_seconds=0.5 + task.position if status in (PASSED, FAILED) else None,
            lease_expires_at=lease if status == RUNNING else None,
        )
        for task, status in zip(tasks, statuses, strict=True)
    )
    if done:
        _fill_summary(evaluation, tasks, statuses)
    Evaluation.objects.filter(pk=evaluation.pk).update(**fields)
    evaluation.refresh_from_db()
    return evaluation


def _fill_summary(evaluation: Evaluation, tasks, statuses: list[str]) -> None:
    summary: dict[str, dict[str, int]] = {}
    for task, status in zip(tasks, statuses, strict=True):
        counts = summary.setdefault(
            task.family, {"total": 0, "passed": 0, "failed": 0, "error": 0, "pending": 0}
        )
        counts["total"] += 1
        counts[status] += 1
    passed = statuses.count(PASSED)
    interval = wilson_interval(passed, len(statuses))
    evaluation.total = len(statuses)
    evaluation.passed, evaluation.failed = passed, statuses.count(FAILED)
    evaluation.errored, evaluation.pending = statuses.count(ERROR), statuses.count(PENDING)
    evaluation.score = passed / len(statuses)
    evaluation.ci_low, evaluation.ci_high = interval.low, interval.high
    evaluation.family_summary = summary
    evaluation.save()


def user_with(name: str, *codenames: str) -> User:
    """A user who may browse (packs.browse), with the given extra permissions."""
    user = User.objects.create_user(name, password="pw-for-tests-only")
    for codename in ("browse", *codenames):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def page(client, url: str, **params) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def run_url(run: Run) -> str:
    return reverse("runs:detail", args=[run.pk])
