"""The evaluation pipeline's state machine: dispatch, claim, verify, record, finish, reap.

The database is the source of truth (security.md §4): a result is claimed by a conditional
update ``queued → running`` that sets a lease token, expiry and attempt count; a verdict is
written only under the token that claimed it, so a redelivered or duplicated message, or a
worker whose lease was taken over, changes nothing. The evaluation is finished by a
conditional update as well, which exactly one worker wins. The reaper hands expired leases
back to the queue (at most ``SECUREBENCH_MAX_ATTEMPTS`` times) and re-sends messages that
were lost with a broker.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from job_queue import send_job
from packs.selectors import evaluator_lanes_for_tasks
from runs import hooks, programs
from runs.candidates import verifier_candidate
from runs.evaluators import Evaluator, TaskCounts, evaluator_get
from runs.models import (
    OPEN_STATUSES,
    Evaluation,
    EvaluationStatus,
    ResultStatus,
    TaskResult,
    WorkQueue,
)
from verifiers.sandbox import Sandbox, SandboxUnavailable, get_sandbox
from verifiers.sandbox.docker_engine import (
    docker_client,
    image_refused,
    pull_observer,
    remove_stale_containers,
)
from verifiers.scoring import VerifierSettings, verify
from verifiers.verdict import ERROR, Reason, Verdict, storable, storable_text

logger = logging.getLogger(__name__)

# Faults of our own that another attempt may not hit; everything else is final.
RETRYABLE_REASONS = frozenset({Reason.INFRASTRUCTURE, Reason.SANDBOX_UNAVAILABLE})
ID_CHUNK = 1000  # ids per IN (...) clause
# The jobs (runs.jobs) that score queued results, sent by name.
SCORE_TEXT_JOB = "runs.score_text_results"
SCORE_SANDBOX_JOB = "runs.score_sandbox_result"
SCORE_RUN_SCOPE_JOB = "runs.score_run_scope"
VERDICT_FIELDS = [
    "status",
    "score",
    "failure_reason",
    "details",
    "stdout",
    "stderr",
    "duration_seconds",
    "sandbox_backend",
    "sandbox_image",
    "metrics",
    "finished_at",
    "lease_token",
    "lease_expires_at",
]


def _lease() -> timedelta:
    return timedelta(seconds=settings.SECUREBENCH_LEASE_SECONDS)


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def worker_name() -> str:
    """Who holds a lease: the host (as the operator names it) and the process."""
    return f"{settings.SECUREBENCH_HOST_NAME or socket.gethostname()}:{os.getpid()}"


# --- dispatch ---------------------------------------------------------------------------------


def evaluation_dispatch(evaluation_id: int, *, result_ids: Iterable[int] | None = None) -> int:
    """Send messages for the evaluation's queued results (or only the given ones).

    Text results travel in chunks; each sandboxed result gets a message of its own so that
    both cores (and every worker) stay busy. A message that cannot be sent leaves its rows
    with no dispatch time, and the reaper sends it again.
    """
    queued = TaskResult.objects.filter(evaluation_id=evaluation_id, status=ResultStatus.QUEUED)
    if result_ids is not None:
        queued = queued.filter(pk__in=list(result_ids))
    rows = list(queued.order_by("position").values_list("pk", "queue"))
    text_ids = [pk for pk, queue in rows if queue == WorkQueue.TEXT]
    sandbox_ids = [pk for pk, queue in rows if queue == WorkQueue.SANDBOX]
    sent = 0
    for chunk in _chunks(text_ids, settings.SECUREBENCH_TEXT_CHUNK):
        sent += _send(SCORE_TEXT_JOB, chunk, chunk)
    for pk in sandbox_ids:
        sent += _send(SCORE_SANDBOX_JOB, [pk], pk)
    return sent


def _send(job: str, ids: list[int], argument: Any) -> int:
    _mark_dispatched(ids, timezone.now())
    if not send_job(job, argument):
        _mark_dispatched(ids, None)
        return 0
    return 1


def _mark_dispatched(ids: list[int], when: datetime | None) -> None:
    for chunk in _chunks(ids, ID_CHUNK):
        TaskResult.objects.filter(pk__in=chunk, status=ResultStatus.QUEUED).update(
            dispatched_at=when
        )


# --- claim, verify, record ------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    token: uuid.UUID
    results: list[TaskResult]


def results_claim(result_ids: list[int], *, worker: str) -> Claim:
    """Take the given results that are still queued; the others belong to someone else."""
    token = uuid.uuid4()
    now = timezone.now()

    for chunk in _chunks(result_ids, ID_CHUNK):
        TaskResult.objects.filter(
            pk__in=chunk,
            status=ResultStatus.QUEUED,
            attempts__lt=settings.SECUREBENCH_MAX_ATTEMPTS,
        ).update(
            status=ResultStatus.RUNNING,
            lease_token=token,
            lease_expires_at=now + _lease(),
            attempts=F("attempts") + 1,
            started_at=now,
            worker=worker[:200],
        )
    claimed = list(
        TaskResult.objects.filter(lease_token=token, status=ResultStatus.RUNNING)
        .select_related("task", "candidate")
        .order_by("position")
    )
    evaluation_ids = {result.evaluation_id for result in claimed}
    if evaluation_ids:
        Evaluation.objects.filter(pk__in=evaluation_ids, status=EvaluationStatus.QUEUED).update(
            status=EvaluationStatus.RUNNING, started_at=now
        )
    return Claim(token=token, results=claimed)


def lease_renew(token: uuid.UUID) -> int:
    return TaskResult.objects.filter(lease_token=token, status=ResultStatus.RUNNING).update(
        lease_expires_at=timezone.now() + _lease()
    )


class LeaseHeartbeat:
    """Renews a claim's lease while its verification runs, from a thread of its own.

    A worker that dies stops renewing, so its results come back after one short lease
    instead of after the longest verification the site allows.
    """

    def __init__(self, token: uuid.UUID) -> None:
        self._token = token
        self._stop = threading.Event()
        self._interval = max(1.0, settings.SECUREBENCH_LEASE_SECONDS / 3)
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def __enter__(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                try:
                    lease_renew(self._token)
                except Exception:  # a busy database must not kill the verification
                    logger.warning("could not renew lease %s", self._token, exc_info=True)
        finally:
            connection.close()  # this thread's own connection


_worker_sandbox: Sandbox | None = None


def worker_sandbox() -> Sandbox | None:
    """One sandbox backend per worker process, chosen on first use (after the pool forked)."""
    global _worker_sandbox
    if _worker_sandbox is None:
        try:
            sandbox = get_sandbox()
        except SandboxUnavailable:
            return None  # verify() reports sandbox_unavailable, and the result is retried
        if sandbox.name == "docker":
            # The site's own labels, which the janitor's filter requires too.
            sandbox.labels.update(settings.SECUREBENCH_SANDBOX_LABELS)
        _worker_sandbox = sandbox
    return _worker_sandbox


def worker_sandbox_forget() -> None:
    """Choose the backend again on next use (a benchmark measures one backend, then the
    other, in one process; a worker never switches)."""
    global _worker_sandbox
    _worker_sandbox = None


def score_results(result_ids: list[int], *, worker: str | None = None) -> int:
    """Claim, verify and record; returns how many results this call scored."""
    claim = results_claim(result_ids, worker=worker or worker_name())
    if not claim.results:
        return 0  # a duplicate or late message: somebody else has these
    lanes = evaluator_lanes_for_tasks([result.task for result in claim.results])
    sandbox = worker_sandbox() if _needs_sandbox(claim.results) else None
    verifier_settings = VerifierSettings(
        sandbox=sandbox, allowed_commands=settings.SECUREBENCH_ALLOWED_VERIFIER_COMMANDS
    )
    scorers = _scorers(claim.results)
    verdicts: list[tuple[TaskResult, Verdict]] = []
    with LeaseHeartbeat(claim.token):
        for result in claim.results:
            scorer = scorers[result.evaluation_id]
            with waits_shown(claim.token, result.pk) as refused:
                if scorer.program:
                    verdict, result.metrics = programs.program_verdict(
                        scorer, result, lanes[result.task_id], sandbox
                    )
                else:
                    candidate = verifier_candidate(result.candidate) if result.candidate else None
                    verdict = verify(lanes[result.task_id], candidate, verifier_settings)
            verdicts.append((result, _unavailable_facts(verdict, sandbox, refused)))
    results_record(claim.token, verdicts)
    return len(verdicts)


def _scorers(results: list[TaskResult]) -> dict[int, Evaluator]:
    """The scorer of each claimed result's evaluation (a claim may span evaluations)."""
    keys = dict(
        Evaluation.objects.filter(pk__in={r.evaluation_id for r in results}).values_list(
            "pk", "evaluator"
        )
    )
    return {pk: evaluator_get(key) for pk, key in keys.items()}


