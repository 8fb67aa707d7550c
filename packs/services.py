"""Writes for packs: import an uploaded pack as a new immutable contract version.

Every entry point ends in ``pack_import_folder``: compile (pure, nothing stored; compiled
tasks stream to a scratch file in batches), check the (id, version) slot, copy files into
content-addressed storage, then store all rows in one transaction, batch by batch from the
scratch file. Any failure leaves nothing behind: blobs written by a failed import are removed.
"""

from __future__ import annotations

import functools
import itertools
import json
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, connection, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.utils import CursorWrapper
from django.db.models import Model
from django.utils import timezone

from packs import access, hooks
from packs.compiler import (
    CompiledTask,
    CompileLimits,
    CompileSummary,
    Manifest,
    PackCompilation,
    PackError,
    PackFileEntry,
    Problem,
    more_problems_text,
    open_pack,
)
from packs.compiler.archive import ArchiveError, ArchiveLimits, extract_archive, find_pack_root
from packs.internal import is_internal
from packs.models import (
    ContractVersion,
    FileRoot,
    Pack,
    PackFile,
    Resource,
    ResourceFile,
    SealedValue,
    Task,
    VersionState,
    blob_name,
)
from packs.uploads import save_upload, upload_display_name
from verifiers.lanes import PUBLIC

BULK_BATCH = 500
# Tasks compiled, spooled and stored per batch: bounds memory whatever the pack's size.
TASK_BATCH = 1000
# Rows per INSERT statement (fewer when the backend limits parameters per statement). One
# row per statement costs a round trip each on PostgreSQL; at 100 rows the statement text
# stays under 4 KiB, so psycopg parses it once and caches it.
ROWS_PER_STATEMENT = 100
MAX_STATEMENT_PARAMS = 65_535  # PostgreSQL's protocol limit, for backends that state none


class PackVersionConflict(Exception):
    """The (id, version) slot is taken by different content: versions are immutable."""


class PackNotMaintained(Exception):
    """The pack exists and the uploader is not one of its maintainers."""


class UploadRejected(Exception):
    """Bad input, in words for the uploader; nothing was stored. ``problems`` is capped
    (CompileLimits.max_problems); ``unlisted`` counts the problems found past the cap."""

    def __init__(
        self, problems: list[Problem], *, conflict: bool = False, unlisted: int = 0
    ) -> None:
        lines = [str(problem) for problem in problems]
        if unlisted:
            lines.append(more_problems_text(unlisted))
        super().__init__("\n".join(lines))
        self.problems = problems
        self.conflict = conflict
        self.unlisted = unlisted

    @property
    def total(self) -> int:
        return len(self.problems) + self.unlisted

    @property
    def summary(self) -> str:
        if self.conflict:
            return self.problems[0].message
        first = str(self.problems[0])
        return first if self.total == 1 else f"{self.total} problems; the first: {first}"

    def as_json(self) -> dict[str, Any]:
        """The API's error body and ``import_pack --json``'s answer: the same for both."""
        return {
            "detail": self.summary,
            "problems": [
                {
                    "file": p.file,
                    "line": p.line,
                    "field": p.field,
                    "message": p.message,
                    "excerpt": p.excerpt,
                    "column": p.column,
                }
                for p in self.problems
            ],
            "problem_count": self.total,
            "more_problems": self.unlisted,
        }


@contextmanager
def rejecting_bad_input() -> Iterator[None]:
    """Turn the compiler's, the archive checker's and the immutability errors into one type."""
    try:
        yield
    except PackError as exc:
        raise UploadRejected(list(exc.problems), unlisted=exc.unlisted) from exc
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
            _refuse_pack_files_in(root, display_name="files archive")
        shutil.copyfile(manifest, root / "manifest.yaml")
        shutil.copyfile(tasks, root / "tasks.jsonl")
        return pack_import_folder(folder=root, source_name=source_name, uploaded_by=uploaded_by)


def _refuse_pack_files_in(root: Path, *, display_name: str) -> None:
    """The files archive holds the asset roots only: the manifest and the tasks file come
    as parts of their own, and a member (file or folder) in their place would be taken for
    them or stand in their way."""
    for name in ("manifest.yaml", "tasks.jsonl"):
        if (root / name).exists() or (root / name).is_symlink():
            raise ArchiveError(
                f"{display_name}: member '{name}' is not allowed here; the files archive holds "
                f"the asset folders only (upload {name} as its own part)"
            )


