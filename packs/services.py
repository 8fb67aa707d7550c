"""Writes for packs: import an uploaded pack as a new immutable contract version.

Every entry point ends in ``pack_import_folder``: compile (pure, nothing stored), check the
(id, version) slot, copy files into content-addressed storage, then store all rows in one
transaction. Any failure leaves nothing behind: blobs written by a failed import are removed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction

from packs import access
from packs.compiler import (
    CompiledPack,
    CompiledTask,
    CompileLimits,
    PackError,
    PackFileEntry,
    Problem,
    compile_pack,
)
from packs.compiler.archive import ArchiveError, ArchiveLimits, extract_archive, find_pack_root
from packs.models import (
    ContractVersion,
    FileRoot,
    Pack,
    PackFile,
    Resource,
    ResourceFile,
    SealedValue,
    Task,
    blob_name,
)
from verifiers.lanes import PUBLIC

BULK_BATCH = 500


class PackVersionConflict(Exception):
    """The (id, version) slot is taken by different content: versions are immutable."""


class PackNotMaintained(Exception):
    """The pack exists and the uploader is not one of its maintainers."""


class UploadRejected(Exception):
    """Bad input, in words for the uploader; nothing was stored."""

    def __init__(self, problems: list[Problem], *, conflict: bool = False) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = problems
        self.conflict = conflict

    @property
    def summary(self) -> str:
        if self.conflict:
            return self.problems[0].message
        count = len(self.problems)
        first = str(self.problems[0])
        return first if count == 1 else f"{count} problems; the first: {first}"


@contextmanager
def rejecting_bad_input() -> Iterator[None]:
    """Turn the compiler's, the archive checker's and the immutability errors into one type."""
    try:
        yield
    except PackError as exc:
        raise UploadRejected(list(exc.problems)) from exc
    except ArchiveError as exc:
        raise UploadRejected(
            [Problem(file="upload", line=None, field=None, message=str(exc))]
        ) from exc
    except PackVersionConflict as exc:
        problem = Problem(file="manifest.yaml", line=None, field="version", message=str(exc))
        raise UploadRejected([problem], conflict=True) from exc
    except PackNotMaintained as exc:
        problem = Problem(file="manifest.yaml", line=None, field="id", message=str(exc))
        raise UploadRejected([problem], conflict=True) from exc


@dataclass(frozen=True)
class ImportOutcome:
    contract_version: ContractVersion
    created: bool

    @property
    def message(self) -> str:
        cv = self.contract_version
        if self.created:
            return (
                f"Stored version {cv.version} of {cv.pack.pack_id}: {cv.task_count} tasks, "
                f"digest {cv.short_digest}."
            )
        return (
            f"Version {cv.version} of {cv.pack.pack_id} is already stored with the same "
            f"content (digest {cv.short_digest}); nothing changed."
        )


def compile_limits() -> CompileLimits:
    return CompileLimits(
        max_manifest_bytes=settings.SECUREBENCH_MAX_MANIFEST_BYTES,
        max_line_bytes=settings.SECUREBENCH_MAX_LINE_BYTES,
        max_rows=settings.SECUREBENCH_MAX_ROWS,
        max_json_depth=settings.SECUREBENCH_MAX_JSON_DEPTH,
        max_tasks_file_bytes=settings.SECUREBENCH_MAX_UNPACKED_BYTES,
    )


def archive_limits() -> ArchiveLimits:
    return ArchiveLimits(
        max_archive_bytes=settings.SECUREBENCH_MAX_UPLOAD_BYTES,
        max_members=settings.SECUREBENCH_MAX_ARCHIVE_MEMBERS,
        max_unpacked_bytes=settings.SECUREBENCH_MAX_UNPACKED_BYTES,
    )


@contextmanager
def upload_workspace() -> Iterator[Path]:
    """A private scratch folder under the data dir, removed afterwards whatever happens."""
    root = Path(settings.UPLOAD_WORK_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pack_import_archive(
    *, archive: Path, display_name: str, uploaded_by: AbstractBaseUser | None = None
) -> ImportOutcome:
    with upload_workspace() as work:
        extracted = work / "pack"
        extracted.mkdir()
        extract_archive(archive, extracted, limits=archive_limits(), display_name=display_name)
        root = find_pack_root(extracted)
        return pack_import_folder(folder=root, source_name=display_name, uploaded_by=uploaded_by)


def pack_import_parts(
    *,
    manifest: Path,
    tasks: Path,
    files_archive: Path | None,
    source_name: str,
    uploaded_by: AbstractBaseUser | None = None,
) -> ImportOutcome:
    """The form's second shape: manifest + tasks file + an optional archive of the roots."""
    with upload_workspace() as work:
        root = work / "pack"
        root.mkdir()
        if files_archive is not None:
            extract_archive(
                files_archive, root, limits=archive_limits(), display_name="files archive"
            )
        shutil.copyfile(manifest, root / "manifest.yaml")
        shutil.copyfile(tasks, root / "tasks.jsonl")
        return pack_import_folder(folder=root, source_name=source_name, uploaded_by=uploaded_by)


