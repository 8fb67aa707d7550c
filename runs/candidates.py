"""A candidate as stored and as a verifier takes it: pure converters, no database access.

A workspace or artifact candidate's files are stored as
``{path: {"content_b64": str, "mode": int}}`` (``runs.models.Candidate.files``). The
services that write candidates and the pipeline that scores them both import from here, so
neither needs the other.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from runs.models import Candidate
from verifiers.task import FILE_KINDS, WorkspaceFile
from verifiers.task import Candidate as VerifierCandidate


def stored_files(files: Mapping[str, WorkspaceFile]) -> dict[str, dict[str, Any]]:
    """A workspace's or artifact's files as the candidate row stores them."""
    return {
        path: {"content_b64": base64.b64encode(f.content).decode("ascii"), "mode": f.mode}
        for path, f in files.items()
    }


def verifier_candidate(candidate: Candidate) -> VerifierCandidate:
    """The stored candidate as the plain data a verifier takes."""
    if candidate.kind not in FILE_KINDS:
        return VerifierCandidate(kind=candidate.kind, text=candidate.text)
    return VerifierCandidate(
        kind=candidate.kind,
        files={
            path: WorkspaceFile(
                base64.b64decode(entry["content_b64"]), int(entry.get("mode", 0o644))
            )
            for path, entry in candidate.files.items()
        },
    )