@contextmanager
def waits_shown(token: uuid.UUID, result_id: int) -> Iterator[list[str]]:
    """While a verification waits for its sandbox's image to be pulled, its result says so
    (under the claim's lease: a result taken over by another worker is not touched). Yields
    the images the verification could not get (docker_engine.image_refused)."""

    def observe(image: str, waiting: bool) -> None:
        note = f"pulling image {image}"[:255] if waiting else ""
        TaskResult.objects.filter(pk=result_id, lease_token=token).update(waiting_for=note)

    refused: list[str] = []
    reset = pull_observer.set(observe)
    reset_refused = image_refused.set(refused.append)
    try:
        yield refused
    finally:
        image_refused.reset(reset_refused)
        pull_observer.reset(reset)


def _unavailable_facts(verdict: Verdict, sandbox: Sandbox | None, refused: list[str]) -> Verdict:
    """A sandbox_unavailable verdict names, in its public columns, the backend this worker
    had ("" for none) and the image it could not get: the health report explains the error
    from these (pack_health.findings), never from the verifier's output."""
    if verdict.reason != Reason.SANDBOX_UNAVAILABLE:
        return verdict
    return replace(
        verdict,
        sandbox_backend=verdict.sandbox_backend or (sandbox.name if sandbox else ""),
        sandbox_image=verdict.sandbox_image or (refused[-1] if refused else ""),
    )


