"""A candidate as stored and as a verifier takes it: converters between the two.

A workspace or artifact candidate's files are stored as ``{path: ENTRY}``
(``runs.models.Candidate.files``), ENTRY either ``{"content_b64": str, "mode": int}`` (files
that came inline: bundle lines, API batches, live workspaces) or ``{"sha256": str, "size":
int, "mode": int}`` (large artifact files uploaded through the run API,
``runs.artifact_uploads``), whose bytes are a content-addressed blob of the private
``pack_sealed`` storage. The services that write candidates and the pipeline that scores them
both import from here, so neither needs the other.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from packs.blobs import local_blob
from packs.models import FileRoot
from runs.models import Candidate
from verifiers.task import FILE_KINDS, WorkspaceFile
from verifiers.task import Candidate as VerifierCandidate

DEFAULT_MODE = 0o644


def stored_files(files: Mapping[str, WorkspaceFile]) -> dict[str, dict[str, Any]]:
    """A workspace's or artifact's files as the candidate row stores them."""
    return {
        path: {"content_b64": base64.b64encode(f.content).decode("ascii"), "mode": f.mode}
        for path, f in files.items()
    }


def blob_entry(sha256: str, size: int, mode: int = DEFAULT_MODE) -> dict[str, Any]:
    """A file stored as a blob of the sealed storage, as the candidate row records it."""
    return {"sha256": sha256, "size": size, "mode": mode}


def is_blob_entry(entry: Any) -> bool:
    return isinstance(entry, Mapping) and isinstance(entry.get("sha256"), str)


def entry_size(entry: Any) -> int:
    """A stored file's size in bytes, without reading a blob or decoding its base64."""
    if not isinstance(entry, Mapping):
        return 0
    if is_blob_entry(entry):
        size = entry.get("size")
        return size if isinstance(size, int) and not isinstance(size, bool) else 0
    encoded = entry.get("content_b64") or ""
    if not isinstance(encoded, str) or not encoded:
        return 0
    padding = len(encoded) - len(encoded.rstrip("="))
    return max(0, len(encoded) * 3 // 4 - padding)


def verifier_candidate(candidate: Candidate) -> VerifierCandidate:
    """The stored candidate as the plain data a verifier takes.

    A blob entry is read through the blob cache (``packs.blobs.local_blob``), which checks
    its digest on every use: a blob that no longer matches is fetched again or raises
    BlobUnavailable, never handed to a verifier. Verification holds the file in memory (a
    verifier takes bytes): bounded by SECUREBENCH_MAX_ARTIFACT_BYTES, which caps a candidate's
    uploaded files altogether.
    """
    if candidate.kind not in FILE_KINDS:
        return VerifierCandidate(kind=candidate.kind, text=candidate.text)
    return VerifierCandidate(
        kind=candidate.kind,
        files={path: _file(entry) for path, entry in candidate.files.items()},
    )


def _file(entry: Mapping[str, Any]) -> WorkspaceFile:
    mode = int(entry.get("mode", DEFAULT_MODE))
    if is_blob_entry(entry):
        return WorkspaceFile(local_blob(FileRoot.EVAL, entry["sha256"]).read_bytes(), mode)
    return WorkspaceFile(base64.b64decode(entry["content_b64"]), mode)
