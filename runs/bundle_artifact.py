"""An artifact candidate on a bundle line: ``{"kind": "artifact", "files": {PATH: FILE}}``.

``FILE`` is the file's text (UTF-8) or ``{"base64": STR}`` for any bytes. Inside a bundle
archive an artifact may instead name an ``archive`` or a ``directory`` of the bundle, read as
a workspace's are (links and devices refused), with the artifact's own limits. Every path is
held to ``verifiers.artifact_paths`` — no ``..``, absolute path, control character, device
name, system folder, nor one name both a folder and a file — and the whole artifact to the
site's candidate size cap and ``MAX_ARTIFACT_FILES``. A refused artifact stores nothing: the
bundle parser collects the problems and refuses the whole bundle before anything is written.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any

from packs.compiler.limits import human_bytes
from verifiers.artifact_paths import artifact_path_problem, folder_file_clashes
from verifiers.task import WorkspaceFile

# An artifact is a set of outputs (predictions, shards, logs), often more files than a
# workspace's sources; still few enough to list on a page and to write out for an evaluation.
MAX_ARTIFACT_FILES = 10_000
ARTIFACT_KEYS = ("kind", "files", "archive", "directory")
# (field, message): the bundle parser adds its file and line.
AddProblem = Callable[[str, str], None]


def artifact_files_from_map(
    value: Any, add: AddProblem, max_bytes: int
) -> dict[str, WorkspaceFile] | None:
    """The files of a ``files`` map, or None after adding every problem found."""
    if not isinstance(value, dict):
        add("candidate.files", 'must be an object mapping paths to text or {"base64": ...}')
        return None
    if len(value) > MAX_ARTIFACT_FILES:
        # Counted before anything is decoded: a million tiny entries cost nothing more.
        add("candidate.files", f"holds {len(value)} files, more than {MAX_ARTIFACT_FILES}")
        return None
    files: dict[str, WorkspaceFile] = {}
    refused = False
    total = 0
    for path, entry in value.items():
        where = f"candidate.files.{path}"
        why = artifact_path_problem(path)
        content = None if why else _content(entry, where, add)
        if why:
            add(where, why)
        if content is None:
            refused = True
            continue
        total += len(content)
        if total > max_bytes:
            add("candidate.files", f"add up to more than {human_bytes(max_bytes)}")
            return None
        files[path] = WorkspaceFile(content)
    refused |= clash_problems(files, add)
    return None if refused else files


def _content(entry: Any, where: str, add: AddProblem) -> bytes | None:
    if isinstance(entry, str):
        return entry.encode("utf-8")
    if not isinstance(entry, dict) or set(entry) != {"base64"}:
        add(where, 'must be the file\'s text or {"base64": "..."}')
        return None
    try:
        return base64.b64decode(entry["base64"], validate=True)
    except (binascii.Error, TypeError, ValueError):
        add(f"{where}.base64", "is not valid base64")
        return None


def clash_problems(files: Mapping[str, WorkspaceFile], add: AddProblem) -> bool:
    """Add a problem per path that makes a name a folder and a file at once; True if any."""
    clashes = folder_file_clashes(files)
    for outer, inner in clashes:
        add(f"candidate.files.{inner}", f"is under {outer}, which is a file too")
    return bool(clashes)


def folder_problems(files: Mapping[str, WorkspaceFile], where: str, add: AddProblem) -> bool:
    """An archive's or folder's files held to the artifact path rules; True if any failed."""
    refused = False
    for path in files:
        why = artifact_path_problem(path)
        if why:
            add(where, why)
            refused = True
    return refused