def _needs_sandbox(results: list[TaskResult]) -> bool:
    return any(result.queue == WorkQueue.SANDBOX for result in results)


def results_record(token: uuid.UUID, verdicts: list[tuple[TaskResult, Verdict]]) -> None:
    """Write verdicts under the claim's token; retry our own transient faults."""
    now = timezone.now()
    final: list[TaskResult] = []
    retry: list[TaskResult] = []
    for result, verdict in verdicts:
        if (
            verdict.status == ERROR
            and verdict.reason in RETRYABLE_REASONS
            and result.attempts < settings.SECUREBENCH_MAX_ATTEMPTS
        ):
            retry.append(result)
            continue
        _apply_verdict(result, verdict, now)
        final.append(result)
    with transaction.atomic():
        mine = TaskResult.objects.filter(lease_token=token, status=ResultStatus.RUNNING)
        _write_verdicts(token, final)
        if retry:
            mine.filter(pk__in=[result.pk for result in retry]).update(
                status=ResultStatus.QUEUED,
                lease_token=None,
                lease_expires_at=None,
                dispatched_at=now,
            )
            for evaluation_id, ids in _by_evaluation(retry).items():
                transaction.on_commit(
                    lambda e=evaluation_id, i=ids: evaluation_dispatch(e, result_ids=i),
                    robust=True,
                )
    for evaluation_id in {result.evaluation_id for result, _ in verdicts}:
        evaluation_finish_if_done(evaluation_id)


