"""Pack files as a process reads them: a local cache in front of the pack storages.

A worker host shares no disk with the web host: every file a verification needs comes from
the ``pack_public`` or ``pack_sealed`` storage (the data folder, or a bucket) into a cache of
its own, keyed by sha256. The digest is checked on every use, not only on arrival: a blob
that changed on disk (a bad sector, a stray write) is fetched again, never handed to a
verifier. Past the size cap the least recently used blobs go, except those used a moment ago
(a verification may be about to copy them). Sandboxes never see the cache itself: verifiers
copy what they need into their scratch space (``verifiers.scratch_files``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import storages

from packs.models import FileRoot, blob_name

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
# A blob used this recently is never evicted: its caller may not have copied it yet.
EVICTION_GRACE_SECONDS = 300


class BlobUnavailable(Exception):
    """The storage has no such blob, or gave bytes whose digest is not the name's."""


class BlobChanged(Exception):
    """The bytes copied into the storage were not those the caller hashed (the source changed
    under it): nothing is kept under that name."""


@dataclass(frozen=True)
class BlobCache:
    root: Path
    max_bytes: int

    def local_path(self, file_root: str, sha256: str) -> Path:
        """A local, verified copy of the blob; fetched from its storage when absent or bad."""
        path = self.root / sha256[:2] / sha256
        if path.exists():
            if file_digest(path) == sha256:
                _mark_used(path)
                return path
            logger.warning("cached blob %s failed its digest check; fetching it again", sha256)
            path.unlink(missing_ok=True)
        self._fetch(file_root, sha256, path)
        self.evict(keep=path)
        return path

    def _fetch(self, file_root: str, sha256: str, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        storage = storages["pack_public" if file_root == FileRoot.PUBLIC else "pack_sealed"]
        digest = hashlib.sha256()
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".fetch-")
        try:
            with os.fdopen(handle, "wb") as out, storage.open(blob_name(sha256), "rb") as src:
                while chunk := src.read(CHUNK_BYTES):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != sha256:
                raise BlobUnavailable(
                    f"the {file_root} storage returned other bytes for blob {sha256}"
                )
            os.chmod(partial, 0o644)
            os.replace(partial, path)  # atomic: a concurrent reader sees all or nothing
        except FileNotFoundError as exc:
            raise BlobUnavailable(f"blob {sha256} is missing from the {file_root} storage") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove least-recently-used blobs until the cache fits its cap; returns them."""
        entries = sorted(self._entries(), key=lambda entry: entry[1])
        total = sum(size for _, _, size in entries)
        removed: list[Path] = []
        fresh_after = time.time() - EVICTION_GRACE_SECONDS
        for path, used_at, size in entries:
            if total <= self.max_bytes:
                break
            if path == keep or used_at > fresh_after:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
            total -= size
        return removed

    def _entries(self) -> list[tuple[Path, float, int]]:
        if not self.root.is_dir():
            return []
        found: list[tuple[Path, float, int]] = []
        for folder in self.root.iterdir():
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                if path.name.startswith(".fetch-"):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    stat = path.stat()
                    found.append((path, stat.st_mtime, stat.st_size))
        return found


def blob_cache() -> BlobCache:
    return BlobCache(
        Path(settings.SECUREBENCH_BLOB_CACHE_DIR), settings.SECUREBENCH_BLOB_CACHE_BYTES
    )


def local_blob(file_root: str, sha256: str) -> Path:
    """The verified local copy of a stored pack file."""
    return blob_cache().local_path(file_root, sha256)


def file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _mark_used(path: Path) -> None:
    # The modification time doubles as "last used": eviction takes the oldest first.
    with contextlib.suppress(FileNotFoundError):
        os.utime(path)


# --- writing ----------------------------------------------------------------------------------


class _HashingReader:
    """A file object that hashes what is read from it, from its start (a storage that
    rewinds it starts the hash again)."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.source.read(size)
        self.digest.update(chunk)
        self.size += len(chunk)
        return chunk

    def seek(self, offset: int, whence: int = 0) -> int:
        # Any other move (a storage measuring the file) spoils the hash until the next
        # rewind: a storage that then read out of order would fail closed (BlobChanged).
        if (offset, whence) == (0, 0):
            self.digest, self.size = hashlib.sha256(), 0
        else:
            self.digest.update(b"\0moved")
        return self.source.seek(offset, whence)

    def tell(self) -> int:
        return self.source.tell()


def blob_store(file_root: str, source: IO[bytes], sha256: str) -> bool:
    """Copy ``source`` (a file open for reading, at any size) into its storage under
    ``blob_name(sha256)``, in chunks, hashing while copying; True if this call created the
    blob, False if the storage held it already. Bytes whose digest is not ``sha256`` are
    removed again and raise BlobChanged: a name never holds other content."""
    storage = storages["pack_public" if file_root == FileRoot.PUBLIC else "pack_sealed"]
    name = blob_name(sha256)
    if storage.exists(name):
        return False
    reader = _HashingReader(source)
    reader.seek(0)
    # A plain File (no temporary_file_path): the storage copies it, never moves the source.
    saved = storage.save(name, File(reader, name=name))  # type: ignore[arg-type]
    if reader.digest.hexdigest() != sha256:
        storage.delete(saved)
        raise BlobChanged(f"the bytes stored for blob {sha256} have another digest")
    if saved != name:
        # Someone stored the same content meanwhile; ours is a redundant copy.
        storage.delete(saved)
        return False
    return True


def blob_remove(file_root: str, sha256: str) -> None:
    """Remove a blob this process created and nothing refers to (a refused write)."""
    storage = storages["pack_public" if file_root == FileRoot.PUBLIC else "pack_sealed"]
    storage.delete(blob_name(sha256))
