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
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import APIException, ParseError, PermissionDenied
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle
from rest_framework.views import APIView

from packs.api_parsers import TextJSONParser
from packs.models import ContractVersion
from packs.permissions import CanBrowse
from packs.uploads import cap_uploads, upload_declared_too_large, upload_was_too_large
from runs import access, modes, privileged, validity
from runs.api_serializers import (
    BundleInput,
    BundleSubmittedOutput,
    CandidateBatchDoc,
    CandidateBatchInput,
    CandidatesAddedOutput,
    EvaluationQueuedOutput,
    EvaluationStatusOutput,
    EvaluationSummaryOutput,
    PrivilegedTaskResultOutput,
    ReevaluateInput,
    ResultFilter,
    RunCreatedOutput,
    RunDetailOutput,
    RunFilter,
    RunMetadataInput,
    RunOutput,
    TaskResultOutput,
    evaluation_metrics,
    evaluation_url,
    no_counts,
    score_facts,
)
from runs.bundle import BundleRejected, ParsedBundle, parse_bundle_file, parse_candidate_objects
from runs.evaluators import EvaluatorNotAllowed
from runs.models import AuditAction, Evaluation, ResultStatus, Run, RunMode, RunSource, TaskResult
from runs.services import (
    RunAlreadySubmitted,
    RunMetadata,
    evaluation_create,
    run_add_candidates,
    run_create,
    run_submit,
    run_submit_bundle,
)
from runs.state import one_moment, open_counts, run_states

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


class RunWriteThrottle(ScopedRateThrottle):
    """Per-user (or per-address) rate of a write scope, read from settings at request time."""

    def get_rate(self) -> str | None:
        self.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
        return super().get_rate()


class RunApiView(APIView):
    """Writes are throttled by ``throttle_scope``; reads are not."""

    throttle_scope = "run_writes"
    parser_classes = [TextJSONParser]

    def get_throttles(self) -> list[BaseThrottle]:
        if self.request.method in permissions.SAFE_METHODS:
            return []
        return [RunWriteThrottle()]


# --- helpers -------------------------------------------------------------------------------------


def _runs(request: Request) -> QuerySet[Run]:
    """Runs the requesting user may see (runs.access): others' drafts do not exist (404)."""
    # ``judged`` (runs.validity): the run's validity in one query, for lists too.
    return (
        access.visible_runs(request.user)
        .select_related("contract_version__pack", "submitted_by")
        .annotate(judged=validity.judged_candidates())
    )


def run_for_writer(request: Request, run_id: int) -> Run:
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


def already_submitted_response(run: Run) -> Response:
    return Response(
        {"detail": f"Run {run.pk} is already submitted; create a new run for new candidates."},
        status=status.HTTP_409_CONFLICT,
    )


def live_run_response(run: Run) -> Response:
    # An episode run's candidates are its episodes' final answers; it closes itself.
    return Response(
        {
            "detail": f"Run {run.pk} is a live episode run: its candidates come from its "
            "episodes, and it is submitted when its client calls cube/shutdown or its URL is "
            "revoked or expires."
        },
        status=status.HTTP_409_CONFLICT,
    )


def _queued_body(request: Request, run: Run, evaluation: Evaluation) -> dict[str, Any]:
    return {
        "run": run.pk,
        "evaluation": evaluation.number,
        "evaluator": evaluation.evaluator,
        "status": evaluation.status,
        "status_url": evaluation_url(request, "api-evaluation", evaluation),
        "results_url": evaluation_url(request, "api-evaluation-results", evaluation),
        "over_budget": run.over_budget,
        "budget_notes": run.budget_notes,
        "valid": run.valid,
        "invalid_reasons": run.invalid_reasons,
    }


def evaluation_counts(evaluation: Evaluation) -> dict[str, int]:
    """Results per status, in one aggregate query."""
    return TaskResult.objects.filter(evaluation=evaluation).aggregate(
        **{value: Count("pk", filter=Q(status=value)) for value in ResultStatus.values}
    )


