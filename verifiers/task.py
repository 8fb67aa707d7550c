"""The plain-data view of one compiled task and one candidate that verifiers work on.

Built by the site (runs → packs) from stored rows and files; verifiers never see models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

CandidateKind = Literal["text", "code", "patch", "workspace", "artifact"]
# Kinds whose candidate is a set of files (``Candidate.files``) rather than a text.
FILE_KINDS: frozenset[str] = frozenset({"workspace", "artifact"})


@dataclass(frozen=True)
class TaskFile:
    """One file of a file-backed resource: where it lands and where its trusted copy is."""

    path: str  # posix path relative to the resource's root (assets: public root; else eval)
    source: Path  # trusted host copy (read-only to verifiers)


@dataclass(frozen=True)
class TaskLanes:
    task_id: str
    family: str
    public: dict[str, Any]  # name → value (the agent payload)
    evaluation_inputs: dict[str, Any]  # name → value; the verifier sandbox may see these
    hidden: dict[str, Any]  # name → value; trusted host-side code only
    environment: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    # Files per resource name: "assets" (public) and file-backed eval resources (e.g. checker).
    files: dict[str, tuple[TaskFile, ...]] = field(default_factory=dict)
    # The contract version's contract (public: the agent reads it too). Only families that
    # judge by it read it (artifact_task's required outputs); {} when none was given.
    contract: dict[str, Any] = field(default_factory=dict)

    def secrets(self) -> list[Any]:
        """Values that must never appear in stored logs."""
        return [*self.evaluation_inputs.values(), *self.hidden.values()]


@dataclass(frozen=True)
class WorkspaceFile:
    content: bytes
    mode: int = 0o644  # only the executable bit is honoured


@dataclass(frozen=True)
class Candidate:
    kind: CandidateKind
    text: str = ""  # text, code and patch candidates
    # workspace and artifact candidates: path → file
    files: dict[str, WorkspaceFile] = field(default_factory=dict)

    @classmethod
    def of_text(cls, text: str) -> Candidate:
        return cls(kind="text", text=text)

    @classmethod
    def of_code(cls, code: str) -> Candidate:
        return cls(kind="code", text=code)

    @classmethod
    def of_patch(cls, patch: str) -> Candidate:
        return cls(kind="patch", text=patch)

    @classmethod
    def of_workspace(cls, files: dict[str, bytes | str | WorkspaceFile]) -> Candidate:
        return cls(kind="workspace", files=_workspace_files(files))

    @classmethod
    def of_artifact(cls, files: dict[str, bytes | str | WorkspaceFile]) -> Candidate:
        """The files an artifact task produced (stored and shown like a workspace's)."""
        return cls(kind="artifact", files=_workspace_files(files))


def _workspace_files(files: dict[str, bytes | str | WorkspaceFile]) -> dict[str, WorkspaceFile]:
    normalised: dict[str, WorkspaceFile] = {}
    for path, content in files.items():
        if isinstance(content, WorkspaceFile):
            normalised[path] = content
        elif isinstance(content, str):
            normalised[path] = WorkspaceFile(content.encode("utf-8"))
        else:
            normalised[path] = WorkspaceFile(content)
    return normalised
