"""A run's metrics from an uploaded evaluation's per-task values: means with a bootstrap
interval, from a seeded resampling that pages state, so the same results always give the
same numbers.

Each task contributes one value per metric (the mean of its samples' values, so a task with
many samples weighs as much as a task with one); the run's value is the mean over tasks that
have the metric. A result the program never saw because there was nothing to score (no
candidate, or one that broke the contract) counts as the metric's worst value, the declared
range's worse end; when the range has no worse end the metric has no honest run value and is
left out. Left out instead, such results would let a run that skips the tasks it cannot do
average over the ones it can. The 95 % interval is the percentile bootstrap over tasks,
``RESAMPLES`` draws from ``random.Random(seed)``. With a single task there is nothing to
resample: the task's own interval (when its program gave one) is the run's, else there is
none.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Aggregated:
    value: float
    ci_low: float | None
    ci_high: float | None
    interval: str  # how the interval was found, in words for the page

    def as_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "interval": self.interval,
        }


def bootstrap_seed(evaluation_key: str, run_id: int, metric: str) -> str:
    """The seed a page states: fixed by what is scored, so a re-count agrees."""
    return f"{evaluation_key}:run-{run_id}:{metric}"


class NoWorstValue(Exception):
    """A result with nothing to score, for a metric whose range has no worse end."""


def worst_value(direction: str, minimum: float | None, maximum: float | None) -> float | None:
    """The declared range's worse end (its minimum when higher is better), None if open."""
    return minimum if direction == "higher" else maximum


def per_task_values(
    results: Iterable[tuple[int, Mapping[str, Any]]],
    metric: str,
    *,
    unscored: Iterable[int] = (),
    worst: float | None = None,
) -> list[tuple[float, float | None, float | None]]:
    """(value, ci_low, ci_high) per task, samples averaged; tasks without the metric left out.

    ``results``: (task id, stored metrics) per scored result row. ``unscored``: the task id
    of each result with nothing to score (no candidate, a contract broken), each counting as
    ``worst``; NoWorstValue when there is one and ``worst`` is None."""
    by_task: dict[int, list[Mapping[str, Any]]] = {}
    for task_id in unscored:
        if worst is None:
            raise NoWorstValue(metric)
        by_task.setdefault(task_id, []).append({"value": worst})
    for task_id, metrics in results:
        data = metrics.get(metric) if isinstance(metrics, Mapping) else None
        if isinstance(data, Mapping) and isinstance(data.get("value"), int | float):
            by_task.setdefault(task_id, []).append(data)
    values: list[tuple[float, float | None, float | None]] = []
    for task_id in sorted(by_task):
        entries = by_task[task_id]
        mean = sum(float(entry["value"]) for entry in entries) / len(entries)
        single = entries[0] if len(entries) == 1 else {}
        values.append((mean, single.get("ci_low"), single.get("ci_high")))
    return values


def aggregate(
    values: list[tuple[float, float | None, float | None]], seed: str
) -> Aggregated | None:
    if not values:
        return None
    points = [value for value, _, _ in values]
    mean = sum(points) / len(points)
    if len(points) == 1:
        _, low, high = values[0]
        if low is None or high is None:
            return Aggregated(mean, None, None, "no interval (one task, none given)")
        return Aggregated(mean, float(low), float(high), "the evaluation's own (one task)")
    low, high = bootstrap_interval(points, seed)
    return Aggregated(
        mean,
        low,
        high,
        f"bootstrap over {len(points)} tasks, {RESAMPLES} resamples, seed '{seed}'",
    )


def bootstrap_interval(points: list[float], seed: str) -> tuple[float, float]:
    """The percentile bootstrap's 95 % interval of the mean."""
    rng = random.Random(seed)  # noqa: S311 - a stated, repeatable resampling, not a secret
    count = len(points)
    means = sorted(sum(rng.choices(points, k=count)) / count for _ in range(RESAMPLES))
    tail = (1.0 - LEVEL) / 2.0
    low_index = int(tail * RESAMPLES)
    high_index = min(RESAMPLES - 1, int((1.0 - tail) * RESAMPLES) - 1)
    return means[low_index], means[high_index]
