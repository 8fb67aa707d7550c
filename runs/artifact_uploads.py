"""Large artifact files through the run API: streamed uploads become content-addressed blobs.

``POST /api/v1/runs/{id}/artifacts/`` (``runs.api_artifacts``) hands each uploaded file here
as it lies in Django's upload storage (a temporary file past FILE_UPLOAD_MAX_MEMORY_SIZE),
with the sha256 and size its upload handler recorded while the body streamed in
(``packs.uploads.DigestingUploadHandler``). Every check comes first — the paths
(``verifiers.artifact_paths``, as on a bundle line), the file count, the size cap, the task,
its sample and the candidate already there — and only a request that passes them all writes
anything: each file is copied in chunks into the private ``pack_sealed`` storage under its
digest (``packs.blobs.blob_store``, hashing while copying), then the task's artifact candidate
is created, or given the new files, in one transaction. A refusal stores nothing, and a
failure after the first copy removes the blobs this request created.

A stored entry is ``{"sha256": str, "size": int, "mode": int}`` beside the
``{"content_b64", "mode"}`` entries of bundle lines (``runs.candidates``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from packs.blobs import blob_remove, blob_store, local_blob
from packs.compiler.limits import human_bytes
from packs.models import FileRoot, Task
from runs.bundle import (
    BundleLine,
    BundleProblem,
    BundleRejected,
    parse_candidate_objects,
    sample_label,
)
from runs.bundle_artifact import MAX_ARTIFACT_FILES
from runs.candidates import blob_entry, entry_size, is_blob_entry
from runs.models import Candidate, Run, RunMode
from runs.services import RunAlreadySubmitted, contract_attempts
from runs.validity import binds_paths, candidate_violations_of
from verifiers.artifact_paths import artifact_path_problem, folder_file_clashes
from verifiers.families import get_family
from verifiers.task import Candidate as VerifierCandidate
from verifiers.task import WorkspaceFile

# The form field that carries a file: its name is ``file:`` and the artifact path (Django
# rewrites an upload's file name, so the path cannot travel there).
FILE_FIELD = "file:"
FORM_FIELDS = ("task_id", "sample", "usage")
WHERE = "request"


@dataclass(frozen=True)
class ArtifactUpload:
    path: str
    upload: UploadedFile
    sha256: str  # recorded while the body streamed in
    size: int


@dataclass(frozen=True)
class ArtifactRequest:
    task_id: str
    sample: int
    usage: dict[str, float] | None  # None: keep the candidate's
    files: list[ArtifactUpload]


@dataclass(frozen=True)
class ArtifactsAdded:
    candidate: Candidate
    created: bool
    added: dict[str, dict[str, Any]]


class _Problems(list[BundleProblem]):
    def add(self, field_name: str, message: str) -> None:
        self.append(BundleProblem(WHERE, None, field_name, message))


# --- the request ------------------------------------------------------------------------------


def artifact_request(
    fields: Mapping[str, list[str]],
    files: Mapping[str, list[UploadedFile]],
    digests: Mapping[str, list[tuple[str, int]]],
) -> ArtifactRequest:
    """The form as one request, or BundleRejected naming each field that is wrong. Paths are
    held to the artifact rules here, before anything is written."""
    problems = _Problems()
    for name in fields:
        if name not in FORM_FIELDS:
            problems.add(name, f"is not a field of this form ({', '.join(FORM_FIELDS)}, file:PATH)")
    for name, values in fields.items():
        if len(values) > 1:
            problems.add(name, "is given more than once")
    line = _line_fields(fields, problems)
    uploads: list[ArtifactUpload] = []
    for name, parts in files.items():
        if not name.startswith(FILE_FIELD):
            problems.add(name, "a file's field is named file:PATH, PATH the artifact's path")
            continue
        path = name[len(FILE_FIELD) :]
        if why := artifact_path_problem(path):
            problems.add(name, why)
        elif len(parts) != 1 or len(digests.get(name, ())) != 1:
            problems.add(name, "is given more than once")
        else:
            sha256, size = digests[name][0]
            uploads.append(ArtifactUpload(path, parts[0], sha256, size))
    if not files:
        problems.add("files", "no file: send each as a part named file:PATH")
    for outer, inner in folder_file_clashes(upload.path for upload in uploads):
        problems.add(f"{FILE_FIELD}{inner}", f"is under {outer}, which is a file too")
    if problems or line is None:
        raise BundleRejected(problems)
    usage = line.usage if "usage" in fields else None
    return ArtifactRequest(line.task_id, line.sample, usage, uploads)


def _line_fields(fields: Mapping[str, list[str]], problems: _Problems) -> BundleLine | None:
    """task_id, sample and usage, checked as a candidate line's are."""
    value: dict[str, Any] = {"candidate": {"kind": "artifact", "files": {}}}
    value["task_id"] = (fields.get("task_id") or [""])[0]
    if "sample" in fields:
        raw = fields["sample"][0].strip()
        value["sample"] = int(raw) if raw.isdigit() else raw
    if "usage" in fields:
        try:
            value["usage"] = json.loads(fields["usage"][0])
        except ValueError:
            problems.add("usage", "is not JSON (an object of usage figures)")
            return None
    try:
        return parse_candidate_objects([value])[0]
    except BundleRejected as exc:
        for problem in exc.problems:
            problems.add(problem.field, problem.message)
        return None


# --- storing ------------------------------------------------------------------------------------


