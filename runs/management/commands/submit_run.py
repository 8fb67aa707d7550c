"""python manage.py submit_run --pack ID --version N (--candidates FILE | --oracle | --null)

Submits a run and queues its evaluation; ``--wait`` polls until a worker has finished it and
``--json`` prints the outcome, one object per task, for scripts and CI.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from packs.models import ContractVersion, VersionState
from runs.bundle import BundleRejected, parse_bundle_file
from runs.evaluators import scoring_problem
from runs.models import CandidateOrigin, Evaluation, ResultStatus, RunSource, TaskResult
from runs.services import RunMetadata, draft_refusal, run_submit_bundle, run_submit_reference

POLL_SECONDS = 0.5
NO_WORKER_HINT_SECONDS = 30


class Command(BaseCommand):
    help = "Submit a run (a candidates bundle, or oracle / null candidates) and queue its scoring."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # Django's own --version (print Django's version) would shadow the contract version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pack", required=True, help="pack id, e.g. humaneval-mini")
        parser.add_argument(
            "--version", type=int, help="contract version (default: the latest published)"
        )
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--candidates", type=Path, help=".jsonl, .zip or .tar.gz bundle")
        source.add_argument(
            "--oracle", action="store_true", help="each task's reference solution as candidate"
        )
        source.add_argument("--null", action="store_true", help="empty candidates")
        parser.add_argument("--agent", default="", help="agent name (default: from the bundle)")
        parser.add_argument("--agent-version", default="")
        parser.add_argument("--model", default="")
        parser.add_argument("--notes", default="")
        parser.add_argument("--wait", action="store_true", help="wait until scoring is done")
        parser.add_argument(
            "--timeout", type=float, default=3600.0, help="seconds --wait waits (default 3600)"
        )
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args: object, **options: Any) -> None:
        contract_version = _contract_version(options["pack"], options["version"])
        metadata = RunMetadata(
            agent_name=options["agent"],
            agent_version=options["agent_version"],
            model_name=options["model"],
            notes=options["notes"],
        )
        if options["candidates"] is not None:
            run, evaluation = _submit_bundle(contract_version, options["candidates"], metadata)
        else:
            origin = CandidateOrigin.ORACLE if options["oracle"] else CandidateOrigin.NULL
            if not metadata.agent_name:
                metadata = RunMetadata(agent_name=origin, notes=metadata.notes)
            run, evaluation = run_submit_reference(
                contract_version=contract_version,
                origin=origin,
                metadata=metadata,
                source=RunSource.COMMAND,
            )
        if options["wait"]:
            evaluation = self._wait(evaluation, options["timeout"], quiet=options["json"])
        if options["json"]:
            self.stdout.write(json.dumps(outcome(evaluation)))
        else:
            self.stdout.write(_summary_line(evaluation))
            for line in _validity_lines(evaluation):
                self.stdout.write(line)

    def _wait(self, evaluation: Evaluation, timeout: float, *, quiet: bool) -> Evaluation:
        started = time.monotonic()
        warned = False
        last = ""
        while True:
            evaluation.refresh_from_db()
            if evaluation.is_done:
                return evaluation
            elapsed = time.monotonic() - started
            if elapsed > timeout:
                raise CommandError(
                    f"evaluation {evaluation.number} of run {evaluation.run_id} is not done "
                    f"after {timeout:.0f} s; it keeps running in the background"
                )
            if not warned and elapsed > NO_WORKER_HINT_SECONDS and evaluation.started_at is None:
                warned = True
                sys.stderr.write(
                    "no worker has picked up this evaluation yet: is one running? "
                    "(`make worker`, or `make run` starts one)\n"
                )
            progress = _progress_line(evaluation)
            if progress != last and not quiet:
                sys.stderr.write(progress + "\n")
                last = progress
            time.sleep(POLL_SECONDS)


def _contract_version(pack_id: str, version: int | None) -> ContractVersion:
    """The version asked for, or the latest published one. A draft is refused here, before
    any candidate is built (the reference candidates of a large pack take a while)."""
    versions = ContractVersion.objects.select_related("pack").filter(pack__pack_id=pack_id)
    if version:
        found = versions.filter(version=version).first()
    else:
        latest = versions.order_by("-version")
        found = latest.filter(state=VersionState.PUBLISHED).first() or latest.first()
    if found is None:
        what = f"version {version} of pack {pack_id!r}" if version else f"pack {pack_id!r}"
        raise CommandError(f"{what} is not stored (see `manage.py import_pack`)")
    if (refusal := draft_refusal(found)) is not None:
        raise CommandError(refusal)
    problem = scoring_problem(found.contract)
    if problem is not None:
        raise CommandError(f"{pack_id} v{found.version}: {problem}")
    return found


def _submit_bundle(contract_version: ContractVersion, path: Path, metadata: RunMetadata):
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    try:
        bundle = parse_bundle_file(path, display_name=path.name)
        return run_submit_bundle(
            contract_version=contract_version,
            bundle=bundle,
            metadata=metadata,
            source=RunSource.COMMAND,
        )
    except BundleRejected as rejected:
        lines = "\n".join(f"  {problem}" for problem in rejected.problems)
        more = f"\n  … and {rejected.more} more" if rejected.more else ""
        raise CommandError(f"{path}: run not stored:\n{lines}{more}") from rejected


def _progress_line(evaluation: Evaluation) -> str:
    counts = dict.fromkeys(ResultStatus.values, 0)
    for status, n in (
        TaskResult.objects.filter(evaluation=evaluation)
        .values_list("status")
        .annotate(n=Count("id"))
    ):
        counts[status] = n
    done = sum(counts[s] for s in ("passed", "failed", "error", "pending"))
    total = sum(counts.values())
    return (
        f"{done}/{total} scored ({counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['error']} error); {counts['running']} running, {counts['queued']} queued"
    )


def _summary_line(evaluation: Evaluation) -> str:
    run = evaluation.run
    head = f"run {run.pk}, evaluation {evaluation.number}: {evaluation.status}"
    if not evaluation.is_done:
        return f"{head} (a worker scores it; follow it on /runs/{run.pk}/)"
    score = "n/a" if evaluation.score is None else f"{evaluation.score:.3f}"
    return (
        f"{head}; score {score}, {evaluation.passed} passed, {evaluation.failed} failed, "
        f"{evaluation.errored} error, {evaluation.pending} pending of {evaluation.total}"
    )


def _validity_lines(evaluation: Evaluation) -> list[str]:
    """Nothing for a valid run; else why it is not ranked, one reason a line."""
    run = evaluation.run
    if run.valid:
        return []
    return [
        f"run {run.pk} is invalid (scored, not ranked):",
        *(f"  {reason}" for reason in run.invalid_reasons),
    ]


def outcome(evaluation: Evaluation) -> dict[str, Any]:
    results = (
        TaskResult.objects.filter(evaluation=evaluation)
        .order_by("position", "sample")
        .values_list("task__task_id", "sample", "status", "score", "failure_reason")
    )
    run = evaluation.run
    return {
        "run": evaluation.run_id,
        "evaluation": evaluation.number,
        "status": evaluation.status,
        "evaluator": evaluation.evaluator,
        "score": evaluation.score,
        "ci": [evaluation.ci_low, evaluation.ci_high],
        "metrics": evaluation.metrics,
        "over_budget": run.over_budget,
        "valid": run.valid,
        "invalid_reasons": run.invalid_reasons,
        "results": [
            {
                "task_id": task_id,
                "sample": sample,
                "status": status,
                "score": score,
                "failure_reason": reason or None,
            }
            for task_id, sample, status, score, reason in results
        ],
    }
