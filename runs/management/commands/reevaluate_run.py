"""python manage.py reevaluate_run --run ID [--evaluator name@version] [--wait] [--json]

Queues a new evaluation of a submitted run's candidates by one of the scorers its contract
version allows (default: the first). Earlier evaluations stay. ``--wait`` polls until a
worker has finished it; ``--json`` prints the evaluation with its metrics.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.evaluators import EvaluatorNotAllowed, allowed_evaluators, metrics_of
from runs.models import Evaluation, Run
from runs.services import RunAlreadySubmitted, evaluation_create

POLL_SECONDS = 0.5


class Command(BaseCommand):
    help = "Score a submitted run again, by one of the evaluations its pack version allows."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", type=int, required=True, help="the run's id")
        parser.add_argument(
            "--evaluator", default=None, help="name@version (default: the version's first)"
        )
        parser.add_argument("--wait", action="store_true", help="wait until scoring is done")
        parser.add_argument(
            "--timeout", type=float, default=3600.0, help="seconds --wait waits (default 3600)"
        )
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args: object, **options: Any) -> None:
        run = Run.objects.select_related("contract_version__pack").filter(pk=options["run"]).first()
        if run is None:
            raise CommandError(f"run {options['run']} does not exist")
        if not run.is_submitted:
            raise CommandError(f"run {run.pk} is not submitted yet; it can be re-scored once it is")
        try:
            evaluation = evaluation_create(run, evaluator=options["evaluator"])
        except EvaluatorNotAllowed as refused:
            cv = run.contract_version
            raise CommandError(
                f"run {run.pk} ({cv.pack.pack_id} v{cv.version}) not re-evaluated: {refused}"
            ) from refused
        except RunAlreadySubmitted as refused:  # a live run still open
            raise CommandError(str(refused)) from refused
        if options["wait"]:
            evaluation = _wait(evaluation, options["timeout"])
        if options["json"]:
            self.stdout.write(json.dumps(outcome(evaluation)))
        else:
            self.stdout.write(_summary_line(evaluation))


def _wait(evaluation: Evaluation, timeout: float) -> Evaluation:
    started = time.monotonic()
    while True:
        evaluation.refresh_from_db()
        if evaluation.is_done:
            return evaluation
        if time.monotonic() - started > timeout:
            raise CommandError(
                f"evaluation {evaluation.number} of run {evaluation.run_id} is not done after "
                f"{timeout:.0f} s; it keeps running in the background"
            )
        time.sleep(POLL_SECONDS)


def _metrics(evaluation: Evaluation) -> list[tuple[str, Any]]:
    if not evaluation.is_done:
        return []
    return metrics_of(evaluation)


def _summary_line(evaluation: Evaluation) -> str:
    head = (
        f"run {evaluation.run_id}, evaluation {evaluation.number} by {evaluation.evaluator}: "
        f"{evaluation.status}"
    )
    if not evaluation.is_done:
        return f"{head} (a worker scores it; follow it on /runs/{evaluation.run_id}/)"
    shown = " · ".join(
        f"{name} {'n/a' if m.value is None else f'{m.value:.3f}'}"
        for name, m in _metrics(evaluation)
    )
    return f"{head}; {shown or 'no metric'}"


def outcome(evaluation: Evaluation) -> dict[str, Any]:
    return {
        "run": evaluation.run_id,
        "evaluation": evaluation.number,
        "evaluator": evaluation.evaluator,
        "allowed_evaluators": allowed_evaluators(evaluation.run.contract_version.contract),
        "status": evaluation.status,
        "score": evaluation.score,
        "ci": [evaluation.ci_low, evaluation.ci_high],
        "metrics": {name: value.as_json() for name, value in _metrics(evaluation)},
        "total": evaluation.total,
        "passed": evaluation.passed,
        "failed": evaluation.failed,
        "errored": evaluation.errored,
        "pending": evaluation.pending,
    }
