"""Writes for runs: create, add candidates, submit, (re-)evaluate.

Every write that a user triggers either stores everything or nothing: candidates are checked
against the contract version before the first row is written, and an evaluation with its
task-result rows is created in one transaction whose Celery messages leave on commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from evaluations.registry import scores_version, uploaded_definition
from job_queue import send_job
from packs.models import ContractVersion, Task, VersionState
from packs.selectors import evaluator_lanes_for_tasks
from packs.uploads import save_upload, upload_display_name
from runs.budgets import check_budgets, contract_budgets
from runs.bundle import (
    BundleLine,
    BundleProblem,
    BundleRejected,
    ParsedBundle,
    parse_bundle_file,
    sample_label,
)
from runs.candidates import stored_files
from runs.evaluators import Evaluator, EvaluatorNotAllowed, evaluator_choose, evaluator_get
from runs.models import (
    Candidate,
    CandidateOrigin,
    Evaluation,
    ResultStatus,
    Run,
    RunMode,
    TaskResult,
    WorkQueue,
)
from runs.pipeline import evaluation_dispatch, evaluation_finish_if_done
from runs.state import REFERENCE_ORIGINS
from runs.validity import candidate_violations_of, live_violations, run_apply_validity
from verifiers.families import get_family
from verifiers.oracle import null_candidate, oracle_candidate
from verifiers.scoring import is_text_family
from verifiers.task import Candidate as VerifierCandidate
from verifiers.task import TaskLanes
from verifiers.verdict import Reason

BULK_BATCH = 1000
# The suffixes that tell the bundle reader an uploaded archive from a .jsonl file.
BUNDLE_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
RESEND_BATCH = 100  # reference runs re-sent per reaper pass

logger = logging.getLogger(__name__)
# What submitting or closing a run fixes about it, beside ``submitted_at``.
VERDICT_ON_RUN_FIELDS = ("usage", "over_budget", "budget_notes", "valid", "invalid_reasons")
# Builds one task's candidate from its lanes (None: the task gets none), e.g. its reference.
CandidateBuild = Callable[[TaskLanes], VerifierCandidate | None]


class RunAlreadySubmitted(Exception):
    """Candidates can only be added before a run is submitted, and it is submitted once."""


class VersionIsDraft(Exception):
    """Runs target published versions; a draft's only runs are its own health checks."""


@dataclass(frozen=True)
class RunMetadata:
    agent_name: str
    agent_version: str = ""
    model_name: str = ""
    notes: str = ""
    usage: dict[str, float] | None = field(default=None)

    def merged_with(self, bundle_metadata: dict[str, str]) -> RunMetadata:
        """Fields given explicitly (form, API, command line) win over the bundle's run line."""
        return RunMetadata(
            agent_name=self.agent_name or bundle_metadata.get("agent_name", ""),
            agent_version=self.agent_version or bundle_metadata.get("agent_version", ""),
            model_name=self.model_name or bundle_metadata.get("model_name", ""),
            notes=self.notes or bundle_metadata.get("notes", ""),
            usage=self.usage,
        )


# --- runs --------------------------------------------------------------------------------------


def run_create(
    *,
    contract_version: ContractVersion,
    metadata: RunMetadata,
    source: str,
    user: Any = None,
    origin: str = CandidateOrigin.AGENT,
    health_check: bool = False,
) -> Run:
    _refuse_draft(contract_version, health_check=health_check)
    return Run.objects.create(
        contract_version=contract_version,
        agent_name=metadata.agent_name.strip() or "unnamed agent",
        agent_version=metadata.agent_version.strip(),
        model_name=metadata.model_name.strip(),
        notes=metadata.notes,
        source=source,
        origin=origin,
        submitted_by=_user_or_none(user),
        usage=dict(metadata.usage or {}),
        health_check=health_check,
    )