def evaluations_with_counts(request: Request, run: Run) -> list[dict[str, Any]]:
    """A run's evaluations, newest first, with live counts per status (two queries)."""
    evaluations = list(run.evaluations.order_by("-number"))
    counts = {
        pk: {**no_counts(), **found}
        for pk, found in open_counts(evaluation.pk for evaluation in evaluations).items()
    }
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
        # A version's health-check runs are listed on its health report, never here.
        # Health-check and canary runs are listed on their report and on /operations/.
        runs = _runs(request).filter(pk__in=access.listed_runs(request.user))
        runs = runs.order_by("-created_at", "-id")
        if "pack" in filters.validated_data:
            runs = runs.filter(contract_version__pack__pack_id=filters.validated_data["pack"])
        if "version" in filters.validated_data:
            runs = runs.filter(contract_version__version=filters.validated_data["version"])
        if "agent" in filters.validated_data:
            runs = runs.filter(agent_name__iexact=filters.validated_data["agent"])
        paginator = PageNumberPagination()
        with one_moment():
            page = paginator.paginate_queryset(runs, request, view=self)
            context = {"request": request, "states": run_states(page)}
            data = RunOutput(page, many=True, context=context).data
        return paginator.get_paginated_response(data)

    @extend_schema(
        operation_id="runs_create",
        request=RunMetadataInput,
        responses={
            201: OpenApiResponse(
                RunCreatedOutput,
                description="The run. With mode=episodes it is open at once, served as a CUBE "
                "benchmark: benchmark_url (shown this once, never stored) and expires_at.",
            ),
            400: OpenApiResponse(description='Field errors, e.g. {"pack": [...]}'),
            403: OpenApiResponse(description="Not signed in, or no runs.add_run permission."),
            413: OpenApiResponse(description="Body too large."),
            429: OpenApiResponse(description="Throttled."),
        },
    )
    def post(self, request: Request) -> Response:
        _cap_body(request, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        payload = RunMetadataInput(data=request.data, context={"request": request})
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        metadata = RunMetadata(
            agent_name=data["agent_name"],
            agent_version=data.get("agent_version", ""),
            model_name=data.get("model_name", ""),
            notes=data.get("notes", ""),
            usage=data.get("usage"),
        )
        if data["mode"] == RunMode.EPISODES:
            return _open_episode_run(request, data["contract_version"], metadata)
        run = run_create(
            contract_version=data["contract_version"],
            metadata=metadata,
            source=RunSource.API,
            user=request.user,
        )
        run = _runs(request).get(pk=run.pk)
        return Response(RunOutput(run, context={"request": request}).data, status=201)


def _open_episode_run(
    request: Request, contract_version: ContractVersion, metadata: RunMetadata
) -> Response:
    # The episodes app registers its opener when Django starts (runs never imports it).
    opener = modes.run_opener(RunMode.EPISODES)
    if opener is None:
        raise serializers.ValidationError({"mode": ["Episode runs are not served by this site."]})
    opened = opener(
        contract_version=contract_version,
        metadata=metadata,
        source=RunSource.API,
        user=request.user,
        base_url=request.build_absolute_uri("/"),
    )
    run = _runs(request).get(pk=opened.run.pk)
    body = dict(RunOutput(run, context={"request": request}).data)
    body["benchmark_url"] = opened.extra["benchmark_url"]
    body["expires_at"] = serializers.DateTimeField().to_representation(opened.extra["expires_at"])
    response = Response(body, status=201)
    # The answer holds the run's credential: no cache along the way may keep it.
    response["Cache-Control"] = "no-store"
    return response


class RunDetailApi(RunApiView):
    @extend_schema(operation_id="run_detail", responses=RunDetailOutput)
    def get(self, request: Request, run_id: int) -> Response:
        # The state and the evaluations' counts of one moment, as the run page reads them.
        with one_moment():
            run = get_object_or_404(_runs(request), pk=run_id)
            body = RunOutput(run, context={"request": request}).data
            evaluations = evaluations_with_counts(request, run)
        return Response({**body, "evaluations": evaluations})


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
            409: OpenApiResponse(
                description="The run is already submitted, or is a live episode run."
            ),
            413: OpenApiResponse(description="Body too large."),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = run_for_writer(request, run_id)
        _cap_body(request, settings.SECUREBENCH_MAX_BATCH_BYTES)
        if run.mode == RunMode.EPISODES:
            return live_run_response(run)
        if run.is_submitted:
            return already_submitted_response(run)
        payload = CandidateBatchInput(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            lines = parse_candidate_objects(payload.validated_data["candidates"])
            added = run_add_candidates(run, lines)
        except BundleRejected as exc:
            return _rejected(exc, with_file=False)
        except RunAlreadySubmitted:
            return already_submitted_response(run)
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
            409: OpenApiResponse(
                description="The run is already submitted, or is a live episode run."
            ),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = run_for_writer(request, run_id)
        if run.mode == RunMode.EPISODES:
            return live_run_response(run)
        try:
            evaluation = run_submit(run, user=request.user)
        except RunAlreadySubmitted:
            return already_submitted_response(run)
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
        payload = BundleInput(data=data, context={"request": request})
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
        request=ReevaluateInput,
        responses={
            202: EvaluationQueuedOutput,
            400: OpenApiResponse(
                description="A scorer the version does not allow, or that is unknown: "
                '{"evaluator": [message naming the allowed ones]}.'
            ),
            403: OpenApiResponse(description="No runs.add_evaluation permission."),
            409: OpenApiResponse(description="The run is not submitted yet."),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(_runs(request), pk=run_id)
        payload = ReevaluateInput(data=request.data)
        payload.is_valid(raise_exception=True)
        if not run.is_submitted:
            return Response(
                {"detail": f"Run {run.pk} is not submitted yet; submit it first."},
                status=status.HTTP_409_CONFLICT,
            )
        try:
            evaluation = evaluation_create(
                run,
                created_by=request.user,
                evaluator=payload.validated_data.get("evaluator") or None,
            )
        except EvaluatorNotAllowed as refused:
            return Response({"evaluator": [str(refused)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(_queued_body(request, run, evaluation), status=202)


class EvaluationStatusApi(RunApiView):
    @extend_schema(operation_id="evaluation_status", responses=EvaluationStatusOutput)
    def get(self, request: Request, run_id: int, number: int) -> Response:
        evaluation = _evaluation_get(request, run_id, number)
        counts = evaluation_counts(evaluation)
        body = {
            "run": evaluation.run_id,
            "evaluation": evaluation.number,
            "evaluator": evaluation.evaluator,
            "metrics": evaluation_metrics(evaluation),
            "status": evaluation.status,
            "done": evaluation.is_done,
            "total": evaluation.total,
            "counts": counts,
            "score": evaluation.score,
            **score_facts(
                evaluation.is_done, evaluation.score, evaluation.total, counts["pending"]
            ),
            "ci_low": evaluation.ci_low,
            "ci_high": evaluation.ci_high,
            "created_at": evaluation.created_at,
            "started_at": evaluation.started_at,
            "finished_at": evaluation.finished_at,
            "results_url": evaluation_url(request, "api-evaluation-results", evaluation),
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
            "sample",
            "family",
            "status",
            "score",
            "failure_reason",
            "duration_seconds",
            "sandbox_backend",
            "attempts",
            "waiting_for",
            "details",
            "position",
        ]
        results = (
            TaskResult.objects.filter(evaluation=evaluation, **filters.validated_data)
            .select_related("task")
            .only(*fields, *(("stdout", "stderr") if mode else ()))
            .order_by("position", "sample")
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