def pack_import_folder(
    *, folder: Path, source_name: str = "", uploaded_by: AbstractBaseUser | None = None
) -> ImportOutcome:
    compilation = open_pack(folder, limits=compile_limits())
    with _task_spool() as spool:
        # Compiled tasks go to a scratch file as they are read, so a 100k-row pack is never
        # held in memory, and the database is only written (and SQLite's write lock only
        # taken) once the whole pack is known to be good.
        summary = _compile_to_spool(compilation, spool)
        # Maintainers first: to anyone else every version of the pack answers alike, so an
        # upload cannot tell them that a draft they may not see exists.
        _check_maintainer(compilation.manifest.id, uploaded_by)
        existing = _existing_version(compilation.manifest, summary.digest)
        if existing is not None:
            return ImportOutcome(existing, created=False)
        written = _store_blobs(compilation.files.values())
        try:
            contract_version = _store_rows(
                compilation, summary, spool, source_name=source_name, uploaded_by=uploaded_by
            )
        except IntegrityError:
            # A concurrent upload took the slot between our check and our insert.
            _remove_blobs(written)
            existing = _existing_version(compilation.manifest, summary.digest)
            if existing is None:
                raise
            return ImportOutcome(existing, created=False)
        except BaseException:
            _remove_blobs(written)
            raise
    return ImportOutcome(contract_version, created=True)


def _check_maintainer(pack_id: str, uploaded_by: AbstractBaseUser | None) -> None:
    if uploaded_by is not None and is_internal(pack_id):
        # The site stores its own packs itself (operations/canary.py); a user's pack under
        # that id would be hidden from every list and taken for the canary.
        raise PackNotMaintained(f"pack id {pack_id} is reserved for the site's own checks")
    pack = Pack.objects.filter(pack_id=pack_id).first()
    if pack is not None and not access.can_add_version(uploaded_by, pack):
        raise PackNotMaintained(
            f"pack {pack_id} is maintained by other users; ask one of them or an admin to "
            f"add you as a maintainer, or upload under a new id"
        )


def _existing_version(manifest: Manifest, digest: str) -> ContractVersion | None:
    existing = (
        ContractVersion.objects.select_related("pack")
        .filter(pack__pack_id=manifest.id, version=manifest.version)
        .first()
    )
    if existing is not None and existing.digest != digest:
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


# --- compiled tasks, spooled -----------------------------------------------------------------

# A compiled task reduced to what is stored, JSON already encoded (plain tuples: they pickle
# fast and small). Resource: (name, position, lane, kind, size, sha256, value JSON, files).
ResourceRecord = tuple[str, int, str, str, int, str, str, tuple[tuple[str, str], ...]]
# Task: (task id, family, position, line, has_verifier, metadata JSON, environment JSON,
# agent payload JSON, resources).
TaskRecord = tuple[str, str, int, int, bool, str, str, str, tuple[ResourceRecord, ...]]