def run_add_artifact_files(run: Run, request: ArtifactRequest) -> ArtifactsAdded:
    """Add the files to the task's artifact candidate (created when the task and sample have
    none yet): all or nothing. BundleRejected names each problem; RunAlreadySubmitted when the
    run no longer takes candidates."""
    created_blobs: list[str] = []
    try:
        with transaction.atomic():
            locked = Run.objects.select_for_update().get(pk=run.pk)
            if locked.is_submitted or locked.mode == RunMode.EPISODES:
                raise RunAlreadySubmitted(f"run {run.pk} takes no more candidates")
            task, existing = _task_and_candidate(locked, request)
            merged = _merged_entries(existing, request)
            contract = locked.contract_version.contract
            violations = (
                candidate_violations_of(contract, task.family, _check_candidate(existing, request))
                if binds_paths(contract)
                else []
            )
            for item in request.files:
                # The upload itself (a temporary file past FILE_UPLOAD_MAX_MEMORY_SIZE):
                # blob_store reads it from its start, in chunks.
                if blob_store(FileRoot.EVAL, item.upload, item.sha256):
                    created_blobs.append(item.sha256)
            row = existing or Candidate(
                run=locked, task=task, kind="artifact", sample=request.sample, usage={}
            )
            row.files = merged
            row.contract_violations = violations
            if request.usage is not None:
                row.usage = request.usage
            row.save()
            count = Candidate.objects.filter(run=locked).count()
            Run.objects.filter(pk=locked.pk).update(candidate_count=count)
    except BaseException:
        for sha256 in created_blobs:
            blob_remove(FileRoot.EVAL, sha256)
        raise
    run.candidate_count = count
    added = {item.path: merged[item.path] for item in request.files}
    return ArtifactsAdded(candidate=row, created=existing is None, added=added)


def _task_and_candidate(run: Run, request: ArtifactRequest) -> tuple[Task, Candidate | None]:
    problems = _Problems()
    cv = run.contract_version
    task = Task.objects.filter(contract_version=cv, task_id=request.task_id).first()
    if task is None:
        label = f"{cv.pack.pack_id} v{cv.version}"
        problems.add("task_id", f"{request.task_id!r} is not a task of {label}")
        raise BundleRejected(problems)
    expected = get_family(task.family).candidate_kind
    if expected not in (None, "artifact"):
        problems.add(
            "task_id",
            f"task {task.task_id!r} is {task.family}, which takes a {expected} candidate, "
            "not artifact files",
        )
    attempts = contract_attempts(cv.contract)
    if attempts is not None and request.sample >= attempts:
        problems.add(
            "sample",
            f"sample {request.sample} of {task.task_id!r} is past the contract's budget of "
            f"{attempts} attempt{'s' if attempts != 1 else ''} per task",
        )
    existing = (
        Candidate.objects.select_for_update()
        .filter(run=run, task=task, sample=request.sample)
        .first()
    )
    if existing is not None and existing.kind != "artifact":
        label = sample_label(task.task_id, request.sample)
        problems.add("task_id", f"{label} already has a {existing.kind} candidate")
    if problems:
        raise BundleRejected(problems)
    return task, existing


def _merged_entries(existing: Candidate | None, request: ArtifactRequest) -> dict[str, Any]:
    """The candidate's files with the new ones; BundleRejected when they cannot go together
    (a path already there, a file and a folder of one name, too many files or bytes)."""
    problems = _Problems()
    files: dict[str, Any] = dict(existing.files) if existing is not None else {}
    for item in request.files:
        if item.path in files:
            problems.add(f"{FILE_FIELD}{item.path}", "the candidate already holds this file")
        files[item.path] = blob_entry(item.sha256, item.size)
    if existing is not None:
        # Clashes among the new files were named with the request; these involve old ones.
        for outer, inner in folder_file_clashes(files):
            new = outer if inner in existing.files else inner
            problems.add(f"{FILE_FIELD}{new}", f"{inner} is under {outer}, which is a file too")
    if len(files) > MAX_ARTIFACT_FILES:
        problems.add(
            "files", f"the candidate would hold {len(files)} files, more than {MAX_ARTIFACT_FILES}"
        )
    limit = settings.SECUREBENCH_MAX_ARTIFACT_BYTES
    total = sum(entry_size(entry) for entry in files.values())
    if total > limit:
        problems.add(
            "files", f"the candidate's files would add up to more than {human_bytes(limit)}"
        )
    if problems:
        raise BundleRejected(problems)
    return files


def _check_candidate(existing: Candidate | None, request: ArtifactRequest) -> VerifierCandidate:
    """The whole candidate as the contract check reads it. It holds every file in memory,
    as verification does, bounded by SECUREBENCH_MAX_ARTIFACT_BYTES (checked just before);
    only called when the contract names surfaces or outputs."""
    files: dict[str, WorkspaceFile] = {}
    for path, entry in (existing.files if existing is not None else {}).items():
        if is_blob_entry(entry):
            content = local_blob(FileRoot.EVAL, entry["sha256"]).read_bytes()
        else:
            content = base64.b64decode(entry.get("content_b64", ""))
        files[path] = WorkspaceFile(content, int(entry.get("mode", 0o644)))
    for item in request.files:
        item.upload.seek(0)
        files[item.path] = WorkspaceFile(item.upload.read())
    return VerifierCandidate(kind="artifact", files=files)
