"""``POST /api/v1/runs/{id}/artifacts/``: an artifact task's files, as large as they come.

Multipart, one part per file named ``file:PATH``, beside ``task_id``, ``sample`` and ``usage``.
The body is refused from its declared length before a byte of it is read (413), and capped
again while it streams in; each file goes to a temporary file as it arrives, hashed on the
way (``packs.uploads``), and is copied into the sealed storage only once the whole request has
passed every check (``runs.artifact_uploads``). Who may call it, and when, is the candidates
endpoint's rule: the run's creator, before the run is submitted.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import TooManyFilesSent
from django.template.defaultfilters import filesizeformat
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import APIException
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from packs.uploads import (
    cap_uploads,
    digest_uploads,
    upload_declared_too_large,
    upload_digests,
    upload_was_too_large,
)
from runs.api import (
    RequestTooLarge,
    RunApiView,
    already_submitted_response,
    live_run_response,
    run_for_writer,
)
from runs.artifact_uploads import artifact_request, run_add_artifact_files
from runs.bundle import BundleRejected
from runs.models import Run, RunMode
from runs.services import RunAlreadySubmitted


class LengthRequired(APIException):
    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_code = "length_required"
    default_detail = (
        "Send the body with a Content-Length: a streamed body of unknown length is not read."
    )


class TooManyParts(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "too_many_files"


class ArtifactUploadDoc(serializers.Serializer):
    task_id = serializers.CharField(help_text="The artifact task the files are for.")
    sample = serializers.IntegerField(
        required=False, min_value=0, help_text="Which of the task's samples (default 0)."
    )
    usage = serializers.CharField(
        required=False,
        help_text='JSON text, a candidate\'s usage ({"wall_seconds": ..., "usd": ...}); given, '
        "it replaces the candidate's.",
    )
    # The path travels in the part's name: the schema cannot name every path.
    file_PATH = serializers.FileField(
        required=False,
        help_text="One part per file, its field named file:PATH (file:predictions.jsonl, "
        "file:ckpt/weights.bin). At most DATA_UPLOAD_MAX_NUMBER_FILES parts per request; send "
        "more in further requests, which add to the same candidate.",
    )


class StoredArtifactFileOutput(serializers.Serializer):
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
    mode = serializers.IntegerField()


class ArtifactsAddedOutput(serializers.Serializer):
    task_id = serializers.CharField()
    sample = serializers.IntegerField()
    created = serializers.BooleanField(help_text="Whether this request created the candidate.")
    files = serializers.DictField(
        child=StoredArtifactFileOutput(), help_text="The files this request added, by path."
    )
    file_count = serializers.IntegerField(help_text="The candidate's files, all requests.")
    candidate_count = serializers.IntegerField()


def _too_large() -> RequestTooLarge:
    limit = filesizeformat(settings.SECUREBENCH_MAX_ARTIFACT_BYTES)
    return RequestTooLarge(f"The artifact files are larger than the {limit} limit.")


class RunArtifactsApi(RunApiView):
    permission_classes = [permissions.DjangoModelPermissions]
    parser_classes = [MultiPartParser]
    queryset = Run.objects.none()
    throttle_scope = "run_candidates"

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Before anything reads the body (session authentication's CSRF check parses it).
        if request.method == "POST":
            django_request = request._request
            if not django_request.META.get("CONTENT_LENGTH"):
                raise LengthRequired()
            limit = settings.SECUREBENCH_MAX_ARTIFACT_BYTES
            if upload_declared_too_large(django_request, limit):
                raise _too_large()
            digest_uploads(django_request)
            cap_uploads(django_request, limit)  # in front of the digests: a chunk over the
            # cap is never hashed, let alone stored
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, TooManyFilesSent):
            exc = TooManyParts(
                f"At most {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files per request; send the "
                "rest in further requests, which add to the same candidate."
            )
        return super().handle_exception(exc)

    @extend_schema(
        operation_id="run_artifacts_add",
        request={"multipart/form-data": ArtifactUploadDoc},
        responses={
            200: OpenApiResponse(ArtifactsAddedOutput, description="Files added."),
            201: OpenApiResponse(ArtifactsAddedOutput, description="Candidate created."),
            400: OpenApiResponse(
                description='The refused files or fields, each named: {"detail", "errors": '
                '[{"field", "message"}], "more"} (field "file:PATH" for a path); nothing stored.'
            ),
            403: OpenApiResponse(description="Not the run's creator, or no permission."),
            409: OpenApiResponse(
                description="The run is already submitted, or is a live episode run."
            ),
            411: OpenApiResponse(description="No Content-Length."),
            413: OpenApiResponse(
                description="The files are over SECUREBENCH_MAX_ARTIFACT_BYTES (refused from "
                "the declared length before the body is read, or while it streams in)."
            ),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = run_for_writer(request, run_id)
        if run.mode == RunMode.EPISODES:
            return live_run_response(run)
        if run.is_submitted:
            return already_submitted_response(run)
        fields, files = request.POST, request.FILES  # the body is read here, streamed
        if upload_was_too_large(request._request):
            raise _too_large()
        try:
            wanted = artifact_request(
                {name: fields.getlist(name) for name in fields},
                {name: files.getlist(name) for name in files},
                upload_digests(request._request),
            )
            added = run_add_artifact_files(run, wanted)
        except BundleRejected as exc:
            return _field_errors(exc)
        except RunAlreadySubmitted:
            return already_submitted_response(run)
        body = {
            "task_id": wanted.task_id,
            "sample": wanted.sample,
            "created": added.created,
            "files": added.added,
            "file_count": len(added.candidate.files),
            "candidate_count": run.candidate_count,
        }
        return Response(body, status=201 if added.created else 200)


def _field_errors(exc: BundleRejected) -> Response:
    errors = [{"field": p.field, "message": p.message} for p in exc.problems]
    return Response({"detail": str(exc), "errors": errors, "more": exc.more}, status=400)