def pack_import_folder(
    *, folder: Path, source_name: str = "", uploaded_by: AbstractBaseUser | None = None
) -> ImportOutcome:
    compiled = compile_pack(folder, limits=compile_limits())
    existing = _existing_version(compiled)
    if existing is not None:
        return ImportOutcome(existing, created=False)
    _check_maintainer(compiled.manifest.id, uploaded_by)
    written = _store_blobs(compiled.files.values())
    try:
        contract_version = _store_rows(compiled, source_name=source_name, uploaded_by=uploaded_by)
    except IntegrityError:
        # A concurrent upload took the slot between our check and our insert.
        _remove_blobs(written)
        existing = _existing_version(compiled)
        if existing is None:
            raise
        return ImportOutcome(existing, created=False)
    except BaseException:
        _remove_blobs(written)
        raise
    return ImportOutcome(contract_version, created=True)


def _check_maintainer(pack_id: str, uploaded_by: AbstractBaseUser | None) -> None:
    pack = Pack.objects.filter(pack_id=pack_id).first()
    if pack is not None and not access.can_add_version(uploaded_by, pack):
        raise PackNotMaintained(
            f"pack {pack_id} is maintained by other users; ask one of them or an admin to "
            f"add you as a maintainer, or upload under a new id"
        )


def _existing_version(compiled: CompiledPack) -> ContractVersion | None:
    manifest = compiled.manifest
    existing = (
        ContractVersion.objects.select_related("pack")
        .filter(pack__pack_id=manifest.id, version=manifest.version)
        .first()
    )
    if existing is not None and existing.digest != compiled.digest:
        raise PackVersionConflict(
            f"version {manifest.version} of {manifest.id} is already stored with different "
            f"content; raise `version` in manifest.yaml to store this as a new version"
        )
    return existing


def _storage_for(root: str) -> Storage:
    return storages["pack_public" if root == FileRoot.PUBLIC else "pack_sealed"]


def _store_blobs(entries: Iterable[PackFileEntry]) -> list[tuple[Storage, str]]:
    """Copy files into content-addressed storage; returns the blobs this call created."""
    written: list[tuple[Storage, str]] = []
    try:
        for entry in entries:
            storage = _storage_for(entry.root)
            name = blob_name(entry.sha256)
            if storage.exists(name):
                continue
            with entry.source.open("rb") as handle:
                saved = storage.save(name, File(handle))
            written.append((storage, saved))
            if saved != name:
                # Someone stored the same content meanwhile; ours is a redundant copy.
                storage.delete(saved)
                written.pop()
    except BaseException:
        _remove_blobs(written)
        raise
    return written


def _remove_blobs(written: list[tuple[Storage, str]]) -> None:
    for storage, name in written:
        storage.delete(name)


@transaction.atomic
def _store_rows(
    compiled: CompiledPack, *, source_name: str, uploaded_by: AbstractBaseUser | None
) -> ContractVersion:
    manifest = compiled.manifest
    pack, created = Pack.objects.get_or_create(
        pack_id=manifest.id,
        defaults={
            "title": manifest.title or "",
            "description": manifest.description or "",
            "created_by": uploaded_by,
        },
    )
    if created and uploaded_by is not None:
        pack.maintainers.add(uploaded_by)
    contract_version = ContractVersion.objects.create(
        pack=pack,
        version=manifest.version,
        digest=compiled.digest,
        manifest=manifest.canonical,
        contract=manifest.contract,
        compile_report=compiled.report,
        family_counts=compiled.report.get("family_counts", {}),
        lane_counts=compiled.report.get("lane_counts", {}),
        task_count=len(compiled.tasks),
        file_count=len(compiled.files),
        file_bytes=sum(entry.size for entry in compiled.files.values()),
        source_name=source_name[:255],
        uploaded_by=uploaded_by,
    )
    files = _store_pack_files(contract_version, compiled)
    _store_tasks(contract_version, compiled.tasks, files)
    if manifest.version >= pack.latest_version:
        pack.latest_version = manifest.version
        pack.title = manifest.title or pack.title
        pack.description = manifest.description or pack.description
        pack.save(update_fields=["latest_version", "title", "description"])
    return contract_version


