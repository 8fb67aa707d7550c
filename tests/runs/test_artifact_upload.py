"""Large artifact files through the run API (``POST /api/v1/runs/{id}/artifacts/``).

Files stream to disk and into the sealed storage under their sha256, and the candidate row
records ``{"sha256", "size", "mode"}``; the run is scored from those blobs. Every refusal — a
body declared or streamed past the cap, a hostile path, another user's run, a submitted one —
stores nothing: no candidate row and no new blob.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from packs.blobs import BlobChanged, BlobUnavailable, blob_cache, blob_store
from packs.models import ContractVersion, blob_name
from packs.services import pack_import_folder
from runs import artifact_uploads
from runs.candidates import verifier_candidate
from runs.models import Candidate, ResultStatus, TaskResult
from runs.pipeline import score_results
from runs.selectors import workspace_files
from tests.conftest import mc_row
from tests.runs.test_run_api import client_for, user_with

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024
PREDICTIONS = b'{"id": "a", "answer": "1"}\n{"id": "b", "answer": "2"}\n'
CONTRACT = {
    "required_outputs": [
        {
            "path": "predictions.jsonl",
            "schema": {"type": "object", "required": ["id", "answer"]},
        },
        {"path": "weights.bin", "format": "binary"},
    ]
}


@pytest.fixture(autouse=True)
def fresh_throttle_counters():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def version(make_pack) -> ContractVersion:
    folder = make_pack(
        {"id": "art-up", "version": 1, "contract": CONTRACT},
        [
            {"id": "t1", "family": "artifact_task", "input": {"instructions": "Predict."}},
            {"id": "t2", "family": "artifact_task", "input": {"instructions": "Predict."}},
            mc_row("q1", "B"),
        ],
    )
    return pack_import_folder(folder=folder).contract_version


@pytest.fixture
def harness() -> APIClient:
    return client_for(user_with("harness", "add_run"))


def new_run(client: APIClient) -> int:
    body = {"pack": "art-up", "version": 1, "agent_name": "uploader"}
    created = client.post("/api/v1/runs/", body, format="json")
    assert created.status_code == 201, created.json()
    return created.json()["id"]


def upload(client: APIClient, run_id: int, files: dict[str, bytes], **fields: Any) -> Any:
    """The files as parts named file:PATH (the client's file name is anything)."""
    data: dict[str, Any] = {"task_id": "t1", **fields}
    for path, content in files.items():
        data[f"file:{path}"] = _named(content)
    return client.post(f"/api/v1/runs/{run_id}/artifacts/", data, format="multipart")


def _named(content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("upload.bin", content)


def stored_blobs() -> set[str]:
    root = Path(storages["pack_sealed"].location)
    return {path.name for path in root.rglob("*") if path.is_file()} if root.exists() else set()


def nothing_stored(before: set[str]) -> None:
    assert not Candidate.objects.exists()
    assert stored_blobs() == before


# --- storing and scoring ---------------------------------------------------------------------


def test_uploaded_files_are_stored_by_digest_and_the_run_is_scored_from_them(
    harness, version, monkeypatch
):
    weights = os.urandom(3 * MiB)  # over FILE_UPLOAD_MAX_MEMORY_SIZE: streams to disk
    sources: list[str] = []
    store = artifact_uploads.blob_store

    def recording_store(root: str, source: Any, sha256: str) -> bool:
        sources.append(type(source).__name__)
        return store(root, source, sha256)

    monkeypatch.setattr(artifact_uploads, "blob_store", recording_store)
    run_id = new_run(harness)

    answer = upload(
        harness,
        run_id,
        {"predictions.jsonl": PREDICTIONS, "weights.bin": weights},
        usage=json.dumps({"wall_seconds": 12}),
    )

    assert answer.status_code == 201, answer.json()
    expected = {
        path: {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "mode": 0o644}
        for path, content in (("predictions.jsonl", PREDICTIONS), ("weights.bin", weights))
    }
    body = answer.json()
    assert body["files"] == expected and body["created"] is True
    assert (body["task_id"], body["sample"], body["file_count"]) == ("t1", 0, 2)
    assert sources == ["TemporaryUploadedFile", "TemporaryUploadedFile"]
    row = Candidate.objects.get()
    assert row.kind == "artifact" and row.files == expected and row.contract_violations == []
    assert row.usage == {"wall_seconds": 12}
    sealed = storages["pack_sealed"]
    for path, content in (("predictions.jsonl", PREDICTIONS), ("weights.bin", weights)):
        with sealed.open(blob_name(expected[path]["sha256"]), "rb") as handle:
            assert handle.read() == content
    # What the owner's pages list: size and digest, read from the entry.
    listed = {f.path: (f.size, f.sha256) for f in workspace_files(row.files)}
    assert listed["weights.bin"] == (len(weights), expected["weights.bin"]["sha256"])
    assert verifier_candidate(row).files["weights.bin"].content == weights

    submitted = harness.post(f"/api/v1/runs/{run_id}/submit/")
    assert submitted.status_code == 202, submitted.json()
    queued = TaskResult.objects.filter(status=ResultStatus.QUEUED).values_list("pk", flat=True)
    score_results(list(queued), worker="artifact-upload-test")

    t1 = TaskResult.objects.get(task__task_id="t1")
    assert (t1.status, t1.failure_reason) == (ResultStatus.PASSED, ""), t1.details
    t2 = TaskResult.objects.get(task__task_id="t2")
    assert t2.failure_reason == "missing_candidate"


def test_further_requests_add_to_the_candidate_and_the_contract_is_checked_on_all(harness, version):
    run_id = new_run(harness)
    first = upload(harness, run_id, {"predictions.jsonl": b'{"id": "a"}\n'})
    assert first.status_code == 201
    # Before the second file, weights.bin is missing and the line lacks its answer.
    assert {v["rule"] for v in Candidate.objects.get().contract_violations} == {
        "output_missing",
        "output_malformed",
    }

    second = upload(harness, run_id, {"weights.bin": b"\x00\x01"})

    assert second.status_code == 200 and second.json()["created"] is False
    assert second.json()["file_count"] == 2
    row = Candidate.objects.get()
    assert set(row.files) == {"predictions.jsonl", "weights.bin"}
    assert [v["rule"] for v in row.contract_violations] == ["output_malformed"]


# --- size caps -------------------------------------------------------------------------------


class ExplodingBody:
    """A request body that fails the test if any of it is read."""

    def read(self, *args: Any) -> bytes:
        raise AssertionError("the body was read")

    readline = read


@pytest.mark.parametrize(
    ("cap", "declared"),
    [(64 * 1024, 64 * 1024 + 2 * MiB), (None, 2 * 1024**3)],
    ids=["over-a-small-cap", "2-GB-artifact"],
)
def test_a_body_declared_over_the_cap_is_refused_before_it_is_read(
    harness, version, settings, cap, declared
):
    if cap is not None:
        settings.SECUREBENCH_MAX_ARTIFACT_BYTES = cap
    run_id = new_run(harness)
    before = stored_blobs()

    answer = harness.generic(
        "POST",
        f"/api/v1/runs/{run_id}/artifacts/",
        content_type="multipart/form-data; boundary=BoUnDaRy",
        CONTENT_LENGTH=str(declared),
        **{"wsgi.input": ExplodingBody()},
    )

    assert answer.status_code == 413, answer.content
    assert "larger than the" in answer.json()["detail"]
    nothing_stored(before)


def test_a_body_without_a_length_is_refused_unread(harness, version):
    run_id = new_run(harness)

    answer = harness.generic(
        "POST",
        f"/api/v1/runs/{run_id}/artifacts/",
        content_type="multipart/form-data; boundary=BoUnDaRy",
        CONTENT_LENGTH="",
        **{"wsgi.input": ExplodingBody()},
    )

    assert answer.status_code == 411, answer.content
    assert not Candidate.objects.exists()


def test_files_past_the_cap_are_stopped_while_they_stream_in(harness, version, settings):
    # Declared within the cap and its envelope, but the files themselves are over the cap.
    settings.SECUREBENCH_MAX_ARTIFACT_BYTES = 64 * 1024
    run_id = new_run(harness)
    before = stored_blobs()

    answer = upload(harness, run_id, {"a.bin": b"x" * 40_000, "b.bin": b"y" * 40_000})

    assert answer.status_code == 413, answer.json()
    nothing_stored(before)


def test_a_candidate_cannot_grow_past_the_cap_over_several_requests(harness, version, settings):
    settings.SECUREBENCH_MAX_ARTIFACT_BYTES = 64 * 1024
    run_id = new_run(harness)
    assert upload(harness, run_id, {"a.bin": b"x" * 40_000}).status_code == 201
    before = stored_blobs()

    answer = upload(harness, run_id, {"b.bin": b"y" * 40_000})

    assert answer.status_code == 400
    assert answer.json()["errors"][0]["field"] == "files"
    assert set(Candidate.objects.get().files) == {"a.bin"} and stored_blobs() == before


# --- paths and fields ----------------------------------------------------------------------


def test_hostile_paths_are_each_named_and_nothing_is_stored(harness, version):
    run_id = new_run(harness)
    before = stored_blobs()
    hostile = {"../x": b"1", "/etc/passwd": b"2", "CON": b"3", "a": b"4", "a/b": b"5"}

    answer = upload(harness, run_id, hostile)

    assert answer.status_code == 400, answer.json()
    errors = {error["field"]: error["message"] for error in answer.json()["errors"]}
    assert "escapes the workspace" in errors["file:../x"]
    assert "absolute path" in errors["file:/etc/passwd"]
    assert "device name" in errors["file:CON"]
    assert "is under a, which is a file too" in errors["file:a/b"]
    nothing_stored(before)


def test_a_file_and_folder_clash_with_earlier_files_and_repeated_paths_are_refused(
    harness, version
):
    run_id = new_run(harness)
    assert upload(harness, run_id, {"out": b"1"}).status_code == 201
    before = stored_blobs()

    under = upload(harness, run_id, {"out/x": b"2", "other": b"4"})
    again = upload(harness, run_id, {"out": b"3"})

    assert (under.status_code, again.status_code) == (400, 400)
    assert under.json()["errors"] == [
        {"field": "file:out/x", "message": "out/x is under out, which is a file too"}
    ]
    assert again.json()["errors"] == [
        {"field": "file:out", "message": "the candidate already holds this file"}
    ]
    assert Candidate.objects.get().files.keys() == {"out"} and stored_blobs() == before


def test_fields_are_checked_like_a_candidate_lines(harness, version):
    run_id = new_run(harness)

    answers = [
        upload(harness, run_id, {"p": b"1"}, task_id="nope"),
        upload(harness, run_id, {"p": b"1"}, task_id="q1"),
        upload(harness, run_id, {"p": b"1"}, sample="-1"),
        upload(harness, run_id, {"p": b"1"}, usage='{"bananas": 3}'),
        upload(harness, run_id, {"p": b"1"}, colour="blue"),
        upload(harness, run_id, {}),
    ]

    fields = [[e["field"] for e in answer.json()["errors"]] for answer in answers]
    assert [answer.status_code for answer in answers] == [400] * 6
    assert fields == [
        ["task_id"],
        ["task_id"],
        ["sample"],
        ["usage.bananas"],
        ["colour"],
        ["files"],
    ]
    assert not Candidate.objects.exists()


def test_more_parts_than_django_takes_are_a_json_400(harness, version, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 3
    run_id = new_run(harness)

    answer = upload(harness, run_id, {f"f{n}": b"1" for n in range(4)})

    assert answer.status_code == 400
    assert "At most 3 files per request" in answer.json()["detail"]
    assert not Candidate.objects.exists()


# --- who and when ----------------------------------------------------------------------------


def test_only_the_creator_writes_and_only_before_submission(harness, version):
    """As on the candidates endpoint: another user's draft does not exist for them (404),
    once submitted it is theirs to read, not to write (403); no credentials is 403; the
    creator's submitted run is 409."""
    run_id = new_run(harness)
    other = client_for(user_with("other", "add_run"))
    before = stored_blobs()

    assert upload(other, run_id, {"p": b"1"}).status_code == 404
    assert upload(APIClient(), run_id, {"p": b"1"}).status_code == 403
    nothing_stored(before)

    assert harness.post(f"/api/v1/runs/{run_id}/submit/").status_code == 202
    refused = upload(other, run_id, {"p": b"1"})
    assert refused.status_code == 403
    assert "Only the user who created this run" in refused.json()["detail"]
    late = upload(harness, run_id, {"p": b"1"})
    assert late.status_code == 409, late.json()
    nothing_stored(before)


# --- reading blobs back ----------------------------------------------------------------------


def test_a_blob_whose_bytes_changed_is_never_handed_to_a_verifier(harness, version):
    run_id = new_run(harness)
    assert upload(harness, run_id, {"weights.bin": b"honest bytes"}).status_code == 201
    row = Candidate.objects.get()
    sha256 = row.files["weights.bin"]["sha256"]
    # Both copies go bad: the cached one and the stored one.
    cached = blob_cache().local_path("eval", sha256)
    cached.write_bytes(b"tampered")
    stored = Path(storages["pack_sealed"].path(blob_name(sha256)))
    stored.write_bytes(b"tampered")

    with pytest.raises(BlobUnavailable):
        verifier_candidate(row)


def test_a_failure_after_the_first_copy_removes_the_blobs_the_request_created(
    harness, version, monkeypatch
):
    run_id = new_run(harness)
    assert upload(harness, run_id, {"old.bin": b"kept"}).status_code == 201
    before = stored_blobs()

    def broken_save(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(Candidate, "save", broken_save)
    with pytest.raises(RuntimeError):
        upload(harness, run_id, {"new.bin": b"fresh bytes", "again.bin": b"kept"})

    assert stored_blobs() == before  # "kept" was there before: it stays
    assert set(Candidate.objects.get().files) == {"old.bin"}


def test_a_blob_is_stored_only_under_the_digest_of_the_bytes_copied(tmp_path):
    source = tmp_path / "f"
    source.write_bytes(b"what was uploaded")
    right = hashlib.sha256(b"what was uploaded").hexdigest()
    wrong = hashlib.sha256(b"what the hash said").hexdigest()

    with source.open("rb") as handle, pytest.raises(BlobChanged):
        blob_store("eval", handle, wrong)
    with source.open("rb") as handle:
        assert blob_store("eval", handle, right) is True
    with source.open("rb") as handle:
        assert blob_store("eval", handle, right) is False  # already there

    assert stored_blobs() == {right}