# Stored JSON keeps the author's key order (as JSONField would) but drops the spaces.
_STORE_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _TaskSpool:
    """Batches of TaskRecords in an unnamed scratch file, read back in the order written."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle

    def write(self, batch: list[TaskRecord]) -> None:
        pickle.dump(batch, self._handle, protocol=pickle.HIGHEST_PROTOCOL)

    def batches(self) -> Iterator[list[TaskRecord]]:
        # Only this process wrote the file (unnamed, private), so unpickling it is safe.
        self._handle.seek(0)
        while True:
            try:
                yield pickle.load(self._handle)  # noqa: S301 - our own scratch file
            except EOFError:
                return


@contextmanager
def _task_spool() -> Iterator[_TaskSpool]:
    root = Path(settings.UPLOAD_WORK_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(prefix="tasks-", dir=root) as handle:
        yield _TaskSpool(handle)


def _compile_to_spool(compilation: PackCompilation, spool: _TaskSpool) -> CompileSummary:
    batch: list[TaskRecord] = []
    for task in compilation.tasks():
        if compilation.failed:
            # finish() will raise; keep reading only to name the later rows' problems too.
            batch.clear()
            continue
        batch.append(_task_record(task))
        if len(batch) >= TASK_BATCH:
            spool.write(batch)
            batch = []
    if batch:
        spool.write(batch)
    return compilation.finish()


def _task_record(task: CompiledTask) -> TaskRecord:
    encode = _STORE_JSON.encode
    resources = tuple(
        (r.name, position, r.lane, r.kind, r.size, r.sha256, encode(r.value), r.files)
        for position, r in enumerate(task.resources)
    )
    # The agent payload is exactly the public values: joined from their encodings, not
    # encoded a second time (the same text json would give for the dict, in the same order).
    payload = ",".join(
        f"{encode(name)}:{value}" for name, _, lane, *_, value, _ in resources if lane == PUBLIC
    )
    return (
        task.task_id,
        task.family,
        task.position,
        task.line,
        task.has_verifier,
        encode(task.metadata),
        encode(task.environment),
        "{" + payload + "}",
        resources,
    )


# --- rows --------------------------------------------------------------------------------------


@transaction.atomic
def _store_rows(
    compilation: PackCompilation,
    summary: CompileSummary,
    spool: _TaskSpool,
    *,
    source_name: str,
    uploaded_by: AbstractBaseUser | None,
) -> ContractVersion:
    manifest = compilation.manifest
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
    files = compilation.files
    contract_version = ContractVersion.objects.create(
        pack=pack,
        version=manifest.version,
        digest=summary.digest,
        manifest=manifest.canonical,
        canaries=list(manifest.canaries),
        contract=manifest.contract,
        compile_report=summary.report,
        family_counts=summary.report.get("family_counts", {}),
        lane_counts=summary.report.get("lane_counts", {}),
        task_count=summary.task_count,
        file_count=len(files),
        file_bytes=sum(entry.size for entry in files.values()),
        source_name=source_name[:255],
        uploaded_by=uploaded_by,
        **_initial_state(),
    )
    file_pks = _store_pack_files(contract_version, files.values())
    inserter = _TaskInserter(contract_version.pk, file_pks)
    for batch in spool.batches():
        inserter.insert(batch)
    pack_face_refresh(pack)
    hooks.version_created(contract_version, uploaded_by)
    return contract_version


def pack_face_refresh(pack: Pack) -> None:
    """Set what lists, search and the API show of a pack (title, description, latest
    version) from its newest **published** versions: a draft's wording is seen only on the
    draft's own page, by those who may see it (a viewer must not learn of an unreleased
    version from the pack list). A pack with nothing published yet follows its drafts; only
    its maintainers and reviewers see it. Called when a version is stored or published."""
    versions = list(pack.versions.order_by("-version").values("version", "state", "manifest"))
    published = [v for v in versions if v["state"] == VersionState.PUBLISHED]
    shown = published or versions
    pack.latest_version = shown[0]["version"] if shown else 0
    # A version without a title keeps the one an older version gave (as before the gate).
    pack.title = _first_wording(shown, "title")
    pack.description = _first_wording(shown, "description")
    pack.save(update_fields=["latest_version", "title", "description"])


def _first_wording(versions: list[dict[str, Any]], key: str) -> str:
    return next((str(v["manifest"][key]) for v in versions if v["manifest"].get(key)), "")


def _initial_state() -> dict[str, Any]:
    """A new version's state: a draft behind the publish gate (pack_health publishes it), or
    published at once where the site runs without the gate."""
    if settings.SECUREBENCH_PUBLISH_GATE:
        return {"state": VersionState.DRAFT}
    return {"state": VersionState.PUBLISHED, "published_at": timezone.now()}


def _store_pack_files(
    contract_version: ContractVersion, entries: Iterable[PackFileEntry]
) -> dict[tuple[str, str], int]:
    rows = [
        PackFile(
            contract_version=contract_version,
            root=entry.root,
            path=entry.path,
            size=entry.size,
            sha256=entry.sha256,
        )
        for entry in entries
    ]
    PackFile.objects.bulk_create(rows, batch_size=BULK_BATCH)
    return {(row.root, row.path): row.pk for row in rows}


class _PreEncoded(json.JSONEncoder):
    """For values that already are JSON text: the backend's own JSON adaptation (a jsonb
    parameter on PostgreSQL, text on SQLite) without encoding them again."""

    def encode(self, o: Any) -> str:
        return o


def _as_is(text: str) -> Any:
    return text


def _json_adapter() -> Callable[[str], Any]:
    """How this backend takes a JSON parameter that is already encoded."""
    ops = connection.ops
    if type(ops).adapt_json_value is BaseDatabaseOperations.adapt_json_value:
        return _as_is  # the default sends JSON as text: nothing to wrap (SQLite)
    return functools.partial(ops.adapt_json_value, encoder=_PreEncoded)  # e.g. jsonb


class _Insert:
    """INSERTs of many rows into one table: several rows per statement, within the backend's
    limit on parameters per statement (SQLite's is 32766, or 999 on old builds)."""

    def __init__(self, model: type[Model], fields: tuple[str, ...]) -> None:
        quote = connection.ops.quote_name
        columns = ", ".join(quote(model._meta.get_field(name).column) for name in fields)
        # Only model metadata goes into the text; every value is a parameter.
        self.head = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES "  # noqa: S608
        self.row = "(" + ",".join(["%s"] * len(fields)) + ")"
        limit = connection.features.max_query_params or MAX_STATEMENT_PARAMS
        self.per_statement = max(1, min(ROWS_PER_STATEMENT, limit // len(fields)))

    def sql(self, rows: int) -> str:
        return self.head + ",".join([self.row] * rows)

    def run(self, cursor: CursorWrapper, rows: list[tuple[Any, ...]]) -> None:
        size = self.per_statement
        chunks = [rows[start : start + size] for start in range(0, len(rows), size)]
        rest = chunks.pop() if chunks and len(chunks[-1]) < size else None
        # executemany even for one statement: DEBUG's query log then keeps "N times", not
        # the statement with every value spelled out.
        if chunks:
            cursor.executemany(self.sql(size), [_flat(chunk) for chunk in chunks])
        if rest:
            cursor.executemany(self.sql(len(rest)), [_flat(rest)])


def _flat(rows: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    return tuple(itertools.chain.from_iterable(rows))


class _TaskInserter:
    """Stores batches of TaskRecords: a few multi-row INSERTs per table and batch.

    bulk_create builds a model instance per row, and turning them into SQL was most of an
    import's time at 14k rows; here rows go from tuples straight to parameters. The primary
    keys executemany cannot return are read back by each table's unique key instead.
    """

    def __init__(self, contract_version_pk: int, file_pks: dict[tuple[str, str], int]) -> None:
        self.cv_pk = contract_version_pk
        self.file_pks = file_pks
        self.json = _json_adapter()
        self.tasks = _Insert(
            Task,
            (
                "contract_version",
                "task_id",
                "family",
                "position",
                "line",
                "has_verifier",
                "metadata",
                "environment",
                "agent_payload",
            ),
        )
        self.resources = _Insert(
            Resource,
            ("task", "name", "position", "lane", "kind", "size", "sha256", "public_value"),
        )
        self.sealed = _Insert(SealedValue, ("resource", "value"))
        self.links = _Insert(ResourceFile, ("resource", "pack_file"))

    def insert(self, batch: list[TaskRecord]) -> None:
        with connection.cursor() as cursor:
            self.tasks.run(cursor, [self._task_params(task) for task in batch])
            task_pks = self._task_pks(batch[0][2], batch[-1][2])
            self.resources.run(
                cursor,
                [
                    self._resource_params(task_pks[task[2]], resource)
                    for task in batch
                    for resource in task[8]
                ],
            )
            # Sealed values and file links need the resources' keys; plain MC rows have no
            # files, but every one has a hidden answer.
            wanted = [
                (task_pks[task[2]], resource)
                for task in batch
                for resource in task[8]
                if resource[2] != PUBLIC or resource[7]
            ]
            if not wanted:
                return
            resource_pks = self._resource_pks(list(task_pks.values()))
            sealed, links = [], []
            for task_pk, (_, position, lane, *_, value, files) in wanted:
                resource_pk = resource_pks[(task_pk, position)]
                if lane != PUBLIC:
                    sealed.append((resource_pk, self.json(value)))
                links += [(resource_pk, self.file_pks[key]) for key in files]
            self.sealed.run(cursor, sealed)
            self.links.run(cursor, links)

    def _task_params(self, task: TaskRecord) -> tuple[Any, ...]:
        task_id, family, position, line, has_verifier, metadata, environment, payload, _ = task
        return (
            self.cv_pk,
            task_id,
            family,
            position,
            line,
            has_verifier,
            self.json(metadata),
            self.json(environment),
            self.json(payload),
        )

    def _resource_params(self, task_pk: int, resource: ResourceRecord) -> tuple[Any, ...]:
        name, position, lane, kind, size, sha256, value, _ = resource
        # A non-public value never goes into the resource table (it has its own).
        public_value = self.json(value) if lane == PUBLIC else None
        return (task_pk, name, position, lane, kind, size, sha256, public_value)

    def _task_pks(self, first: int, last: int) -> dict[int, int]:
        """Task pk by position, for this batch's positions."""
        rows = Task.objects.filter(
            contract_version_id=self.cv_pk, position__gte=first, position__lte=last
        ).values_list("position", "pk")
        return dict(rows)

    @staticmethod
    def _resource_pks(task_pks: list[int]) -> dict[tuple[int, int], int]:
        """Resource pk by (task pk, position)."""
        rows = Resource.objects.filter(task_id__in=task_pks).values_list(
            "task_id", "position", "pk"
        )
        return {(task_pk, position): pk for task_pk, position, pk in rows}


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
            path = save_upload(archive, work / "upload.bin")
            return pack_import_archive(
                archive=path, display_name=upload_display_name(archive), uploaded_by=uploaded_by
            )
        if manifest is None or tasks is None:
            raise ValueError("an archive, or both manifest and tasks, are required")
        return pack_import_parts(
            manifest=save_upload(manifest, work / "manifest.yaml"),
            tasks=save_upload(tasks, work / "tasks.jsonl"),
            files_archive=save_upload(files, work / "files.bin") if files else None,
            source_name=upload_display_name(manifest),
            uploaded_by=uploaded_by,
        )