def _store_pack_files(
    contract_version: ContractVersion, compiled: CompiledPack
) -> dict[tuple[str, str], PackFile]:
    rows = [
        PackFile(
            contract_version=contract_version,
            root=entry.root,
            path=entry.path,
            size=entry.size,
            sha256=entry.sha256,
        )
        for entry in compiled.files.values()
    ]
    PackFile.objects.bulk_create(rows, batch_size=BULK_BATCH)
    return {(row.root, row.path): row for row in rows}


def _store_tasks(
    contract_version: ContractVersion,
    tasks: list[CompiledTask],
    files: dict[tuple[str, str], PackFile],
) -> None:
    task_rows = Task.objects.bulk_create(
        [_task_row(contract_version, task) for task in tasks], batch_size=BULK_BATCH
    )
    resources: list[Resource] = []
    sealed_values: list[Any] = []
    file_keys: list[tuple[tuple[str, str], ...]] = []
    for task_row, task in zip(task_rows, tasks, strict=True):
        for position, resource in enumerate(task.resources):
            public = resource.lane == PUBLIC
            resources.append(
                Resource(
                    task=task_row,
                    name=resource.name,
                    position=position,
                    lane=resource.lane,
                    kind=resource.kind,
                    size=resource.size,
                    sha256=resource.sha256,
                    public_value=resource.value if public else None,
                )
            )
            sealed_values.append(None if public else resource.value)
            file_keys.append(resource.files)
    Resource.objects.bulk_create(resources, batch_size=BULK_BATCH)
    SealedValue.objects.bulk_create(
        [
            SealedValue(resource=row, value=value)
            for row, value in zip(resources, sealed_values, strict=True)
            if row.lane != PUBLIC
        ],
        batch_size=BULK_BATCH,
    )
    ResourceFile.objects.bulk_create(
        [
            ResourceFile(resource=row, pack_file=files[key])
            for row, keys in zip(resources, file_keys, strict=True)
            for key in keys
        ],
        batch_size=BULK_BATCH,
    )


def _task_row(contract_version: ContractVersion, task: CompiledTask) -> Task:
    return Task(
        contract_version=contract_version,
        task_id=task.task_id,
        family=task.family,
        position=task.position,
        line=task.line,
        has_verifier=task.has_verifier,
        metadata=task.metadata,
        environment=task.environment,
        agent_payload=task.agent_payload(),
    )


def pack_import_upload(
    *,
    archive: UploadedFile | None = None,
    manifest: UploadedFile | None = None,
    tasks: UploadedFile | None = None,
    files: UploadedFile | None = None,
    uploaded_by: AbstractBaseUser | None = None,
) -> ImportOutcome:
    """Import what the upload form or the API received (already size-checked)."""
    with rejecting_bad_input(), upload_workspace() as work:
        if archive is not None:
            path = _save_upload(archive, work / "upload.bin")
            return pack_import_archive(
                archive=path, display_name=_display_name(archive), uploaded_by=uploaded_by
            )
        if manifest is None or tasks is None:
            raise ValueError("an archive, or both manifest and tasks, are required")
        return pack_import_parts(
            manifest=_save_upload(manifest, work / "manifest.yaml"),
            tasks=_save_upload(tasks, work / "tasks.jsonl"),
            files_archive=_save_upload(files, work / "files.bin") if files else None,
            source_name=_display_name(manifest),
            uploaded_by=uploaded_by,
        )


def _save_upload(upload: UploadedFile, destination: Path) -> Path:
    with destination.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return destination


def _display_name(upload: UploadedFile) -> str:
    # The client's file name is data: keep only its last component, printable, bounded.
    name = Path((upload.name or "upload").replace("\\", "/")).name
    return "".join(ch for ch in name if ch.isprintable())[:120] or "upload"
