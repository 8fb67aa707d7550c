"""Serializers of the run API (v1): what it accepts and what it answers.

Outputs carry verdicts, scores, counts and timings only: never a candidate, a verifier's
stdout/stderr or a string from its details (privileged: debug mode, DESIGN.md §1).
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request

from packs import access as pack_access
from packs.models import ContractVersion
from runs.budgets import usage_figure_problem
from runs.bundle import USAGE_KEYS
from runs.evaluators import EVALUATORS, metrics_of, scoring_problem
from runs.models import Evaluation, ResultStatus, Run, RunMode, TaskResult
from runs.selectors import public_detail_counts
from runs.services import draft_refusal
from runs.state import RunState, run_state
from runs.validity import has_judged_candidate, validity_word

MAX_BATCH_ITEMS = 1000


def no_counts() -> dict[str, int]:
    return dict.fromkeys(ResultStatus.values, 0)


def absolute_url(request: Request, name: str, **kwargs: Any) -> str:
    return request.build_absolute_uri(reverse(name, kwargs=kwargs))


class StrictSerializer(serializers.Serializer):
    """Names unknown keys instead of ignoring them, so a typo (``agent`` for
    ``agent_name``) is an error rather than a silently empty field."""

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "keys"):
            unknown = sorted(set(data.keys()) - set(self.fields) - {"csrfmiddlewaretoken"})
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)


class UsageField(serializers.DictField):
    """Run-level usage: any of wall_seconds, input_tokens, output_tokens, usd (numbers ≥ 0)."""

    def to_internal_value(self, data: Any) -> dict[str, float]:
        value = super().to_internal_value(data)
        errors: dict[str, list[str]] = {}
        for key, item in value.items():
            if key not in USAGE_KEYS:
                errors[key] = ["is not a usage key (allowed: " + ", ".join(USAGE_KEYS) + ")"]
            elif problem := usage_figure_problem(item):
                errors[key] = [problem]
        if errors:
            raise serializers.ValidationError(errors)
        return value


def contract_version_or_errors(pack: str, version: int, *, user: Any) -> ContractVersion:
    """The contract version a run targets; unknown ones, drafts, and ones whose contract allows
    no scorer this site knows (runs.evaluators), are a 400 naming the field. A version the
    user may not see (another pack's draft) is unknown, in the same words."""
    versions = pack_access.visible_versions(user)
    contract_version = (
        versions.select_related("pack").filter(pack__pack_id=pack, version=version).first()
    )
    if contract_version is not None:
        problem = draft_refusal(contract_version) or scoring_problem(contract_version.contract)
        if problem is not None:
            raise serializers.ValidationError({"version": [problem]})
        return contract_version
    numbers = list(
        versions.filter(pack__pack_id=pack).order_by("version").values_list("version", flat=True)
    )
    if not numbers:
        raise serializers.ValidationError({"pack": [f"There is no pack {pack!r}."]})
    known = ", ".join(str(v) for v in numbers)
    raise serializers.ValidationError(
        {"version": [f"Pack {pack!r} has no version {version} (it has: {known})."]}
    )


class RunMetadataInput(StrictSerializer):
    pack = serializers.CharField(max_length=100)
    version = serializers.IntegerField(min_value=1)
    agent_name = serializers.CharField(max_length=200)
    agent_version = serializers.CharField(max_length=100, required=False, allow_blank=True)
    model_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    notes = serializers.CharField(
        max_length=10_000, required=False, allow_blank=True, trim_whitespace=False
    )
    usage = UsageField(required=False)
    mode = serializers.ChoiceField(
        choices=RunMode.choices,
        default=RunMode.BUNDLE,
        help_text='"bundle" (default): add candidates, then submit. "episodes": a live run '
        "served as a CUBE benchmark; the answer carries its benchmark_url, shown this once.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["contract_version"] = contract_version_or_errors(
            attrs["pack"], attrs["version"], user=self.context["request"].user
        )
        return attrs


class RunStateOutput(serializers.Serializer):
    """The run's state as its pages show it (runs.state): the same phase and counts."""

    phase = serializers.ChoiceField(
        choices=["preparing", "open", "live", "queued", "running", "done"],
        help_text="preparing (a worker builds a reference run's candidates), open (candidates "
        "still being added), live (an episode run's agent may act), queued, running, done.",
    )
    word = serializers.CharField(help_text="The phase as the pages say it.")
    evaluation = serializers.IntegerField(
        allow_null=True, help_text="The evaluation counted: the latest one."
    )
    tasks = serializers.IntegerField(help_text="Tasks of the contract version.")
    candidates = serializers.IntegerField()
    total = serializers.IntegerField(help_text="Results the evaluation will have.")
    finished = serializers.IntegerField(help_text="passed + failed + error + pending.")
    scored = serializers.IntegerField(help_text="passed + failed + error.")
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    error = serializers.IntegerField(help_text="Our fault (a verifier or sandbox broke).")
    pending = serializers.IntegerField(help_text="No verifier for the family yet.")
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    unattempted = serializers.IntegerField(help_text="Live runs: tasks no episode ended yet.")
    percent = serializers.IntegerField(help_text="finished / total, rounded down.")
    live = serializers.BooleanField(help_text="Whether the state can still change.")


class RunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    pack = serializers.CharField(source="contract_version.pack.pack_id")
    version = serializers.IntegerField(source="contract_version.version")
    digest = serializers.CharField(source="contract_version.digest")
    task_count = serializers.IntegerField(source="contract_version.task_count")
    agent_name = serializers.CharField()
    agent_version = serializers.CharField()
    model_name = serializers.CharField()
    notes = serializers.CharField()
    source = serializers.CharField()
    origin = serializers.CharField()
    mode = serializers.ChoiceField(choices=RunMode.choices, read_only=True)
    submitted_by = serializers.CharField(source="submitted_by.username", allow_null=True)
    created_at = serializers.DateTimeField()
    submitted = serializers.BooleanField(source="is_submitted")
    submitted_at = serializers.DateTimeField(allow_null=True)
    candidate_count = serializers.IntegerField()
    usage = serializers.DictField()
    over_budget = serializers.BooleanField()
    budget_notes = serializers.ListField(child=serializers.CharField())
    valid = serializers.BooleanField(
        help_text="Whether the run keeps its contract: no candidate broke a rule and it is "
        "within budget (fixed at submission). Only valid runs are ranked."
    )
    invalid_reasons = serializers.ListField(
        child=serializers.CharField(),
        help_text='Why it is invalid: "task T sample S: rule: paths", then "over budget: ...".',
    )
    state = serializers.SerializerMethodField()
    validity = serializers.SerializerMethodField(
        help_text='"valid", "invalid", "unchecked" (not submitted yet) or "not judged": no '
        "candidate is for a task that has a verifier (none at all, or only for families "
        "with no verifier yet), so nothing shows the run valid."
    )
    urls = serializers.SerializerMethodField()

    @extend_schema_field(RunStateOutput)
    def get_state(self, run: Run) -> dict[str, Any]:
        # A list computes its runs' states at once (runs.state.run_states) into the context.
        states: dict[int, RunState] = self.context.get("states") or {}
        found = states.get(run.pk)
        return (found if found is not None else run_state(run)).as_json()

    def get_validity(self, run: Run) -> str:
        judged = getattr(run, "judged", None)  # annotated by lists (one query)
        return validity_word(run, judged=has_judged_candidate(run) if judged is None else judged)

    def get_urls(self, run: Run) -> dict[str, str]:
        request = self.context["request"]
        return {
            "self": absolute_url(request, "api-run", run_id=run.pk),
            "candidates": absolute_url(request, "api-run-candidates", run_id=run.pk),
            "submit": absolute_url(request, "api-run-submit", run_id=run.pk),
            "evaluations": absolute_url(request, "api-run-evaluations", run_id=run.pk),
            "page": absolute_url(request, "runs:detail", run_id=run.pk),
        }


class RunCreatedOutput(RunOutput):
    """A created run; an episode run's answer also carries its URL, shown this once."""

    benchmark_url = serializers.URLField(
        required=False,
        help_text="mode=episodes only: the CUBE benchmark URL. It holds the run's credential, "
        "is shown in this answer only and is never stored: keep it private.",
    )
    expires_at = serializers.DateTimeField(
        required=False, help_text="mode=episodes only: when the benchmark URL stops working."
    )


class CountsOutput(serializers.Serializer):
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    error = serializers.IntegerField()
    pending = serializers.IntegerField()


class MetricOutput(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True, help_text="95 % interval, low end")
    ci_high = serializers.FloatField(allow_null=True, help_text="95 % interval, high end")
    k = serializers.IntegerField(required=False, help_text="pass@k metrics only")


class MetricsField(serializers.DictField):
    """Every metric of a done evaluation's scorer, by name ({} until it is done)."""

    child = MetricOutput()


def evaluation_metrics(evaluation: Evaluation) -> dict[str, dict[str, Any]]:
    if not evaluation.is_done:
        return {}
    shown = metrics_of(evaluation)
    return {name: value.as_json() for name, value in shown}


EVALUATOR_HELP = (
    "The scorer (runs.evaluators), as name@version; score, ci_low and ci_high are its "
    "primary metric, metrics holds them all."
)


NO_VERIFIER_HELP = (
    "Results left out of the score because their family has no verifier yet (the pending "
    "count); never counted as failures."
)
SCORED_HELP = "Results that count in the score: total minus no_verifier."
NO_SCORE_HELP = (
    "Why a done evaluation has no score, in words (null when it has one, or is not done)."
)


def no_score_reason(*, done: bool, score: float | None, total: int, pending: int) -> str | None:
    if not done or score is not None or total <= 0 or pending < total:
        return None
    return (
        "no verifier: no result can be verified (their families have no verifier yet), so "
        "this evaluation has no score"
    )


def score_facts(done: bool, score: float | None, total: int, pending: int) -> dict[str, Any]:
    """``scored``, ``no_verifier`` and ``no_score_reason`` of an evaluation's API answer."""
    return {
        "scored": total - pending,
        "no_verifier": pending,
        "no_score_reason": no_score_reason(done=done, score=score, total=total, pending=pending),
    }


class EvaluationSummaryOutput(serializers.Serializer):
    """One evaluation in a list; ``counts`` come from the context (one grouped query)."""

    number = serializers.IntegerField()
    evaluator = serializers.CharField(help_text=EVALUATOR_HELP)
    metrics = serializers.SerializerMethodField()
    status = serializers.CharField()
    done = serializers.BooleanField(source="is_done")
    total = serializers.IntegerField()
    counts = serializers.SerializerMethodField()
    scored = serializers.SerializerMethodField(help_text=SCORED_HELP)
    no_verifier = serializers.SerializerMethodField(help_text=NO_VERIFIER_HELP)
    score = serializers.FloatField(allow_null=True)
    no_score_reason = serializers.SerializerMethodField(help_text=NO_SCORE_HELP)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    status_url = serializers.SerializerMethodField()
    results_url = serializers.SerializerMethodField()

    @extend_schema_field(CountsOutput)
    def get_counts(self, evaluation: Evaluation) -> dict[str, int]:
        return self.context["counts"].get(evaluation.pk, no_counts())

    def _facts(self, evaluation: Evaluation) -> dict[str, Any]:
        pending = self.get_counts(evaluation)["pending"]
        return score_facts(evaluation.is_done, evaluation.score, evaluation.total, pending)

    def get_scored(self, evaluation: Evaluation) -> int:
        return self._facts(evaluation)["scored"]

    def get_no_verifier(self, evaluation: Evaluation) -> int:
        return self._facts(evaluation)["no_verifier"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_no_score_reason(self, evaluation: Evaluation) -> str | None:
        return self._facts(evaluation)["no_score_reason"]

    @extend_schema_field(MetricsField)
    def get_metrics(self, evaluation: Evaluation) -> dict[str, dict[str, Any]]:
        return evaluation_metrics(evaluation)

    def get_status_url(self, evaluation: Evaluation) -> str:
        return evaluation_url(self.context["request"], "api-evaluation", evaluation)

    def get_results_url(self, evaluation: Evaluation) -> str:
        return evaluation_url(self.context["request"], "api-evaluation-results", evaluation)


def evaluation_url(request: Request, name: str, evaluation: Evaluation) -> str:
    return absolute_url(request, name, run_id=evaluation.run_id, number=evaluation.number)


class RunDetailOutput(RunOutput):
    evaluations = EvaluationSummaryOutput(many=True)


class EvaluationStatusOutput(serializers.Serializer):
    run = serializers.IntegerField()
    evaluation = serializers.IntegerField()
    evaluator = serializers.CharField(help_text=EVALUATOR_HELP)
    metrics = MetricsField()
    status = serializers.CharField()
    done = serializers.BooleanField()
    total = serializers.IntegerField()
    counts = CountsOutput()
    scored = serializers.IntegerField(help_text=SCORED_HELP)
    no_verifier = serializers.IntegerField(help_text=NO_VERIFIER_HELP)
    score = serializers.FloatField(allow_null=True)
    no_score_reason = serializers.CharField(allow_null=True, help_text=NO_SCORE_HELP)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    results_url = serializers.URLField()


class TaskResultOutput(serializers.Serializer):
    task_id = serializers.CharField(source="task.task_id")
    sample = serializers.IntegerField(help_text="The candidate's sample number (0, 1, …).")
    family = serializers.CharField()
    status = serializers.CharField()
    score = serializers.FloatField()
    failure_reason = serializers.CharField()
    duration_seconds = serializers.FloatField(allow_null=True)
    sandbox_backend = serializers.CharField()
    attempts = serializers.IntegerField()
    waiting_for = serializers.CharField(
        help_text='What a running verification waits for ("pulling image …"), else "".'
    )
    counts = serializers.SerializerMethodField()

    def get_counts(self, result: TaskResult) -> dict[str, int | float | bool]:
        return public_detail_counts(result.details, origin=self.context["origin"])


class PrivilegedTaskResultOutput(TaskResultOutput):
    """A session user's view in debug mode, privileged for the pack: stored logs and details."""

    stdout = serializers.CharField()
    stderr = serializers.CharField()
    details = serializers.JSONField()


class CandidateLineDoc(serializers.Serializer):
    task_id = serializers.CharField()
    sample = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="Which of the task's candidates this is (default 0); one per (task, sample), "
        "below the contract's budgets.attempts when set.",
    )
    candidate = serializers.DictField(
        help_text=(
            '{"kind": "text"|"code"|"patch"|"workspace", ...} (see /docs/agents/#bundle-format)'
        )
    )
    usage = serializers.DictField(required=False, child=serializers.FloatField(min_value=0))


class CandidateBatchDoc(serializers.Serializer):
    candidates = CandidateLineDoc(many=True, help_text=f"At most {MAX_BATCH_ITEMS} items.")


class CandidateBatchInput(StrictSerializer):
    # Items are checked by runs.bundle, which numbers each problem by its item (1-based).
    candidates = serializers.ListField(allow_empty=False, max_length=MAX_BATCH_ITEMS)


class CandidatesAddedOutput(serializers.Serializer):
    added = serializers.IntegerField()
    candidate_count = serializers.IntegerField()


class EvaluationQueuedOutput(serializers.Serializer):
    run = serializers.IntegerField()
    evaluation = serializers.IntegerField()
    evaluator = serializers.CharField(help_text="The scorer of this evaluation, name@version.")
    status = serializers.CharField()
    status_url = serializers.URLField()
    results_url = serializers.URLField()
    over_budget = serializers.BooleanField()
    budget_notes = serializers.ListField(child=serializers.CharField())
    valid = serializers.BooleanField()
    invalid_reasons = serializers.ListField(child=serializers.CharField())


class ReevaluateInput(StrictSerializer):
    evaluator = serializers.CharField(
        required=False,
        max_length=64,
        help_text="The scorer, name@version, among those the run's contract version allows "
        f"(default: the first; known here: {', '.join(EVALUATORS)}).",
    )


class BundleInput(StrictSerializer):
    bundle = serializers.FileField(
        help_text="candidates.jsonl, or a .zip / .tar.gz holding candidates.jsonl"
    )
    pack = serializers.CharField(max_length=100)
    version = serializers.IntegerField(min_value=1)
    agent_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    agent_version = serializers.CharField(max_length=100, required=False, allow_blank=True)
    model_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    notes = serializers.CharField(
        max_length=10_000, required=False, allow_blank=True, trim_whitespace=False
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["contract_version"] = contract_version_or_errors(
            attrs["pack"], attrs["version"], user=self.context["request"].user
        )
        return attrs


class BundleSubmittedOutput(serializers.Serializer):
    run = RunOutput()
    evaluation = EvaluationQueuedOutput()


class RunFilter(serializers.Serializer):
    pack = serializers.CharField(required=False, max_length=100)
    version = serializers.IntegerField(required=False, min_value=1)
    agent = serializers.CharField(required=False, max_length=200)


class ResultFilter(serializers.Serializer):
    status = serializers.ChoiceField(choices=ResultStatus.choices, required=False)
    family = serializers.CharField(required=False, max_length=64)
    sample = serializers.IntegerField(required=False, min_value=0)
