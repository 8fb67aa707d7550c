"""/metrics: the operations figures in the Prometheus text format, read at each scrape.

A collector of our own over the database (prometheus_client's custom-collector interface), so
every web process answers the same numbers whichever one the scraper reaches: no counter lives
in a process's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from operations import selectors
from operations.canary import canary_status

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
PREFIX = "securebench"


class SiteCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        rows = selectors.queues()
        yield _per_queue(
            "queue_waiting", "Work waiting for a worker, per queue.", rows, lambda r: r.waiting
        )
        yield _per_queue(
            "queue_running", "Work being done by a worker, per queue.", rows, lambda r: r.running
        )
        yield _per_queue(
            "queue_oldest_waiting_seconds",
            "How long the oldest waiting item of each queue has waited (0 when none waits).",
            rows,
            lambda r: r.waited_seconds(now) or 0.0,
        )
        stalled = {stall.queue for stall in selectors.stalls(rows, now)}
        yield _per_queue(
            "queue_stalled",
            "1 when work has waited past the stall threshold and no worker claimed any.",
            rows,
            lambda r: float(r.name in stalled),
        )
        alive, _gone = selectors.workers(now)
        yield GaugeMetricFamily(
            f"{PREFIX}_workers_alive", "Workers whose heartbeat is recent.", value=len(alive)
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_leases_expired",
            "Running results whose lease ran out (their worker died; the reaper requeues them).",
            value=selectors.expired_leases(now),
        )
        yield _results_by_status()
        yield _durations()
        yield from _canary()


def _per_queue(
    name: str,
    documentation: str,
    rows: list[selectors.QueueRow],
    value: Callable[[selectors.QueueRow], float],
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{PREFIX}_{name}", documentation, labels=["queue"])
    for row in rows:
        family.add_metric([row.name], float(value(row)))
    return family


def _results_by_status() -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        f"{PREFIX}_results",
        "Task results stored, by status and failure reason.",
        labels=["status", "reason"],
    )
    for status, reason, count in selectors.results_by_status_and_reason():
        family.add_metric([status, reason], count)
    return family


def _durations() -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        f"{PREFIX}_verification_seconds",
        "Time of the verifications finished in the last 24 hours, per queue.",
        labels=["queue"],
    )
    for histogram in selectors.duration_histograms(DURATION_BUCKETS):
        buckets = [
            (str(bound), float(count))
            for bound, count in zip(DURATION_BUCKETS, histogram.cumulative, strict=True)
        ]
        buckets.append(("+Inf", float(histogram.count)))
        family.add_metric([histogram.queue], buckets, histogram.total_seconds)
    return family


def exposition() -> bytes:
    """The whole page, rendered by prometheus_client's own writer."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SiteCollector())
    return generate_latest(registry)


def _canary() -> Iterator[Metric]:
    status = canary_status()
    yield GaugeMetricFamily(
        f"{PREFIX}_canary_ok",
        "1 when the last canary check gave right verdicts and is not late, else 0",
        value=1 if status.state == "ok" else 0,
    )
    if status.age_seconds is not None:
        yield GaugeMetricFamily(
            f"{PREFIX}_canary_age_seconds",
            "Seconds since the last canary check started",
            value=status.age_seconds,
        )
