"""Storing an uploaded evaluation: checked, content-addressed, immutable, all or nothing.

The same key (``id@version``) with the same content is a no-op; with other content it is
refused (raise ``version``), so the numbers stored under a key always come from one program
and one set of sealed data. Files go to the sealed store by sha256 before the rows are
written; a failure on the way removes what this call wrote.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction

from evaluations.manifest import (
    MANIFEST_NAME,
    PROGRAM_FOLDER,
    SEALED_FOLDER,
    TOP_LEVEL,
    EvaluationManifest,
    read_evaluation_manifest,
)
from evaluations.models import EvaluationDefinition, EvaluationFile, EvaluationTarget, FileRole
from packs.access import VIEW_PRIVILEGED, is_member
from packs.compiler.archive import ArchiveError, extract_archive, find_pack_root
from packs.compiler.digest import canonical_json, sha256_hex
from packs.compiler.errors import PackError, Problem
from packs.compiler.paths import unsafe_path_reason
from packs.models import Pack, blob_name
from packs.services import UploadRejected, archive_limits, compile_limits, upload_workspace
from packs.uploads import save_upload, upload_display_name

MAX_FILES = 2_000
CHUNK = 1 << 20


class EvaluationConflict(Exception):
    """The key is stored with other content, or the uploader may not score a named pack."""


@dataclass(frozen=True)
class StagedFile:
    role: str
    path: str
    source: Path
    size: int
    sha256: str
    mode: int


@dataclass(frozen=True)
class EvaluationImport:
    definition: EvaluationDefinition
    created: bool

    @property
    def message(self) -> str:
        definition = self.definition
        if self.created:
            return (
                f"Stored evaluation {definition.key}: {definition.scope} scope, metrics "
                f"{', '.join(m['name'] for m in definition.manifest['metrics'])}, digest "
                f"{definition.short_digest}."
            )
        return (
            f"Evaluation {definition.key} is already stored with the same content (digest "
            f"{definition.short_digest}); nothing changed."
        )


def evaluation_import_archive(
    *, archive: Path, display_name: str, uploaded_by: AbstractBaseUser | None = None
) -> EvaluationImport:
    with _rejecting(), upload_workspace() as work:
        extracted = work / "evaluation"
        extracted.mkdir()
        extract_archive(archive, extracted, limits=archive_limits(), display_name=display_name)
        root = find_pack_root(extracted, MANIFEST_NAME, display_name=display_name)
        return _import(root, display_name, uploaded_by)


def evaluation_import_upload(
    *, archive: UploadedFile, uploaded_by: AbstractBaseUser | None = None
) -> EvaluationImport:
    """What the upload page or the API received (already size-checked), as an archive."""
    with upload_workspace() as work:
        path = save_upload(archive, work / "upload.bin")
        return evaluation_import_archive(
            archive=path, display_name=upload_display_name(archive), uploaded_by=uploaded_by
        )


def evaluation_import_folder(
    *, folder: Path, source_name: str = "", uploaded_by: AbstractBaseUser | None = None
) -> EvaluationImport:
    with _rejecting():
        return _import(folder, source_name or folder.name, uploaded_by)


@contextmanager
def _rejecting() -> Iterator[None]:
    """Every author's error as one UploadRejected naming file, line and field."""
    try:
        yield
    except PackError as exc:
        raise UploadRejected(list(exc.problems), unlisted=exc.unlisted) from exc
    except ArchiveError as exc:
        raise UploadRejected([Problem("upload", None, None, str(exc))]) from exc
    except EvaluationConflict as exc:
        problem = Problem(MANIFEST_NAME, None, "version", str(exc))
        raise UploadRejected([problem], conflict=True) from exc


def _import(
    folder: Path, source_name: str, uploaded_by: AbstractBaseUser | None
) -> EvaluationImport:
    manifest = read_evaluation_manifest(folder, compile_limits())
    files = staged_files(folder)
    _check_targets(manifest, uploaded_by)
    digest = evaluation_digest(manifest, files)
    existing = _existing(manifest, digest)
    if existing is not None:
        return EvaluationImport(existing, created=False)
    written = _store_blobs(files)
    try:
        definition = _store_rows(manifest, files, digest, source_name, uploaded_by)
    except IntegrityError:
        _remove_blobs(written)
        existing = _existing(manifest, digest)
        if existing is None:
            raise
        return EvaluationImport(existing, created=False)
    except BaseException:
        _remove_blobs(written)
        raise
    return EvaluationImport(definition, created=True)


# --- the files ---------------------------------------------------------------------------------


def staged_files(folder: Path) -> list[StagedFile]:
    """program/ and sealed/ walked without following links: regular files only, safe paths,
    within the site's caps. Anything else at the top is refused rather than ignored."""
    problems: list[Problem] = []
    for entry in sorted(os.listdir(folder)):
        if entry not in TOP_LEVEL and not entry.startswith("."):
            problems.append(
                Problem(
                    entry,
                    None,
                    None,
                    f"is not part of an evaluation (the top level holds {MANIFEST_NAME}, "
                    f"{PROGRAM_FOLDER}/ and {SEALED_FOLDER}/ only)",
                )
            )
    files: list[StagedFile] = []
    for role, name in ((FileRole.PROGRAM, PROGRAM_FOLDER), (FileRole.SEALED, SEALED_FOLDER)):
        root = folder / name
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            problems.append(Problem(name, None, None, "must be a folder"))
            continue
        if root.is_dir():
            files += _walk(root, role, name, problems)
    if not any(item.role == FileRole.PROGRAM for item in files) and not problems:
        problems.append(
            Problem(PROGRAM_FOLDER, None, None, "is missing or empty: put the program there")
        )
    limits = archive_limits()
    if len(files) > MAX_FILES:
        problems.append(Problem("upload", None, None, f"holds more than {MAX_FILES} files"))
    if sum(item.size for item in files) > limits.max_unpacked_bytes:
        problems.append(Problem("upload", None, None, "is larger than the site's upload cap"))
    if problems:
        raise PackError(problems[:50], unlisted=max(0, len(problems) - 50))
    return files


