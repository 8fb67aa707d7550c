"""The agent bundle of a contract version: a zip an agent harness downloads once.

    index.json                      pack, version, digest and every task: id → folder
    tasks/<folder>/task.json        the task's agent payload (as `GET .../tasks/` items carry it)
    tasks/<folder>/assets/<path>    the task's public asset files

Built from the public lane only: ``Task.agent_payload`` and files under the public root. The
zip is written as it is sent (entries carry data descriptors), so a 100k-task pack never sits
in memory or on disk.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from django.core.files.storage import storages

from packs.compiler.compile import agent_task_json
from packs.models import ContractVersion, ResourceFile, Task, blob_name
from verifiers.families import get_family
from verifiers.lanes import PUBLIC

TASKS_PER_QUERY = 1000
COPY_CHUNK = 1024 * 1024
# Leaves room under the usual 255-byte file-name limit for the hash suffix.
MAX_FOLDER_CHARS = 80
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def folder_name(task_id: str, taken: set[str]) -> str:
    """A folder name for a task id, safe on any file system and deterministic for a version.

    An id made only of letters, digits, ``.``, ``_`` and ``-`` keeps its name; any other id
    (``humaneval/0``) is made safe and gets a short digest of the real id, so two ids that
    sanitise alike stay apart. ``taken`` holds the names used so far, case-folded (a clash on
    a case-insensitive file system gets the digest too).
    """
    safe = UNSAFE.sub("_", task_id).lstrip(".")[:MAX_FOLDER_CHARS] or "task"
    if safe != task_id or safe.casefold() in taken:
        safe = f"{safe}-{hashlib.sha256(task_id.encode()).hexdigest()[:10]}"
    taken.add(safe.casefold())
    return safe


def bundle_filename(contract_version: ContractVersion) -> str:
    pack = UNSAFE.sub("_", contract_version.pack.pack_id)
    return f"{pack}-v{contract_version.version}-agent-bundle.zip"


class _Chunks:
    """A write-only, unseekable file that zipfile writes into and the response drains."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        return None

    def drain(self, at_least: int = 64 * 1024) -> Iterator[bytes]:
        if self.size >= at_least and self.parts:
            yield b"".join(self.parts)
            self.parts, self.size = [], 0


def agent_bundle_chunks(contract_version: ContractVersion) -> Iterator[bytes]:
    """The bundle's bytes, piece by piece, for a streaming response."""
    sink = _Chunks()
    # A fixed timestamp: the same version always gives the same bytes.
    stamp = contract_version.uploaded_at.timetuple()[:6]
    storage = storages["pack_public"]
    index: list[dict[str, Any]] = []
    taken: set[str] = set()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:
        for tasks in _task_chunks(contract_version):
            assets = _public_asset_files([task.pk for task in tasks])
            for task in tasks:
                folder = f"tasks/{folder_name(task.task_id, taken)}"
                index.append(_index_entry(task, folder))
                _write_text(
                    archive, f"{folder}/task.json", agent_task_json(task.agent_payload), stamp
                )
                yield from sink.drain()
                for pack_file in assets.get(task.pk, []):
                    entry = zipfile.ZipInfo(f"{folder}/assets/{_safe_path(pack_file.path)}", stamp)
                    entry.compress_type = zipfile.ZIP_DEFLATED
                    entry.file_size = pack_file.size
                    with (
                        storage.open(pack_file.blob_name, "rb") as source,
                        archive.open(entry, "w") as target,
                    ):
                        while chunk := source.read(COPY_CHUNK):
                            target.write(chunk)
                            yield from sink.drain()
        summary = {
            "pack": contract_version.pack.pack_id,
            "version": contract_version.version,
            "digest": contract_version.digest,
            "task_count": len(index),
            "tasks": index,
        }
        _write_text(archive, "index.json", json.dumps(summary, indent=2) + "\n", stamp)
    yield from sink.drain(at_least=0)


def _task_chunks(contract_version: ContractVersion) -> Iterator[list[Task]]:
    """Tasks in position order, a bounded page at a time (keyset, so each page is an index
    range scan however far in)."""
    last = -1
    while True:
        page = list(
            Task.objects.filter(contract_version=contract_version, position__gt=last)
            .order_by("position")
            .only("task_id", "family", "position", "agent_payload")[:TASKS_PER_QUERY]
        )
        if not page:
            return
        yield page
        last = page[-1].position


class _Asset(NamedTuple):
    path: str
    size: int
    blob_name: str


def _public_asset_files(task_pks: list[int]) -> dict[int, list[_Asset]]:
    """Public-root files of the tasks' public resources, by task, each path once."""
    links = (
        ResourceFile.objects.filter(
            resource__task_id__in=task_pks, resource__lane=PUBLIC, pack_file__root="public"
        )
        .order_by("resource__task_id", "pack_file__path")
        .values_list("resource__task_id", "pack_file__path", "pack_file__size", "pack_file__sha256")
        .distinct()
    )
    files: dict[int, list[_Asset]] = {}
    for task_pk, path, size, sha256 in links:
        files.setdefault(task_pk, []).append(_Asset(path, size, blob_name(sha256)))
    return files


def _index_entry(task: Task, folder: str) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "folder": folder,
        "family": task.family,
        "candidate_kind": get_family(task.family).candidate_kind,
    }


def _safe_path(path: str) -> str:
    """Stored paths were checked at upload; refuse anything that would leave the folder anyway."""
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"unsafe pack file path {path!r}")
    return path


def _write_text(archive: zipfile.ZipFile, name: str, text: str, stamp: tuple[int, ...]) -> None:
    entry = zipfile.ZipInfo(name, stamp)
    entry.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(entry, text.encode())