def _write_verdicts(token: uuid.UUID, results: list[TaskResult]) -> None:
    """One parameterised UPDATE per result, sent with executemany, each guarded by the claim.

    ``bulk_update`` builds a CASE WHEN per field over the whole batch: for a chunk of 500 text
    verdicts that SQL costs about 1.5 s of Python to compile, ten times the verification
    itself. The same UPDATE executed many times is compiled once. Values go through each
    field's own ``get_db_prep_save``, so JSON, dates and UUIDs are stored as the ORM would.
    """
    if not results:
        return
    meta = TaskResult._meta
    fields = [meta.get_field(name) for name in VERDICT_FIELDS]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    token_field, status_field = meta.get_field("lease_token"), meta.get_field("status")
    # Only names from the model's metadata are formatted in; every value is a parameter.
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {assignments} "  # noqa: S608
        f"WHERE {quote(meta.pk.column)} = %s AND {quote(token_field.column)} = %s "
        f"AND {quote(status_field.column)} = %s"
    )
    held_by = token_field.get_db_prep_value(token, connection)
    params = [
        [field.get_db_prep_save(getattr(result, field.attname), connection) for field in fields]
        + [result.pk, held_by, ResultStatus.RUNNING.value]
        for result in results
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _by_evaluation(results: list[TaskResult]) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = {}
    for result in results:
        grouped.setdefault(result.evaluation_id, []).append(result.pk)
    return grouped


def _apply_verdict(result: TaskResult, verdict: Verdict, now: datetime) -> None:
    result.status = verdict.status
    result.score = verdict.score
    result.failure_reason = verdict.reason or ""
    # A candidate's sandbox fills these: kept as text every database can hold.
    result.details = storable(verdict.details)
    result.stdout = storable_text(verdict.stdout)
    result.stderr = storable_text(verdict.stderr)
    result.duration_seconds = verdict.duration_seconds
    result.sandbox_backend = verdict.sandbox_backend or ""
    result.sandbox_image = (verdict.sandbox_image or "")[:255]
    result.finished_at = now
    result.lease_token = None
    result.lease_expires_at = None


# --- finishing --------------------------------------------------------------------------------


def evaluation_finish_if_done(evaluation_id: int) -> bool:
    """Complete the evaluation if no result is open; True for the one caller that did.

    Only a submitted run's evaluation can finish: a live episode run (runs.models.RunMode)
    scores each task as its episode ends, and more candidates arrive until the run closes.
    """
    if TaskResult.objects.filter(evaluation_id=evaluation_id, status__in=OPEN_STATUSES).exists():
        return False
    finishable = Evaluation.objects.filter(pk=evaluation_id, run__submitted_at__isnull=False)
    if not finishable.exclude(status=EvaluationStatus.DONE).exists():
        return False
    if _run_scope_call_pending(evaluation_id):
        return False
    summary = evaluation_summary(evaluation_id)
    updated = finishable.exclude(status=EvaluationStatus.DONE).update(
        status=EvaluationStatus.DONE, finished_at=timezone.now(), **summary
    )
    if updated == 1:
        hooks.evaluation_done(evaluation_id)
    return updated == 1


def _run_scope_call_pending(evaluation_id: int) -> bool:
    """An uploaded run-scope evaluation finishes only after its one program call: send it
    (again, once the program's own time limit has passed with no outcome) and wait."""
    evaluation = Evaluation.objects.only("evaluator", "program_outcome", "program_sent_at").get(
        pk=evaluation_id
    )
    scorer = evaluator_get(evaluation.evaluator)
    if not scorer.program or scorer.scope != "run" or evaluation.program_outcome is not None:
        return False
    now = timezone.now()
    resend_after = now - timedelta(seconds=settings.SECUREBENCH_SANDBOX_TASK_SECONDS + 60)
    sent = Evaluation.objects.filter(pk=evaluation_id, program_outcome__isnull=True).filter(
        Q(program_sent_at__isnull=True) | Q(program_sent_at__lt=resend_after)
    )
    if sent.update(program_sent_at=now) == 1:
        transaction.on_commit(lambda: send_job(SCORE_RUN_SCOPE_JOB, evaluation_id), robust=True)
    return True


def run_scope_score(evaluation_id: int) -> bool:
    """The job of a run-scope evaluation: one program call over the run, stored once (a
    second worker's outcome for the same evaluation is dropped), then the evaluation
    finishes. A sandbox that could not start leaves it unsent for the reaper."""
    try:
        outcome, log = programs.run_scope_outcome(evaluation_id, worker_sandbox())
    except SandboxUnavailable:
        logger.warning("run-scope evaluation %s: no sandbox; sent again later", evaluation_id)
        Evaluation.objects.filter(pk=evaluation_id).update(program_sent_at=None)
        return False
    with transaction.atomic():
        stored = Evaluation.objects.filter(pk=evaluation_id, program_outcome__isnull=True).update(
            program_outcome=outcome, program_log=storable_text(log)
        )
        if stored and outcome.get("status") != "ok":
            # The results only waited for the program: its failure is theirs too, as the
            # evaluation's error (never the candidates' failure, nor a pass).
            TaskResult.objects.filter(
                evaluation_id=evaluation_id, status=ResultStatus.PASSED
            ).update(status=ResultStatus.ERROR, failure_reason=Reason.EVALUATION_ERROR, score=0.0)
    return evaluation_finish_if_done(evaluation_id)


def evaluation_summary(evaluation_id: int) -> dict[str, Any]:
    """Counts, metrics, per-family counts and failure reasons, in four queries whatever the
    number of tasks and samples: written once, so that pages of a done evaluation never count
    its results again.

    Counts are per result row (one per sample). The metrics are the evaluation's scorer's
    (runs.evaluators) over per-task counts, and ``score`` with its interval is the scorer's
    primary metric. Tasks of deferred families are ``pending``: counted apart, never scored.
    """
    evaluation = Evaluation.objects.get(pk=evaluation_id)
    evaluator = evaluator_get(evaluation.evaluator)
    results = TaskResult.objects.filter(evaluation_id=evaluation_id)
    counts = {status: 0 for status in ResultStatus.values}
    families: dict[str, dict[str, int]] = {}
    for row in results.values("family", "status").annotate(n=Count("id")).order_by():
        counts[row["status"]] += row["n"]
        family = families.setdefault(
            row["family"], {"total": 0, "passed": 0, "failed": 0, "error": 0, "pending": 0}
        )
        family["total"] += row["n"]
        if row["status"] in family:
            family[row["status"]] += row["n"]
    if evaluator.program:
        metrics = _as_values(programs.program_metrics(evaluator, evaluation, results))
    else:
        metrics = evaluator.evaluate(_task_counts(results))
    primary = metrics.get(evaluator.primary_metric)
    return {
        "total": sum(counts.values()),
        "passed": counts["passed"],
        "failed": counts["failed"],
        "errored": counts["error"],
        "pending": counts["pending"],
        "score": primary.value if primary else None,
        "ci_low": primary.ci_low if primary else None,
        "ci_high": primary.ci_high if primary else None,
        "metrics": {name: value.as_json() for name, value in metrics.items()},
        "family_summary": dict(sorted(families.items())),
        "failure_reasons": list(
            results.exclude(failure_reason="")
            .order_by("failure_reason")
            .values_list("failure_reason", flat=True)
            .distinct()
        ),
    }


def _as_values(stored: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A program's metrics as MetricValue-like rows that keep their interval's words."""
    return {name: _StoredMetric(data) for name, data in stored.items()}


@dataclass(frozen=True)
class _StoredMetric:
    data: dict[str, Any]

    @property
    def value(self) -> float | None:
        return self.data.get("value")

    @property
    def ci_low(self) -> float | None:
        return self.data.get("ci_low")

    @property
    def ci_high(self) -> float | None:
        return self.data.get("ci_high")

    def as_json(self) -> dict[str, Any]:
        return dict(self.data)


def _task_counts(results: QuerySet[TaskResult]) -> list[TaskCounts]:
    """Scored samples per task in one grouped query: n (passed, failed or error), c (passed)
    and the sum of the scores of passed and failed ones (an error of ours scores nothing)."""
    scored = (ResultStatus.PASSED, ResultStatus.FAILED, ResultStatus.ERROR)
    rows = (
        results.filter(status__in=scored)
        .values("task_id", "family")
        .annotate(
            n=Count("id"),
            c=Count("id", filter=Q(status=ResultStatus.PASSED)),
            score_sum=Sum("score", filter=~Q(status=ResultStatus.ERROR)),
        )
        .order_by()
    )
    return [
        TaskCounts(family=row["family"], n=row["n"], c=row["c"], score_sum=row["score_sum"] or 0.0)
        for row in rows
    ]


# --- the reaper --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReapReport:
    requeued: int
    exhausted: int
    redispatched: int


def leases_reap(*, now: datetime | None = None) -> ReapReport:
    """Requeue expired leases, give up after the last attempt, re-send lost messages."""
    now = now or timezone.now()
    expired = TaskResult.objects.filter(status=ResultStatus.RUNNING, lease_expires_at__lt=now)
    max_attempts = settings.SECUREBENCH_MAX_ATTEMPTS

    exhausted_rows = expired.filter(attempts__gte=max_attempts)
    touched = set(exhausted_rows.values_list("evaluation_id", flat=True).distinct())
    exhausted = exhausted_rows.update(
        status=ResultStatus.ERROR,
        failure_reason=Reason.RETRIES_EXHAUSTED,
        score=0.0,
        lease_token=None,
        lease_expires_at=None,
        finished_at=now,
    )

    marker = uuid.uuid4()  # names the rows this pass requeued, whatever else happens meanwhile
    requeued = expired.filter(attempts__lt=max_attempts).update(
        status=ResultStatus.QUEUED, lease_token=marker, lease_expires_at=None, dispatched_at=None
    )
    lost = _lost_message_results(now)
    redispatch = list(
        TaskResult.objects.filter(
            Q(lease_token=marker) | Q(pk__in=lost), status=ResultStatus.QUEUED
        )
        .values_list("evaluation_id", "pk")
        .order_by("evaluation_id", "position")
    )
    grouped: dict[int, list[int]] = {}
    for evaluation_id, pk in redispatch:
        grouped.setdefault(evaluation_id, []).append(pk)
    for evaluation_id, ids in grouped.items():
        evaluation_dispatch(evaluation_id, result_ids=ids)
    for evaluation_id in touched | _unfinished_without_open_results():
        evaluation_finish_if_done(evaluation_id)
    if exhausted or requeued or redispatch:
        logger.info(
            "reaper: %d leases requeued, %d results out of attempts, %d messages re-sent",
            requeued,
            exhausted,
            len(redispatch),
        )
    return ReapReport(
        requeued=requeued, exhausted=exhausted, redispatched=len(redispatch) - requeued
    )


def _unfinished_without_open_results(limit: int = 200) -> set[int]:
    """Submitted evaluations not done though no result is open: a worker died between the
    last verdict and the finish, or a run-scope program call was lost. Finishing them again
    is safe (the finish is a conditional update; the call is re-sent only when due)."""
    open_results = TaskResult.objects.filter(evaluation_id=OuterRef("pk"), status__in=OPEN_STATUSES)
    return set(
        Evaluation.objects.exclude(run__submitted_at=None)
        .exclude(status=EvaluationStatus.DONE)
        .exclude(Exists(open_results))
        .values_list("pk", flat=True)[:limit]
    )


def _lost_message_results(now: datetime) -> Any:
    """Queued results whose message was never sent, or was sent long ago into an evaluation
    that has made no progress since (the broker lost it, e.g. a Redis restart)."""
    cutoff = now - timedelta(seconds=settings.SECUREBENCH_REDISPATCH_SECONDS)
    recent_progress = TaskResult.objects.filter(evaluation_id=OuterRef("evaluation_id")).filter(
        Q(started_at__gte=cutoff) | Q(finished_at__gte=cutoff)
    )
    return (
        TaskResult.objects.filter(status=ResultStatus.QUEUED)
        .filter(
            Q(dispatched_at__isnull=True) | (Q(dispatched_at__lt=cutoff) & ~Exists(recent_progress))
        )
        .values("pk")
    )


# --- orphaned sandboxes -----------------------------------------------------------------------


def stale_sandboxes_remove(
    *, now: float | None = None, labels: dict[str, str] | None = None
) -> list[str]:
    """Remove Docker sandboxes left running by a worker that died mid-verification.

    A SIGKILLed worker never tears its containers down, and their keeper process would run
    forever; the lease brings the result back, this brings the engine's resources back. No
    engine (or a bubblewrap-only site): nothing to do.
    """
    if (os.environ.get("SECUREBENCH_SANDBOX") or "auto").strip().lower() == "bwrap":
        return []
    try:
        client = docker_client(timeout=5)
    except SandboxUnavailable:
        return []
    removed = remove_stale_containers(
        client,
        float(settings.SECUREBENCH_STALE_SANDBOX_SECONDS),
        labels={**settings.SECUREBENCH_SANDBOX_LABELS, **(labels or {})},
        now=now,
    )
    if removed:
        logger.warning("removed %d orphaned sandbox container(s)", len(removed))
    return removed