def _walk(root: Path, role: str, name: str, problems: list[Problem]) -> list[StagedFile]:
    found: list[StagedFile] = []
    for current, folders, names in os.walk(root, followlinks=False):
        folders.sort()
        for entry in sorted([*folders, *names]):
            path = Path(current) / entry
            relative = path.relative_to(root).as_posix()
            shown = f"{name}/{relative}"
            info = path.lstat()
            reason = unsafe_path_reason(relative)
            if reason is not None:
                problems.append(Problem(shown, None, None, f"path {reason}"))
            elif stat.S_ISLNK(info.st_mode):
                problems.append(Problem(shown, None, None, "is a symlink; upload the file itself"))
            elif stat.S_ISREG(info.st_mode):
                executable = 0o755 if info.st_mode & 0o111 else 0o644
                found.append(
                    StagedFile(role, relative, path, info.st_size, _sha256(path), executable)
                )
            elif not stat.S_ISDIR(info.st_mode):
                problems.append(Problem(shown, None, None, "is not a regular file or folder"))
        folders[:] = [f for f in folders if not (Path(current) / f).is_symlink()]
    return found


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def evaluation_digest(manifest: EvaluationManifest, files: list[StagedFile]) -> str:
    """What the key names for ever: the declaration and every file, mode included."""
    listing = sorted((item.role, item.path, item.sha256, item.mode) for item in files)
    return sha256_hex(canonical_json({"manifest": manifest.canonical, "files": listing}))


# --- who may, and immutability -------------------------------------------------------------------


def _check_targets(manifest: EvaluationManifest, uploaded_by: AbstractBaseUser | None) -> None:
    """Every pack it scores must exist; a person uploading must maintain each of them or
    review for the site (a trusted import from the command line has no user)."""
    problems: list[Problem] = []
    packs = {pack.pack_id: pack for pack in Pack.objects.filter(pack_id__in=manifest.scores)}
    reviewer = uploaded_by is None or (
        is_member(uploaded_by)
        and (uploaded_by.is_superuser or uploaded_by.has_perm(VIEW_PRIVILEGED))
    )
    for index, pack_id in enumerate(manifest.scores):
        field = f"scores[{index}].pack"
        pack = packs.get(pack_id)
        if pack is None:
            problems.append(Problem(MANIFEST_NAME, None, field, f"no pack {pack_id} on this site"))
        elif not reviewer and not pack.maintainers.filter(pk=uploaded_by.pk).exists():
            problems.append(
                Problem(
                    MANIFEST_NAME,
                    None,
                    field,
                    f"you do not maintain {pack_id}: its maintainers and reviewers may add "
                    f"evaluations that score it",
                )
            )
    if problems:
        raise PackError(problems)


def _existing(manifest: EvaluationManifest, digest: str) -> EvaluationDefinition | None:
    existing = EvaluationDefinition.objects.filter(
        name=manifest.id, version=manifest.version
    ).first()
    if existing is not None and existing.digest != digest:
        raise EvaluationConflict(
            f"{manifest.key} is already stored with different content (digest "
            f"{existing.short_digest}); raise `version` to store this as a new version"
        )
    return existing


# --- storing -----------------------------------------------------------------------------------


def _sealed_storage() -> Storage:
    return storages["pack_sealed"]


def _store_blobs(files: list[StagedFile]) -> list[str]:
    storage = _sealed_storage()
    written: list[str] = []
    try:
        for item in files:
            name = blob_name(item.sha256)
            if storage.exists(name):
                continue
            with item.source.open("rb") as handle:
                saved = storage.save(name, File(handle))
            if saved != name:  # stored meanwhile by someone else: ours is a spare copy
                storage.delete(saved)
                continue
            written.append(saved)
    except BaseException:
        _remove_blobs(written)
        raise
    return written


def _remove_blobs(written: list[str]) -> None:
    storage = _sealed_storage()
    for name in written:
        storage.delete(name)


@transaction.atomic
def _store_rows(
    manifest: EvaluationManifest,
    files: list[StagedFile],
    digest: str,
    source_name: str,
    uploaded_by: AbstractBaseUser | None,
) -> EvaluationDefinition:
    definition = EvaluationDefinition.objects.create(
        name=manifest.id,
        version=manifest.version,
        digest=digest,
        title=manifest.title,
        description=manifest.description,
        scope=manifest.scope,
        manifest=manifest.canonical,
        primary_metric=manifest.primary.name,
        source_name=source_name[:255],
        uploaded_by=uploaded_by,
    )
    EvaluationTarget.objects.bulk_create(
        EvaluationTarget(
            definition=definition,
            pack_id=pack_id,
            versions=list(versions) if versions is not None else None,
        )
        for pack_id, versions in manifest.scores.items()
    )
    EvaluationFile.objects.bulk_create(
        EvaluationFile(
            definition=definition,
            role=item.role,
            path=item.path,
            size=item.size,
            sha256=item.sha256,
            mode=item.mode,
        )
        for item in files
    )
    return definition


def blob_chunks(sha256: str) -> Iterator[bytes]:
    """A stored file's bytes, for the program's maintainers' view (never a URL of its own)."""
    with _sealed_storage().open(blob_name(sha256), "rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk
