"""Error rates: the share of final results an error of ours left unjudged, by one dimension
(run, contract version, worker host, sandbox backend, reason).

One grouped query per dimension, shared by the operations page, /metrics, the run page and a
pack's health report, so each says the same rate for the same results. A rate is over final
results (passed, failed, error, pending): open work has no verdict yet and cannot have
errored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import CharField, Count, F, Q, QuerySet, Value
from django.db.models.functions import Concat

from runs.models import FINAL_STATUSES, Evaluation, ResultStatus, TaskResult

# Dimension name → the result field it groups by. A worker's name is "celery@host" (or a
# name of its own): the host is what an operator repairs, so rates are by the whole name.
DIMENSIONS: dict[str, str] = {
    "run": "evaluation__run_id",
    "contract_version": "contract_version_label",
    "worker": "worker",
    "backend": "sandbox_backend",
    "reason": "failure_reason",
}
LABELS: dict[str, str] = {
    "run": "Run",
    "contract_version": "Contract version",
    "worker": "Worker host",
    "backend": "Sandbox backend",
    "reason": "Reason",
}
UNKNOWN = "—"  # a result with no worker, backend or reason recorded


@dataclass(frozen=True)
class ErrorRate:
    dimension: str
    value: str
    errors: int
    results: int

    @property
    def rate(self) -> float:
        return self.errors / self.results if self.results else 0.0

    @property
    def label(self) -> str:
        return LABELS[self.dimension]

    @property
    def percent(self) -> str:
        return f"{100 * self.rate:.1f} %"


def error_rates(results: QuerySet[TaskResult], dimension: str) -> list[ErrorRate]:
    """Rates by one dimension over the final results given, highest error count first. By
    reason, each row counts one reason's errors over every final result (so the rows add up
    to the overall rate); a reason that only failures carry is left out."""
    field = DIMENSIONS[dimension]
    final = results.filter(status__in=FINAL_STATUSES)
    if dimension == "reason":
        total = final.count()
        rows = (
            final.filter(status=ResultStatus.ERROR)
            .values("failure_reason")
            .annotate(errors=Count("id"))
            .order_by("-errors", "failure_reason")
        )
        return [
            ErrorRate(dimension, row["failure_reason"] or UNKNOWN, row["errors"], total)
            for row in rows
        ]
    if dimension == "contract_version":
        final = final.annotate(
            contract_version_label=Concat(
                F("evaluation__run__contract_version__pack__pack_id"),
                Value(" v"),
                F("evaluation__run__contract_version__version"),
                output_field=CharField(),
            )
        )
    rows = (
        final.values(field)
        .annotate(errors=Count("id", filter=Q(status=ResultStatus.ERROR)), results=Count("id"))
        .order_by("-errors", field)
    )
    return [
        ErrorRate(dimension, str(row[field] or UNKNOWN), row["errors"], row["results"])
        for row in rows
    ]


def error_rates_since(
    since: datetime, dimensions: tuple[str, ...] = tuple(DIMENSIONS)
) -> dict[str, list[ErrorRate]]:
    """Every dimension's rates over the results finished since ``since``, rows with errors
    only (a page lists where errors happen, not every healthy worker)."""
    recent = TaskResult.objects.filter(finished_at__gte=since)
    return {
        dimension: [row for row in error_rates(recent, dimension) if row.errors]
        for dimension in dimensions
    }


def evaluation_error_rates(evaluation: Evaluation) -> dict[str, list[ErrorRate]]:
    """Where one evaluation's errors happened (worker host, sandbox backend, reason); empty
    when none of its results errored, so a clean run's page shows no table. A done
    evaluation's summary already counts its errors: no query for a clean one."""
    if evaluation.is_done:
        if not evaluation.errored:
            return {}
    elif not evaluation.results.filter(status=ResultStatus.ERROR).exists():
        return {}
    results = evaluation.results.all()
    return {d: error_rates(results, d) for d in ("reason", "worker", "backend")}


def runs_error_rates(run_ids: list[int]) -> dict[str, list[ErrorRate]]:
    """Where the errors of some runs' first evaluations happened (a pack's health runs):
    every dimension, rows with errors only; empty when none errored."""
    results = TaskResult.objects.filter(evaluation__run_id__in=run_ids, evaluation__number=1)
    if not results.filter(status=ResultStatus.ERROR).exists():
        return {}
    return {d: [row for row in error_rates(results, d) if row.errors] for d in DIMENSIONS}