def run_add_candidates(run: Run, lines: list[BundleLine]) -> int:
    """Check a batch against the contract version and store it; all or nothing."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.is_submitted:
            raise RunAlreadySubmitted(f"run {run.pk} is already submitted")
        _refuse_live(locked)
        tasks = _tasks_by_id(run.contract_version_id, (line.task_id for line in lines))
        stored = set(
            Candidate.objects.filter(
                run=run, task__task_id__in=[line.task_id for line in lines]
            ).values_list("task__task_id", "sample")
        )
        _check_against_tasks(lines, tasks, stored, run.contract_version)
        contract = run.contract_version.contract
        Candidate.objects.bulk_create(
            [_candidate_row(run, tasks[line.task_id], line, contract) for line in lines],
            batch_size=BULK_BATCH,
        )
        count = Candidate.objects.filter(run=run).count()
        Run.objects.filter(pk=run.pk).update(candidate_count=count)
    run.candidate_count = count
    return len(lines)


def run_submit(run: Run, *, user: Any = None) -> Evaluation:
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.is_submitted:
            raise RunAlreadySubmitted(f"run {run.pk} is already submitted")
        _refuse_live(locked)
        run_apply_budgets(locked)
        run_apply_validity(locked)
        locked.submitted_at = timezone.now()
        locked.save(update_fields=["submitted_at", *VERDICT_ON_RUN_FIELDS])
        evaluation = evaluation_create(locked, created_by=user)
    run.refresh_from_db()
    return evaluation


def run_submit_bundle(
    *,
    contract_version: ContractVersion,
    bundle: ParsedBundle,
    metadata: RunMetadata,
    source: str,
    user: Any = None,
) -> tuple[Run, Evaluation]:
    """The one-shot path (form, API upload, command): run, candidates and evaluation at once."""
    metadata = metadata.merged_with(bundle.metadata)
    if metadata.usage is None:
        metadata = RunMetadata(**{**metadata.__dict__, "usage": bundle.usage})
    with transaction.atomic():
        run = run_create(
            contract_version=contract_version, metadata=metadata, source=source, user=user
        )
        run_add_candidates(run, bundle.lines)
        evaluation = run_submit(run, user=user)
    return run, evaluation


def bundle_upload_parse(upload: UploadedFile, folder: Path) -> ParsedBundle:
    """Save an uploaded bundle (the form's) in ``folder`` and parse it; BundleRejected says
    what is wrong with it. The file keeps its suffix: it tells the bundle reader a .jsonl from
    an archive."""
    name = (upload.name or "").lower()
    suffix = next((s for s in BUNDLE_ARCHIVE_SUFFIXES if name.endswith(s)), ".jsonl")
    path = save_upload(upload, folder / f"bundle{suffix}")
    return parse_bundle_file(path, display_name=upload_display_name(upload, default="bundle"))


def run_submit_reference(
    *,
    contract_version: ContractVersion,
    origin: str,
    metadata: RunMetadata,
    source: str,
    user: Any = None,
) -> tuple[Run, Evaluation]:
    """An oracle run (each task's reference solution) or a null run (empty candidates).

    Used to check that a pack's verifiers accept their own references and refuse nothing.
    Tasks without a reference get no candidate and so fail with ``missing_candidate``.
    """
    build = oracle_candidate if origin == CandidateOrigin.ORACLE else null_candidate
    return run_submit_built(
        contract_version=contract_version,
        origin=origin,
        build=build,
        metadata=metadata,
        source=source,
        user=user,
    )


def reference_runs_request(
    contract_version: ContractVersion, *, source: str, user: Any = None
) -> list[Run]:
    """The oracle run and the null run of a version (as `submit_run --oracle` and `--null`
    make them), created empty: a worker builds their candidates and submits them
    (``reference_run_fill``), since reading each task's reference is trusted code that never
    runs in a web request. Both or neither: a draft stores nothing."""
    with transaction.atomic():
        runs = [
            run_create(
                contract_version=contract_version,
                metadata=RunMetadata(agent_name=origin),
                source=source,
                user=user,
                origin=origin,
            )
            for origin in REFERENCE_ORIGINS
        ]
        ids = [run.pk for run in runs]
        transaction.on_commit(lambda: _send_reference_fill(ids), robust=True)
    return runs


def _send_reference_fill(run_ids: list[int]) -> None:
    send_job("runs.fill_reference_runs", run_ids)


def reference_fills_resend(*, now: datetime | None = None) -> int:
    """Send again the fill of one-click reference runs still empty well after they were asked
    for: its message was lost (a broker restart) or never sent (the broker was down), and
    without this the runs would show "preparing" for ever. A fill delivered twice does
    nothing the second time, so a message that was merely slow costs nothing."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.SECUREBENCH_REDISPATCH_SECONDS)
    waiting = Run.objects.filter(
        mode=RunMode.BUNDLE,
        health_check=False,
        origin__in=REFERENCE_ORIGINS,
        submitted_at__isnull=True,
        candidate_count=0,
        created_at__lt=cutoff,
    )
    run_ids = list(waiting.order_by("pk").values_list("pk", flat=True)[:RESEND_BATCH])
    if run_ids:
        logger.info("reaper: re-sending the fill of reference runs %s", run_ids)
        _send_reference_fill(run_ids)
    return len(run_ids)


def reference_run_fill(run_id: int) -> Evaluation | None:
    """In a worker: build the candidates of an oracle or null run made by
    ``reference_runs_request`` and submit it. Once only: a run already filled is left alone
    (a message delivered twice)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("contract_version").get(pk=run_id)
        if run.is_submitted or run.origin not in REFERENCE_ORIGINS or run.candidate_count:
            return None
        build = oracle_candidate if run.origin == CandidateOrigin.ORACLE else null_candidate
        _store_built(run, built_lines(run.contract_version, [build])[0])
        return run_submit(run, user=run.submitted_by)


def built_lines(
    contract_version: ContractVersion, builds: Sequence[CandidateBuild]
) -> list[list[tuple[Task, VerifierCandidate]]]:
    """Each build's candidates (one list per build, in task order), from one pass over the
    version's lanes; a task whose build gives None gets no candidate.

    Builds see all three lanes (a reference is hidden): trusted code in a worker only.
    """
    tasks = list(contract_version.tasks.order_by("position"))
    lines: list[list[tuple[Task, VerifierCandidate]]] = [[] for _ in builds]
    for start in range(0, len(tasks), BULK_BATCH):
        chunk = tasks[start : start + BULK_BATCH]
        lanes = evaluator_lanes_for_tasks(chunk)
        for task in chunk:
            for found, build in zip(lines, builds, strict=True):
                candidate = build(lanes[task.pk])
                if candidate is not None:
                    found.append((task, candidate))
    return lines


def run_submit_built(
    *,
    contract_version: ContractVersion,
    origin: str,
    build: CandidateBuild,
    metadata: RunMetadata,
    source: str,
    user: Any = None,
    health_check: bool = False,
) -> tuple[Run, Evaluation]:
    """A run whose candidates are built from each task's lanes (reference, empty, attack)."""
    return run_submit_lines(
        contract_version=contract_version,
        origin=origin,
        lines=built_lines(contract_version, [build])[0],
        metadata=metadata,
        source=source,
        user=user,
        health_check=health_check,
    )


def run_submit_lines(
    *,
    contract_version: ContractVersion,
    origin: str,
    lines: list[tuple[Task, VerifierCandidate]],
    metadata: RunMetadata,
    source: str,
    user: Any = None,
    health_check: bool = False,
) -> tuple[Run, Evaluation]:
    """Run, built candidates and evaluation at once (see ``built_lines``)."""
    with transaction.atomic():
        run = run_create(
            contract_version=contract_version,
            metadata=metadata,
            source=source,
            user=user,
            origin=origin,
            health_check=health_check,
        )
        _store_built(run, lines)
        evaluation = run_submit(run, user=user)
    run.refresh_from_db()
    return run, evaluation


def _store_built(run: Run, lines: list[tuple[Task, VerifierCandidate]]) -> None:
    contract = run.contract_version.contract
    Candidate.objects.bulk_create(
        [
            _candidate_row(
                run, task, BundleLine(line=None, task_id=task.task_id, candidate=c), contract
            )
            for task, c in lines
        ],
        batch_size=BULK_BATCH,
    )
    Run.objects.filter(pk=run.pk).update(candidate_count=len(lines))
    run.candidate_count = len(lines)


def draft_refusal(contract_version: ContractVersion) -> str | None:
    """Why no run may target this version (it is a draft), or None when it is published."""
    if contract_version.state == VersionState.PUBLISHED:
        return None
    return (
        f"version {contract_version.version} of {contract_version.pack.pack_id} is a draft: "
        "it is offered to agents once its health checks pass and it is published"
    )


def _refuse_draft(contract_version: ContractVersion, *, health_check: bool) -> None:
    # The health checks are the one kind of run a draft takes: they are what publishes it.
    if health_check:
        return
    if (refusal := draft_refusal(contract_version)) is not None:
        raise VersionIsDraft(refusal)


def _refuse_live(run: Run) -> None:
    # A live run's candidates are its episodes' final answers, and it closes itself.
    if run.mode == RunMode.EPISODES:
        raise RunAlreadySubmitted(f"run {run.pk} is a live episode run; its episodes submit")


def _user_or_none(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def _tasks_by_id(contract_version_id: int, task_ids: Iterable[str]) -> dict[str, Task]:
    wanted = list(dict.fromkeys(task_ids))
    found: dict[str, Task] = {}
    for start in range(0, len(wanted), BULK_BATCH):
        chunk = wanted[start : start + BULK_BATCH]
        for task in Task.objects.filter(
            contract_version_id=contract_version_id, task_id__in=chunk
        ).only("pk", "task_id", "family"):
            found[task.task_id] = task
    return found


def _check_against_tasks(
    lines: list[BundleLine],
    tasks: dict[str, Task],
    stored: set[tuple[str, int]],
    contract_version: ContractVersion,
) -> None:
    problems: list[BundleProblem] = []
    label = f"{contract_version.pack.pack_id} v{contract_version.version}"
    attempts = contract_attempts(contract_version.contract)
    for line in lines:

        def problem(field_name: str, message: str, line: BundleLine = line) -> None:
            problems.append(BundleProblem(line.file, line.line, field_name, message))

        task = tasks.get(line.task_id)
        if task is None:
            problem("task_id", f"{line.task_id!r} is not a task of {label}")
            continue
        if (line.task_id, line.sample) in stored:
            problem(
                "sample" if line.sample else "task_id",
                f"{sample_label(line.task_id, line.sample)} already has a candidate in this run",
            )
            continue
        if attempts is not None and line.sample >= attempts:
            # Samples are numbered from 0, one per (task, sample): numbers below the budget
            # cap the count as well.
            problem(
                "sample",
                f"sample {line.sample} of {line.task_id!r} is past the contract's budget of "
                f"{attempts} attempt{'s' if attempts != 1 else ''} per task (samples 0 to "
                f"{attempts - 1})",
            )
            continue
        expected = get_family(task.family).candidate_kind
        if expected is not None and line.candidate.kind != expected:
            problem(
                "candidate.kind",
                f"task {line.task_id!r} is {task.family}, which takes a {expected} candidate, "
                f"not {line.candidate.kind}",
            )
    if problems:
        raise BundleRejected(problems)


def contract_attempts(contract: dict[str, Any] | None) -> int | None:
    """``budgets.attempts``: how many samples a task may have in one run, when set."""
    budgets = (contract or {}).get("budgets") or {}
    value = budgets.get("attempts") if isinstance(budgets, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _candidate_row(
    run: Run, task: Task, line: BundleLine, contract: dict[str, Any] | None
) -> Candidate:
    """The row to store, with the contract rules the candidate breaks (checked here, once:
    every later evaluation reads them instead of checking again)."""
    candidate = line.candidate
    return Candidate(
        run=run,
        task=task,
        kind=candidate.kind,
        text=candidate.text,
        files=stored_files(candidate.files),
        usage=line.usage,
        line=line.line,
        sample=line.sample,
        contract_violations=candidate_violations_of(contract, task.family, candidate),
    )


def run_apply_budgets(run: Run, *, extra_notes: Iterable[str] = ()) -> None:
    """Hold the run's usage to the contract's budgets; notes found elsewhere (a live episode
    truncated at its budget) are added to the ones the usage gives."""
    budgets = contract_budgets(run.contract_version.contract)
    rows = Candidate.objects.filter(run=run).exclude(usage={})
    # Each sample is an attempt of its own, held to the per-task budget; the run's total
    # budget grows with the samples a task has (pass@k runs are k attempts per task).
    task_usages = [
        (task_id if sample == 0 else f"{task_id} sample {sample}", usage)
        for task_id, sample, usage in rows.values_list("task__task_id", "sample", "usage")
    ]
    samples = 1 + (Candidate.objects.filter(run=run).aggregate(top=Max("sample"))["top"] or 0)
    reported = {key: value for key, value in run.usage.items() if not key.startswith("total_")}
    check = check_budgets(
        budgets, reported, task_usages, run.contract_version.task_count, samples=samples
    )
    run.usage = {**reported, **{f"total_{key}": value for key, value in check.totals.items()}}
    notes = [*check.notes, *(note for note in extra_notes if note not in check.notes)]
    run.over_budget = bool(notes)
    run.budget_notes = notes


# --- live runs (candidates arrive one task at a time, e.g. from episodes) --------------------


def run_open_live(
    *,
    contract_version: ContractVersion,
    metadata: RunMetadata,
    source: str,
    user: Any = None,
    origin: str = CandidateOrigin.AGENT,
) -> tuple[Run, Evaluation]:
    """A run whose evaluation exists from the start and fills in as tasks are attempted.

    The evaluation cannot finish before the run is closed (``run_close_live``), however many
    of its results are final: more candidates may still arrive.
    """
    with transaction.atomic():
        run = run_create(
            contract_version=contract_version,
            metadata=metadata,
            source=source,
            user=user,
            origin=origin,
        )
        Run.objects.filter(pk=run.pk).update(mode=RunMode.EPISODES)
        run.mode = RunMode.EPISODES
        evaluation = Evaluation.objects.create(
            run=run,
            number=1,
            evaluator=_chosen_evaluator(contract_version).key,
            created_by=_user_or_none(user),
            total=contract_version.task_count,
        )
    return run, evaluation


@dataclass(frozen=True)
class LiveRefusal:
    """Why the site refused a live candidate before any verifier saw it (e.g. a workspace
    that changed paths outside the contract's surfaces): the result is final at once."""

    reason: str  # one of verifiers.verdict.Reason
    details: dict[str, Any] = field(default_factory=dict)


def run_record_live_candidate(
    run: Run,
    task: Task,
    candidate: VerifierCandidate | None,
    *,
    usage: dict[str, float],
    refusal: LiveRefusal | None = None,
) -> TaskResult:
    """Store the task's candidate (replacing an earlier attempt's) and queue its verdict.

    Called inside the caller's transaction; the verifier message leaves on commit. A result
    still being scored is never replaced: the caller waits for it to be final first. A
    refused candidate is stored (its owner may read what was refused) and fails at once.
    """
    evaluation = Evaluation.objects.select_for_update().get(run=run, number=1)
    previous = TaskResult.objects.filter(evaluation=evaluation, task=task).first()
    if previous is not None:
        if not previous.is_final:
            raise RunAlreadySubmitted(f"task {task.task_id} is still being scored")
        previous.delete()
    Candidate.objects.filter(run=run, task=task).delete()
    candidate_id = None
    if candidate is not None:
        line = BundleLine(line=None, task_id=task.task_id, candidate=candidate, usage=usage)
        row = _candidate_row(run, task, line, None)
        # The episodes layer checked the contract on what the workspace changed (a live
        # workspace holds its unchanged seed files too): its refusal is the verdict.
        if refusal is not None and refusal.reason == Reason.CONTRACT_VIOLATION:
            row.contract_violations = live_violations(refusal.details)
        row.save()
        candidate_id = row.pk
    result = _initial_result(
        evaluation,
        {"pk": task.pk, "family": task.family, "position": task.position},
        candidate_id,
        timezone.now(),
    )
    if candidate is None and (get_family(task.family).active or _scored_by_program(evaluation)):
        result.status, result.failure_reason = ResultStatus.FAILED, Reason.MISSING_CANDIDATE
        result.finished_at = timezone.now()
    elif refusal is not None and result.status == ResultStatus.QUEUED:
        result.status, result.failure_reason = ResultStatus.FAILED, refusal.reason
        result.details = refusal.details
        result.finished_at = timezone.now()
    result.save()
    Run.objects.filter(pk=run.pk).update(candidate_count=Candidate.objects.filter(run=run).count())
    if result.status == ResultStatus.QUEUED:
        transaction.on_commit(
            lambda: evaluation_dispatch(evaluation.pk, result_ids=[result.pk]), robust=True
        )
    return result


def run_close_live(run: Run, *, extra_budget_notes: Iterable[str] = ()) -> Evaluation:
    """No more candidates: budgets are applied, unattempted tasks get their final result
    (``missing_candidate``, or ``pending`` for deferred families), and the evaluation
    finishes once the last verdict lands."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        evaluation = Evaluation.objects.get(run=locked, number=1)
        if locked.is_submitted:
            return evaluation
        run_apply_budgets(locked, extra_notes=extra_budget_notes)
        run_apply_validity(locked)
        locked.submitted_at = timezone.now()
        locked.save(update_fields=["submitted_at", *VERDICT_ON_RUN_FIELDS])
        attempted = set(
            TaskResult.objects.filter(evaluation=evaluation).values_list("task_id", flat=True)
        )
        now = timezone.now()
        rows = [
            _initial_result(evaluation, task, None, now)
            for task in locked.contract_version.tasks.order_by("position").values(
                "pk", "family", "position"
            )
            if task["pk"] not in attempted
        ]
        TaskResult.objects.bulk_create(rows, batch_size=BULK_BATCH)
    # After the commit, so that a worker landing the last verdict meanwhile and this call
    # cannot both miss it: whichever comes second finishes the evaluation.
    evaluation_finish_if_done(evaluation.pk)
    run.refresh_from_db()
    return evaluation


# --- evaluations ----------------------------------------------------------------------------


def evaluation_create(
    run: Run, *, created_by: Any = None, evaluator: str | None = None
) -> Evaluation:
    """A new scoring pass over every task of the run's contract version, by ``evaluator``
    (runs.evaluators; default: the first its contract allows). An evaluator the contract does
    not allow raises EvaluatorNotAllowed, naming the allowed ones, and nothing is stored.

    Results that need no verifier work are final at once: deferred families are ``pending``
    and tasks without a candidate ``failed`` (``missing_candidate``). The rest are queued, and
    their messages are sent only when this transaction commits.
    """
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.mode == RunMode.EPISODES and not locked.is_submitted:
            raise RunAlreadySubmitted(f"run {run.pk} is still live: re-score it once closed")
        number = (run.evaluations.aggregate(top=Max("number"))["top"] or 0) + 1
        evaluation = Evaluation.objects.create(
            run=run,
            number=number,
            evaluator=_chosen_evaluator(run.contract_version, evaluator).key,
            created_by=_user_or_none(created_by),
        )
        rows = _result_rows(evaluation, run, timezone.now())
        TaskResult.objects.bulk_create(rows, batch_size=BULK_BATCH)
        Evaluation.objects.filter(pk=evaluation.pk).update(total=len(rows))
        evaluation_finish_if_done(evaluation.pk)
        transaction.on_commit(lambda: evaluation_dispatch(evaluation.pk))
    evaluation.refresh_from_db()
    return evaluation


def _chosen_evaluator(contract_version: ContractVersion, key: str | None = None) -> Evaluator:
    """The contract's choice (runs.evaluators), and for an uploaded evaluation its own
    word as well: it must declare that it scores this pack's version."""
    evaluator = evaluator_choose(contract_version.contract, key)
    if evaluator.program:
        definition = uploaded_definition(evaluator.key)
        if definition is None or not scores_version(definition, contract_version):
            raise EvaluatorNotAllowed(
                f"{evaluator.key} does not declare that it scores {contract_version.pack.pack_id} "
                f"version {contract_version.version} (its evaluation.yaml's scores)."
            )
    return evaluator


def _scored_by_program(evaluation: Evaluation) -> bool:
    """Whether an uploaded program scores this evaluation's results (looked up once)."""
    cached = getattr(evaluation, "_scored_by_program", None)
    if cached is None:
        cached = evaluator_get(evaluation.evaluator).program
        evaluation._scored_by_program = cached  # type: ignore[attr-defined]
    return cached


def _result_rows(evaluation: Evaluation, run: Run, now: Any) -> list[TaskResult]:
    """One result per (task, sample), in task order then sample order.

    Every task gets as many results as the run has samples per task (the highest sample
    number given for any task, plus one): a sample the run left out is a ``missing_candidate``
    failure, so pass@k sees the same n for every task, and a task left out entirely cannot
    shrink the k the run's samples allow.
    """
    by_task: dict[int, dict[int, tuple[int, list[Any]]]] = {}
    for task_pk, sample, pk, violations in Candidate.objects.filter(run=run).values_list(
        "task_id", "sample", "pk", "contract_violations"
    ):
        by_task.setdefault(task_pk, {})[sample] = (pk, violations)
    per_task = 1 + max((max(samples) for samples in by_task.values()), default=0)
    rows: list[TaskResult] = []
    for task in run.contract_version.tasks.order_by("position").values("pk", "family", "position"):
        given = by_task.get(task["pk"], {})
        for sample in range(per_task):
            pk, violations = given.get(sample, (None, []))
            rows.append(
                _initial_result(evaluation, task, pk, now, sample=sample, violations=violations)
            )
    return rows


def _initial_result(
    evaluation: Evaluation,
    task: dict[str, Any],
    candidate_id: int | None,
    now: Any,
    *,
    sample: int = 0,
    violations: list[Any] | None = None,
) -> TaskResult:
    family = task["family"]
    row = TaskResult(
        evaluation=evaluation,
        task_id=task["pk"],
        candidate_id=candidate_id,
        family=family,
        position=task["position"],
        sample=sample,
        queue=WorkQueue.TEXT if is_text_family(family) else WorkQueue.SANDBOX,
    )
    program = _scored_by_program(evaluation)
    if program:
        # An author's program scores any family's candidate, in a sandbox.
        row.queue = WorkQueue.SANDBOX
    if not program and not get_family(family).active:
        row.status, row.failure_reason = ResultStatus.PENDING, Reason.NO_VERIFIER
        row.finished_at = now
    elif candidate_id is None:
        row.status, row.failure_reason = ResultStatus.FAILED, Reason.MISSING_CANDIDATE
        row.finished_at = now
    elif violations:
        # The candidate broke its contract: failed before, and instead of, any verifier.
        row.status, row.failure_reason = ResultStatus.FAILED, Reason.CONTRACT_VIOLATION
        row.details = {"contract_violations": list(violations)}
        row.finished_at = now
    return row
