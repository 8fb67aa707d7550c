"""What a finished report's health runs found: each task's results in the oracle, repeat,
null and attack runs judged by the shared rules (verifiers.pack_findings), plus the oracle's timing.

Runs in a worker. Verifier output is read only for the results that make a finding (an
oracle that did not pass, a null or attack that did, a verdict that flipped) and goes into
the finding's sealed evidence; attack names are worked out again for the attacks that passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pack_health.models import HealthCheck, HealthReport, HealthRun
from packs.models import Task
from packs.selectors import evaluator_lanes_for_tasks
from runs.models import ResultStatus, TaskResult
from verifiers import adversarial, pack_findings
from verifiers.pack_findings import Finding, Outcome

ID_CHUNK = 1000
# Verifier output kept as a finding's sealed evidence; the full log stays on the result.
MAX_OUTPUT_CHARS = 20_000


@dataclass(frozen=True)
class ResultRow:
    pk: int
    task_pk: int
    task_id: str
    position: int
    status: str
    reason: str
    seconds: float | None
    has_candidate: bool
    # Public facts of the worker that scored it: what an infrastructure error is explained by.
    backend: str = ""
    image: str = ""
    worker: str = ""


@dataclass
class Collected:
    findings: list[Finding] = field(default_factory=list)
    # Per finding (same index): public references to the results it is about.
    references: list[dict[str, Any]] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    task_pks: dict[str, int] = field(default_factory=dict)

    def add(self, found: Iterable[Finding], reference: dict[str, Any]) -> None:
        for finding in found:
            self.findings.append(finding)
            self.references.append(reference)


def _rows(run_id: int) -> dict[int, ResultRow]:
    """The run's first evaluation's results (sample 0), by task pk."""
    rows = TaskResult.objects.filter(
        evaluation__run_id=run_id, evaluation__number=1, sample=0
    ).values_list(
        "pk",
        "task_id",
        "task__task_id",
        "position",
        "status",
        "failure_reason",
        "duration_seconds",
        "candidate_id",
        "sandbox_backend",
        "sandbox_image",
        "worker",
    )
    return {
        row[1]: ResultRow(*row[:7], row[7] is not None, *row[8:])
        for row in rows.iterator(chunk_size=ID_CHUNK)
    }


def _outputs(result_pks: Iterable[int]) -> dict[int, str]:
    """Verifier output (stdout, stderr, details) of the given results: sealed text."""
    wanted = sorted(set(result_pks))
    found: dict[int, str] = {}
    for start in range(0, len(wanted), ID_CHUNK):
        chunk = wanted[start : start + ID_CHUNK]
        for pk, stdout, stderr, details in TaskResult.objects.filter(pk__in=chunk).values_list(
            "pk", "stdout", "stderr", "details"
        ):
            parts = [stdout, stderr]
            if details:
                parts.append(f"details: {details}")
            found[pk] = "\n".join(p for p in parts if p)[:MAX_OUTPUT_CHARS]
    return found


def _outcome(row: ResultRow | None, outputs: dict[int, str]) -> Outcome | None:
    """None when the task got no candidate in that run (no reference, no attack, ...)."""
    if row is None or not row.has_candidate:
        return None
    return Outcome(
        row.status,
        row.reason or None,
        float(row.seconds or 0.0),
        outputs.get(row.pk, ""),
        cause=_cause(row),
    )


def _cause(row: ResultRow) -> str:
    """An infrastructure error in words, from the result's public columns only (its sealed
    output is never read for this): the backend the worker had, the image it could not get
    and the worker's host (``host:pid``, as runs.pipeline.worker_name writes it)."""
    if row.status != ResultStatus.ERROR or row.reason not in pack_findings.INFRASTRUCTURE_REASONS:
        return ""
    host = row.worker.rpartition(":")[0] or row.worker
    return pack_findings.infrastructure_cause(
        row.reason, backend=row.backend, image=row.image, host=host
    )


def _runs_by_check(report: HealthReport) -> dict[str, list[HealthRun]]:
    runs: dict[str, list[HealthRun]] = {}
    for health_run in report.health_runs.order_by("slot", "id"):
        runs.setdefault(health_run.check_name, []).append(health_run)
    return runs


def _reference(run_id: int, row: ResultRow | None) -> dict[str, Any]:
    return {"run_id": run_id, "result_id": row.pk} if row is not None else {"run_id": run_id}


