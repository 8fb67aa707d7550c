"""Run API (v1): create a run, add candidates in batches, submit, follow the evaluation.

Responses carry verdicts, scores, counts and timings only: never a candidate, a verifier's
stdout/stderr or a string from its details (privileged: debug mode, DESIGN.md §1).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import permissions, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import APIException, ParseError, PermissionDenied
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle
from rest_framework.views import APIView

from packs.models import ContractVersion
from packs.permissions import CanBrowse
from packs.uploads import cap_uploads, upload_declared_too_large, upload_was_too_large
from runs import access, privileged
from runs.bundle import (
    USAGE_KEYS,
    BundleRejected,
    ParsedBundle,
    parse_bundle_file,
    parse_candidate_objects,
)
from runs.models import AuditAction, Evaluation, ResultStatus, Run, RunSource, TaskResult
from runs.selectors import public_detail_counts
from runs.services import (
    RunAlreadySubmitted,
    RunMetadata,
    evaluation_create,
    run_add_candidates,
    run_create,
    run_submit,
    run_submit_bundle,
)

MAX_BATCH_ITEMS = 1000


# --- limits and throttles --------------------------------------------------------------------


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def _declared_length(request: Request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ParseError("Content-Length is not a number.") from None


def _cap_body(request: Request, limit: int) -> None:
    """Refuse a JSON body over the limit before it is read (DRF's parser reads it whole)."""
    if _declared_length(request) > limit:
        raise RequestTooLarge(f"The request body is larger than the {filesizeformat(limit)} limit.")


class SafeJSONParser(JSONParser):
    """JSON parser that answers 400, not 500, for JSON nested too deeply to decode."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document nests too deeply.") from None


class RunWriteThrottle(ScopedRateThrottle):
    """Per-user (or per-address) rate of a write scope, read from settings at request time."""

    def get_rate(self) -> str | None:
        self.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
        return super().get_rate()


class RunApiView(APIView):
    """Writes are throttled by ``throttle_scope``; reads are not."""

    throttle_scope = "run_writes"
    parser_classes = [SafeJSONParser]

    def get_throttles(self) -> list[BaseThrottle]:
        if self.request.method in permissions.SAFE_METHODS:
            return []
        return [RunWriteThrottle()]


# --- serializers -------------------------------------------------------------------------------


def _absolute(request: Request, name: str, **kwargs: Any) -> str:
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
            elif isinstance(item, bool) or not isinstance(item, int | float) or item < 0:
                errors[key] = ["must be a non-negative number"]
        if errors:
            raise serializers.ValidationError(errors)
        return value


def contract_version_or_errors(pack: str, version: int) -> ContractVersion:
    """The contract version a run targets; unknown ones are a 400 naming the field."""
    contract_version = (
        ContractVersion.objects.select_related("pack")
        .filter(pack__pack_id=pack, version=version)
        .first()
    )
    if contract_version is not None:
        return contract_version
    versions = list(
        ContractVersion.objects.filter(pack__pack_id=pack)
        .order_by("version")
        .values_list("version", flat=True)
    )
    if not versions:
        raise serializers.ValidationError({"pack": [f"There is no pack {pack!r}."]})
    known = ", ".join(str(v) for v in versions)
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

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["contract_version"] = contract_version_or_errors(attrs["pack"], attrs["version"])
        return attrs


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
    submitted_by = serializers.CharField(source="submitted_by.username", allow_null=True)
    created_at = serializers.DateTimeField()
    submitted = serializers.BooleanField(source="is_submitted")
    submitted_at = serializers.DateTimeField(allow_null=True)
    candidate_count = serializers.IntegerField()
    usage = serializers.DictField()
    over_budget = serializers.BooleanField()
    budget_notes = serializers.ListField(child=serializers.CharField())
    urls = serializers.SerializerMethodField()

    def get_urls(self, run: Run) -> dict[str, str]:
        request = self.context["request"]
        return {
            "self": _absolute(request, "api-run", run_id=run.pk),
            "candidates": _absolute(request, "api-run-candidates", run_id=run.pk),
            "submit": _absolute(request, "api-run-submit", run_id=run.pk),
            "evaluations": _absolute(request, "api-run-evaluations", run_id=run.pk),
            "page": _absolute(request, "runs:detail", run_id=run.pk),
        }


class CountsOutput(serializers.Serializer):
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    error = serializers.IntegerField()
    pending = serializers.IntegerField()


class EvaluationSummaryOutput(serializers.Serializer):
    """One evaluation in a list; ``counts`` come from the context (one grouped query)."""

    number = serializers.IntegerField()
    evaluator = serializers.CharField()
    status = serializers.CharField()
    done = serializers.BooleanField(source="is_done")
    total = serializers.IntegerField()
    counts = serializers.SerializerMethodField()
    score = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    status_url = serializers.SerializerMethodField()
    results_url = serializers.SerializerMethodField()

    @extend_schema_field(CountsOutput)
    def get_counts(self, evaluation: Evaluation) -> dict[str, int]:
        return self.context["counts"].get(evaluation.pk, _no_counts())

    def get_status_url(self, evaluation: Evaluation) -> str:
        return _evaluation_url(self.context["request"], "api-evaluation", evaluation)

    def get_results_url(self, evaluation: Evaluation) -> str:
        return _evaluation_url(self.context["request"], "api-evaluation-results", evaluation)


def _evaluation_url(request: Request, name: str, evaluation: Evaluation) -> str:
    return _absolute(request, name, run_id=evaluation.run_id, number=evaluation.number)


class RunDetailOutput(RunOutput):
    evaluations = EvaluationSummaryOutput(many=True)


class EvaluationStatusOutput(serializers.Serializer):
    run = serializers.IntegerField()
    evaluation = serializers.IntegerField()
    evaluator = serializers.CharField()
    status = serializers.CharField()
    done = serializers.BooleanField()
    total = serializers.IntegerField()
    counts = CountsOutput()
    score = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    results_url = serializers.URLField()


class TaskResultOutput(serializers.Serializer):
    task_id = serializers.CharField(source="task.task_id")
    family = serializers.CharField()
    status = serializers.CharField()
    score = serializers.FloatField()
    failure_reason = serializers.CharField()
    duration_seconds = serializers.FloatField(allow_null=True)
    sandbox_backend = serializers.CharField()
    attempts = serializers.IntegerField()
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
    candidate = serializers.DictField(
        help_text='{"kind": "text"|"code"|"patch"|"workspace", ...} (see README: bundle format)'
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
    status = serializers.CharField()
    status_url = serializers.URLField()
    results_url = serializers.URLField()
    over_budget = serializers.BooleanField()
    budget_notes = serializers.ListField(child=serializers.CharField())


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
        attrs["contract_version"] = contract_version_or_errors(attrs["pack"], attrs["version"])
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


# --- helpers -------------------------------------------------------------------------------------


def _runs(request: Request) -> QuerySet[Run]:
    """Runs the requesting user may see (runs.access): others' drafts do not exist (404)."""
    return access.visible_runs(request.user).select_related(
        "contract_version__pack", "submitted_by"
    )


def _run_for_writer(request: Request, run_id: int) -> Run:
    """The run, if the requesting user created it (readers may see it; one user writes)."""
    run = get_object_or_404(_runs(request), pk=run_id)
    if not access.can_write(request.user, run):
        raise PermissionDenied("Only the user who created this run may change it.")
    return run


def _evaluation_get(request: Request, run_id: int, number: int) -> Evaluation:
    return get_object_or_404(
        Evaluation.objects.select_related("run__contract_version__pack"),
        run__in=_runs(request),
        run_id=run_id,
        number=number,
    )


def _rejected(exc: BundleRejected, *, with_file: bool) -> Response:
    if with_file:
        errors = [
            {"file": p.file, "line": p.line, "field": p.field, "message": p.message}
            for p in exc.problems
        ]
    else:
        errors = [{"item": p.line, "field": p.field, "message": p.message} for p in exc.problems]
    return Response({"detail": str(exc), "errors": errors, "more": exc.more}, status=400)


def _already_submitted(run: Run) -> Response:
    return Response(
        {"detail": f"Run {run.pk} is already submitted; create a new run for new candidates."},
        status=status.HTTP_409_CONFLICT,
    )


def _queued_body(request: Request, run: Run, evaluation: Evaluation) -> dict[str, Any]:
    return {
        "run": run.pk,
        "evaluation": evaluation.number,
        "status": evaluation.status,
        "status_url": _evaluation_url(request, "api-evaluation", evaluation),
        "results_url": _evaluation_url(request, "api-evaluation-results", evaluation),
        "over_budget": run.over_budget,
        "budget_notes": run.budget_notes,
    }


def _no_counts() -> dict[str, int]:
    return dict.fromkeys(ResultStatus.values, 0)


def evaluation_counts(evaluation: Evaluation) -> dict[str, int]:
    """Results per status, in one aggregate query."""
    return TaskResult.objects.filter(evaluation=evaluation).aggregate(
        **{value: Count("pk", filter=Q(status=value)) for value in ResultStatus.values}
    )


def evaluations_with_counts(request: Request, run: Run) -> list[dict[str, Any]]:
    """A run's evaluations, newest first, with live counts per status (two queries)."""
    evaluations = list(run.evaluations.order_by("-number"))
    counts: dict[int, dict[str, int]] = {}
    rows = (
        TaskResult.objects.filter(evaluation__run=run)
        .values_list("evaluation_id", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for evaluation_id, result_status, n in rows:
        counts.setdefault(evaluation_id, _no_counts())[result_status] = n
    context = {"request": request, "counts": counts}
    return EvaluationSummaryOutput(evaluations, many=True, context=context).data


# --- views ---------------------------------------------------------------------------------------


class RunListCreateApi(RunApiView):
    # Documents the page envelope (count/next/previous/results) and ?page in the schema.
    pagination_class = PageNumberPagination
    permission_classes = [CanBrowse, permissions.DjangoModelPermissionsOrAnonReadOnly]
    queryset = Run.objects.none()

    @extend_schema(
        operation_id="runs_list",
        parameters=[RunFilter],
        responses={200: RunOutput(many=True), 400: OpenApiResponse(description="Bad filter.")},
    )
    def get(self, request: Request) -> Response:
        filters = RunFilter(data=request.query_params)
        filters.is_valid(raise_exception=True)
        runs = _runs(request).order_by("-created_at", "-id")
        if "pack" in filters.validated_data:
            runs = runs.filter(contract_version__pack__pack_id=filters.validated_data["pack"])
        if "version" in filters.validated_data:
            runs = runs.filter(contract_version__version=filters.validated_data["version"])
        if "agent" in filters.validated_data:
            runs = runs.filter(agent_name__iexact=filters.validated_data["agent"])
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(runs, request, view=self)
        data = RunOutput(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)

    @extend_schema(
        operation_id="runs_create",
        request=RunMetadataInput,
        responses={
            201: RunOutput,
            400: OpenApiResponse(description='Field errors, e.g. {"pack": [...]}'),
            403: OpenApiResponse(description="Not signed in, or no runs.add_run permission."),
            413: OpenApiResponse(description="Body too large."),
            429: OpenApiResponse(description="Throttled."),
        },
    )
    def post(self, request: Request) -> Response:
        _cap_body(request, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        payload = RunMetadataInput(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        run = run_create(
            contract_version=data["contract_version"],
            metadata=RunMetadata(
                agent_name=data["agent_name"],
                agent_version=data.get("agent_version", ""),
                model_name=data.get("model_name", ""),
                notes=data.get("notes", ""),
                usage=data.get("usage"),
            ),
            source=RunSource.API,
            user=request.user,
        )
        run = _runs(request).get(pk=run.pk)
        return Response(RunOutput(run, context={"request": request}).data, status=201)


class RunDetailApi(RunApiView):
    @extend_schema(operation_id="run_detail", responses=RunDetailOutput)
    def get(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(_runs(request), pk=run_id)
        body = RunOutput(run, context={"request": request}).data
        return Response({**body, "evaluations": evaluations_with_counts(request, run)})


class RunCandidatesApi(RunApiView):
    permission_classes = [permissions.DjangoModelPermissions]
    queryset = Run.objects.none()
    throttle_scope = "run_candidates"

    @extend_schema(
        operation_id="run_candidates_add",
        request=CandidateBatchDoc,
        responses={
            200: CandidatesAddedOutput,
            400: OpenApiResponse(
                description='Field errors ({"candidates": [...]}), or the refused items: '
                '{"detail", "errors": [{"item", "field", "message"}], "more"}.'
            ),
            403: OpenApiResponse(description="Not the run's creator, or no permission."),
            409: OpenApiResponse(description="The run is already submitted."),
            413: OpenApiResponse(description="Body too large."),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = _run_for_writer(request, run_id)
        _cap_body(request, settings.SECUREBENCH_MAX_BATCH_BYTES)
        if run.is_submitted:
            return _already_submitted(run)
        payload = CandidateBatchInput(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            lines = parse_candidate_objects(payload.validated_data["candidates"])
            added = run_add_candidates(run, lines)
        except BundleRejected as exc:
            return _rejected(exc, with_file=False)
        except RunAlreadySubmitted:
            return _already_submitted(run)
        return Response({"added": added, "candidate_count": run.candidate_count})


class RunSubmitApi(RunApiView):
    permission_classes = [permissions.DjangoModelPermissions]
    queryset = Run.objects.none()

    @extend_schema(
        operation_id="run_submit",
        request=None,
        responses={
            202: EvaluationQueuedOutput,
            403: OpenApiResponse(description="Not the run's creator, or no permission."),
            409: OpenApiResponse(description="The run is already submitted."),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = _run_for_writer(request, run_id)
        try:
            evaluation = run_submit(run, user=request.user)
        except RunAlreadySubmitted:
            return _already_submitted(run)
        return Response(_queued_body(request, run, evaluation), status=202)


def _bundle_too_large() -> RequestTooLarge:
    limit = filesizeformat(settings.SECUREBENCH_MAX_BUNDLE_BYTES)
    return RequestTooLarge(f"The bundle is larger than the {limit} limit.")


class RunBundleApi(RunApiView):
    permission_classes = [permissions.DjangoModelPermissions]
    parser_classes = [MultiPartParser]
    queryset = Run.objects.none()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Session authentication's CSRF check reads a multipart body; cap it before that.
        if request.method == "POST":
            limit = settings.SECUREBENCH_MAX_BUNDLE_BYTES
            if upload_declared_too_large(request._request, limit):
                raise _bundle_too_large()
            cap_uploads(request._request, limit)
        super().initial(request, *args, **kwargs)

    @extend_schema(
        operation_id="run_bundle_submit",
        request={"multipart/form-data": BundleInput},
        responses={
            201: BundleSubmittedOutput,
            400: OpenApiResponse(
                description='Field errors ({"pack": [...]}), or the refused bundle: '
                '{"detail", "errors": [{"file", "line", "field", "message"}], "more"}.'
            ),
            403: OpenApiResponse(description="Not signed in, or no runs.add_run permission."),
            413: OpenApiResponse(description="Bundle too large."),
        },
    )
    def post(self, request: Request) -> Response:
        data = request.data
        if upload_was_too_large(request._request):
            raise _bundle_too_large()
        payload = BundleInput(data=data)
        payload.is_valid(raise_exception=True)
        fields = payload.validated_data
        try:
            bundle = _parse_upload(fields["bundle"])
        except BundleRejected as exc:
            return _rejected(exc, with_file=True)
        if not (fields.get("agent_name") or bundle.metadata.get("agent_name")):
            raise serializers.ValidationError(
                {"agent_name": ["Give agent_name, or put it in the bundle's run line."]}
            )
        metadata = RunMetadata(
            agent_name=fields.get("agent_name", ""),
            agent_version=fields.get("agent_version", ""),
            model_name=fields.get("model_name", ""),
            notes=fields.get("notes", ""),
        )
        try:
            run, evaluation = run_submit_bundle(
                contract_version=fields["contract_version"],
                bundle=bundle,
                metadata=metadata,
                source=RunSource.API,
                user=request.user,
            )
        except BundleRejected as exc:
            return _rejected(exc, with_file=True)
        run = _runs(request).get(pk=run.pk)
        body = {
            "run": RunOutput(run, context={"request": request}).data,
            "evaluation": _queued_body(request, run, evaluation),
        }
        return Response(body, status=201)


def _parse_upload(upload: UploadedFile) -> ParsedBundle:
    display_name = Path(upload.name or "bundle").name
    if hasattr(upload, "temporary_file_path"):
        return parse_bundle_file(Path(upload.temporary_file_path()), display_name=display_name)
    with tempfile.TemporaryDirectory(prefix="bundle-upload-") as scratch:
        path = Path(scratch) / "bundle"
        with path.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        return parse_bundle_file(path, display_name=display_name)


class RunEvaluationsApi(RunApiView):
    permission_classes = [CanBrowse, permissions.DjangoModelPermissionsOrAnonReadOnly]
    queryset = Evaluation.objects.none()

    @extend_schema(
        operation_id="run_evaluations_list", responses=EvaluationSummaryOutput(many=True)
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(_runs(request), pk=run_id)
        return Response(evaluations_with_counts(request, run))

    @extend_schema(
        operation_id="run_reevaluate",
        request=None,
        responses={
            202: EvaluationQueuedOutput,
            403: OpenApiResponse(description="No runs.add_evaluation permission."),
            409: OpenApiResponse(description="The run is not submitted yet."),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(_runs(request), pk=run_id)
        if not run.is_submitted:
            return Response(
                {"detail": f"Run {run.pk} is not submitted yet; submit it first."},
                status=status.HTTP_409_CONFLICT,
            )
        evaluation = evaluation_create(run, created_by=request.user)
        return Response(_queued_body(request, run, evaluation), status=202)


class EvaluationStatusApi(RunApiView):
    @extend_schema(operation_id="evaluation_status", responses=EvaluationStatusOutput)
    def get(self, request: Request, run_id: int, number: int) -> Response:
        evaluation = _evaluation_get(request, run_id, number)
        body = {
            "run": evaluation.run_id,
            "evaluation": evaluation.number,
            "evaluator": evaluation.evaluator,
            "status": evaluation.status,
            "done": evaluation.is_done,
            "total": evaluation.total,
            "counts": evaluation_counts(evaluation),
            "score": evaluation.score,
            "ci_low": evaluation.ci_low,
            "ci_high": evaluation.ci_high,
            "created_at": evaluation.created_at,
            "started_at": evaluation.started_at,
            "finished_at": evaluation.finished_at,
            "results_url": _evaluation_url(request, "api-evaluation-results", evaluation),
        }
        return Response(EvaluationStatusOutput(body).data)


class EvaluationResultsApi(RunApiView):
    # Documents the page envelope (count/next/previous/results) and ?page in the schema.
    pagination_class = PageNumberPagination

    @extend_schema(
        operation_id="evaluation_results",
        parameters=[
            ResultFilter,
            OpenApiParameter("page", OpenApiTypes.INT, required=False),
        ],
        responses=TaskResultOutput(many=True),
    )
    def get(self, request: Request, run_id: int, number: int) -> Response:
        evaluation = _evaluation_get(request, run_id, number)
        filters = ResultFilter(data=request.query_params)
        filters.is_valid(raise_exception=True)
        mode = _privileged_mode(request, evaluation.run)
        # Logs are never loaded, let alone serialised, unless privileged (debug mode only).
        fields = [
            "task__task_id",
            "family",
            "status",
            "score",
            "failure_reason",
            "duration_seconds",
            "sandbox_backend",
            "attempts",
            "details",
            "position",
        ]
        results = (
            TaskResult.objects.filter(evaluation=evaluation, **filters.validated_data)
            .select_related("task")
            .only(*fields, *(("stdout", "stderr") if mode else ()))
            .order_by("position")
        )
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(results, request, view=self)
        context = {"request": request, "origin": evaluation.run.origin}
        output = PrivilegedTaskResultOutput if mode else TaskResultOutput
        if mode is not None:
            cv = evaluation.run.contract_version
            privileged.audit(
                request._request,
                AuditAction.API_RESULTS,
                mode=mode,
                object_type="evaluation",
                object_id=evaluation.pk,
                pack_id=cv.pack.pack_id,
                version=cv.version,
                resource=f"run {evaluation.run_id} · evaluation {evaluation.number} · "
                f"page {request.query_params.get('page', '1')}",
            )
        return paginator.get_paginated_response(output(page, many=True, context=context).data)


def _privileged_mode(request: Request, run: Run) -> privileged.DebugMode | None:
    """Debug mode of a browser session privileged for the run's pack; token clients (agent
    harnesses) never get privileged fields, whoever owns the token."""
    if not isinstance(request.successful_authenticator, SessionAuthentication):
        return None
    if not access.can_view_privileged(request.user, run):
        return None
    return privileged.debug_mode(request._request)