def collect(report: HealthReport) -> Collected:
    """Findings of the run-based checks, what each check covered, and the oracle's timing."""
    runs = _runs_by_check(report)
    collected = Collected()
    oracle = runs.get(HealthCheck.ORACLE, [None])[0]
    repeat = runs.get(HealthCheck.REPEAT, [None])[0]
    null = runs.get(HealthCheck.NULL, [None])[0]
    first = _rows(oracle.run_id) if oracle else {}
    second = _rows(repeat.run_id) if repeat else {}
    empty = _rows(null.run_id) if null else {}
    for rows in (first, second, empty):
        collected.task_pks.update({row.task_id: row.task_pk for row in rows.values()})

    # Output only where a rule is broken: the rest would never reach a finding.
    flipped = {
        pk
        for pk, row in first.items()
        if pk in second and second[pk].has_candidate and second[pk].status != row.status
    }
    outputs = _outputs(
        [r.pk for r in first.values() if r.has_candidate and r.status != ResultStatus.PASSED]
        + [r.pk for r in second.values() if r.has_candidate and r.status == ResultStatus.ERROR]
        + [result.pk for pk in flipped for result in (first[pk], second[pk])]
        + [r.pk for r in empty.values() if _broke(r)]
    )
    for task_pk, row in sorted(first.items(), key=lambda item: item[1].position):
        collected.add(
            pack_findings.oracle_findings(row.task_id, _outcome(row, outputs)),
            _reference(oracle.run_id, row),
        )
        if repeat is not None:
            again = second.get(task_pk)
            collected.add(
                pack_findings.repeat_findings(
                    row.task_id, _outcome(row, outputs), _outcome(again, outputs)
                ),
                {**_reference(repeat.run_id, again), "first_result_id": row.pk},
            )
    for row in sorted(empty.values(), key=lambda r: r.position):
        collected.add(
            pack_findings.null_findings(row.task_id, _outcome(row, outputs)),
            _reference(null.run_id, row),
        )
    collected.checked = {
        HealthCheck.ORACLE: sum(r.has_candidate for r in first.values()),
        # A first run that ended in an error leaves nothing to repeat (repeat_findings).
        HealthCheck.REPEAT: sum(
            r.has_candidate
            and r.status != ResultStatus.ERROR
            and second.get(pk) is not None
            and second[pk].has_candidate
            for pk, r in first.items()
        ),
        HealthCheck.NULL: sum(r.has_candidate for r in empty.values()),
        HealthCheck.ADVERSARIAL: 0,
    }
    for attack_run in runs.get(HealthCheck.ADVERSARIAL, []):
        collected.checked[HealthCheck.ADVERSARIAL] += _attack_findings(attack_run, collected)
    collected.timing = pack_findings.timing_summary(
        {
            r.task_id: float(r.seconds)
            for r in first.values()
            if r.has_candidate and r.seconds is not None
        }
    )
    return collected


def _broke(row: ResultRow) -> bool:
    """A null or attack result that breaks its rule (it must fail), or could not be checked."""
    return row.has_candidate and row.status in (ResultStatus.PASSED, ResultStatus.ERROR)


def _attack_findings(attack_run: HealthRun, collected: Collected) -> int:
    """Findings of one attack slot's run; returns how many attacks it tried."""
    rows = _rows(attack_run.run_id)
    collected.task_pks.update({row.task_id: row.task_pk for row in rows.values()})
    broke = sorted((r for r in rows.values() if _broke(r)), key=lambda r: r.position)
    outputs = _outputs(r.pk for r in broke)
    attacks = _attacks_of(attack_run.slot, [r.task_pk for r in broke])
    for row in broke:
        attack = attacks.get(row.task_pk)
        name = attack.name if attack else f"attack {attack_run.slot + 1}"
        about = attack.description if attack else ""
        collected.add(
            pack_findings.adversarial_findings(row.task_id, name, _outcome(row, outputs), about),
            _reference(attack_run.run_id, row),
        )
    return sum(r.has_candidate for r in rows.values())


def _attacks_of(slot: int, task_pks: list[int]) -> dict[int, adversarial.Attack]:
    """The attack each task got in this slot, built again from its lanes (they are fixed)."""
    found: dict[int, adversarial.Attack] = {}
    for chunk in _chunks(task_pks):
        tasks = list(Task.objects.filter(pk__in=chunk))
        for task_pk, lanes in evaluator_lanes_for_tasks(tasks).items():
            attacks = adversarial.attack_candidates(lanes)
            if slot < len(attacks):
                found[task_pk] = attacks[slot]
    return found


def _chunks(items: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(items), ID_CHUNK):
        yield items[start : start + ID_CHUNK]
