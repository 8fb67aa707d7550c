"""Safe extraction of an uploaded pack archive (.zip, .tar, .tar.gz).

Every member is validated before anything is written, and the whole archive is
rejected on the first problem: names are never "repaired" (security.md A35-A37).
Only regular files and folders are created, always below the destination, with
fixed permissions, and a running counter of the bytes actually written stops
decompression bombs no matter what sizes the archive declares.
"""

from __future__ import annotations

import contextlib
import gzip
import lzma
import os
import re
import shutil
import stat
import tarfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

MANIFEST_NAME = "manifest.yaml"

_CHUNK_BYTES = 64 * 1024
_MAX_COMPONENT_BYTES = 255  # NAME_MAX on Linux filesystems
_DIR_MODE = 0o755
_FILE_MODE = 0o644
_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")
_GZIP_MAGIC = b"\x1f\x8b"
# Headers, long-name/pax records and block padding are not member data, so the raw
# tar stream may exceed the data budget by this much per member before we stop it.
_TAR_OVERHEAD_PER_MEMBER = 8 * 1024
# Pax extended/global headers and GNU long name/link headers are read whole into memory
# and parsed before the member they describe is seen. Honest ones are small: a name is at
# most max_path_length characters and pax records for times, owner and xattrs take a few
# hundred bytes, so 64 KiB leaves room for any real archive and keeps each read small.
_MAX_TAR_META_HEADER_BYTES = 64 * 1024
# tarfile before Python 3.12.6 searches pax data with a regex that backtracks over every
# run of ASCII digits (CVE-2024-6232): n digits cost about n*n/2 steps, 5 s for 64 KiB.
# Honest records hold lengths, times and ids of at most about 20 digits.
_MAX_PAX_DIGIT_RUN = 32
# All such headers of one archive together (20,000 members with 1 KiB paths stay below):
# with the digit cap this bounds tarfile's pax parsing to about a second per pass.
_MAX_TAR_META_TOTAL_BYTES = 32 * 1024 * 1024
_PAX_TYPES = {
    tarfile.XHDTYPE: "pax extended header",
    tarfile.XGLTYPE: "pax global header",
    tarfile.SOLARIS_XHDTYPE: "pax extended header",
}
_LONG_NAME_TYPES = {
    tarfile.GNUTYPE_LONGNAME: "GNU long name header",
    tarfile.GNUTYPE_LONGLINK: "GNU long link header",
}
_PAX_DIGIT_RUN = re.compile(rb"[0-9]{%d}" % (_MAX_PAX_DIGIT_RUN + 1))
# Folders that archivers add next to the real content; they never make a pack root.
_IGNORED_TOP_LEVEL = frozenset({"__MACOSX", ".DS_Store"})
# Everything a damaged archive can raise while being read by the standard library.
_READ_ERRORS = (
    zipfile.BadZipFile,
    tarfile.TarError,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    NotImplementedError,
    gzip.BadGzipFile,
    ValueError,
)

_Kind = Literal["file", "dir", "other"]


@dataclass(frozen=True)
class ArchiveLimits:
    max_archive_bytes: int = 256 * 1024 * 1024
    max_members: int = 20_000
    max_unpacked_bytes: int = 1024 * 1024 * 1024
    max_path_length: int = 1024


DEFAULT_LIMITS = ArchiveLimits()


class ArchiveError(Exception):
    """The archive was rejected; str() is a sentence that can be shown to the uploader."""


@dataclass(frozen=True)
class _Entry:
    raw_name: str
    parts: tuple[str, ...]
    is_dir: bool


class _StreamTooLarge(Exception):
    """Raised by _CappedReader; turned into an ArchiveError by the tar extractor."""


def extract_archive(
    source: Path,
    destination: Path,
    *,
    limits: ArchiveLimits = DEFAULT_LIMITS,
    display_name: str | None = None,
) -> None:
    """Extract `source` into the empty folder `destination` or raise ArchiveError.

    On any error the destination is left empty (it is created if missing).
    """
    label = display_name or source.name
    _prepare_destination(destination)
    try:
        _check_archive_size(source, limits, label)
        kind = _detect_format(source)
        if kind is None:
            raise ArchiveError(f"{label} is not a .zip or .tar.gz archive")
        if kind == "zip":
            _extract_zip(source, destination, limits, label)
        else:
            _extract_tar(source, destination, limits, label, gzipped=kind == "tar.gz")
    except BaseException:
        _empty_directory(destination)
        raise


def find_pack_root(
    extracted: Path,
    manifest_name: str = MANIFEST_NAME,
    *,
    display_name: str | None = None,
) -> Path:
    """Return the folder holding the manifest: the top level or its single folder."""
    if _is_regular_file(extracted / manifest_name):
        return extracted
    children = [c for c in extracted.iterdir() if c.name not in _IGNORED_TOP_LEVEL]
    only = children[0] if len(children) == 1 else None
    if only is not None and _is_real_dir(only) and _is_regular_file(only / manifest_name):
        return only
    label = display_name or "the archive"
    raise ArchiveError(
        f"{label} contains no {manifest_name} at its top level or in a single top-level folder"
    )


# --- format detection and source checks ------------------------------------------------


def _check_archive_size(source: Path, limits: ArchiveLimits, label: str) -> None:
    size = source.stat().st_size
    if size > limits.max_archive_bytes:
        raise ArchiveError(
            f"{label} is {_format_size(size)}, larger than the "
            f"{_format_size(limits.max_archive_bytes)} limit"
        )


def _detect_format(source: Path) -> Literal["zip", "tar", "tar.gz"] | None:
    # Tar is checked before zip: zipfile.is_zipfile scans the end of the file, so a
    # plain tar whose last member is itself a .zip would otherwise be read as a zip.
    with source.open("rb") as fh:
        if fh.read(2) == _GZIP_MAGIC:
            return "tar.gz"
    if _is_plain_tar(source):
        return "tar"
    if zipfile.is_zipfile(source):
        return "zip"
    return None


def _is_plain_tar(source: Path) -> bool:
    # Only the first header block is parsed: tarfile.open() would already process a hostile
    # pax header that precedes the first member, before _TarHeaderGuard has seen it.
    # (tarfile.is_tarfile also accepts bz2/xz; we only promise .tar and .tar.gz.)
    with source.open("rb") as fh:
        block = fh.read(tarfile.BLOCKSIZE)
    try:
        tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
    except tarfile.EOFHeaderError:
        return True  # an all-zero block: an empty tar, as tarfile.open() agrees
    except tarfile.HeaderError:
        return False
    return True


# --- member validation -----------------------------------------------------------------


class _Plan:
    """Collects validated members; rejects the archive on the first bad one."""

    def __init__(self, limits: ArchiveLimits, label: str) -> None:
        self.limits = limits
        self.label = label
        self.entries: list[_Entry | None] = []  # None marks the root entry ("./")
        self._declared_bytes = 0
        self._seen: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {}
        self._files: dict[tuple[str, ...], str] = {}
        self._dirs: set[tuple[str, ...]] = set()

    def add(self, raw_name: str, kind: _Kind, declared_size: int) -> None:
        if len(self.entries) >= self.limits.max_members:
            raise ArchiveError(f"{self.label} has more than {self.limits.max_members} members")
        if kind == "other":
            raise ArchiveError(f"{self.label} contains a link or special file: {_quote(raw_name)}")
        parts = _validated_parts(raw_name, self.limits, self.label)
        if not parts:
            if kind != "dir":
                raise ArchiveError(f"{self.label} contains a member with an empty name")
            self.entries.append(None)
            return
        self._check_unique(raw_name, parts)
        self._count_declared(raw_name, declared_size)
        entry = _Entry(raw_name=raw_name, parts=parts, is_dir=kind == "dir")
        self._remember_shape(entry)
        self.entries.append(entry)

    def finish(self) -> None:
        for key, raw_name in self._files.items():
            if key in self._dirs:
                raise ArchiveError(
                    f"{self.label}: member {_quote(raw_name)} is both a file and a folder"
                )

    def _check_unique(self, raw_name: str, parts: tuple[str, ...]) -> None:
        key = _comparison_key(parts)
        previous = self._seen.get(key)
        if previous is None:
            self._seen[key] = (raw_name, parts)
        elif previous[1] == parts:
            raise ArchiveError(f"{self.label}: member {_quote(raw_name)} appears more than once")
        else:
            # Case-insensitive filesystems (macOS, Windows) would merge the two.
            raise ArchiveError(
                f"{self.label}: member {_quote(raw_name)} clashes with {_quote(previous[0])} "
                "(the names differ only in letter case or Unicode form)"
            )

    def _count_declared(self, raw_name: str, declared_size: int) -> None:
        # Declared sizes are only used to refuse early; the writer counts real bytes.
        self._declared_bytes += max(declared_size, 0)
        if self._declared_bytes > self.limits.max_unpacked_bytes:
            raise _expands_beyond(self.label, raw_name, self.limits)

    def _remember_shape(self, entry: _Entry) -> None:
        key = _comparison_key(entry.parts)
        if entry.is_dir:
            self._dirs.add(key)
        else:
            self._files[key] = entry.raw_name
        for depth in range(1, len(key)):
            self._dirs.add(key[:depth])


def _validated_parts(raw_name: str, limits: ArchiveLimits, label: str) -> tuple[str, ...]:
    """Split a member name into safe components, or reject it (never sanitise)."""

    def reject(reason: str) -> ArchiveError:
        return ArchiveError(f"{label}: member {_quote(raw_name)} {reason}")

    if len(raw_name) > limits.max_path_length:
        raise reject(f"has a name longer than {limits.max_path_length} characters")
    if any(not ch.isprintable() and ch != " " for ch in raw_name):
        raise reject("has a NUL or other control character in its name")
    if "\\" in raw_name:
        raise reject("contains a backslash; use '/' between folders")
    if raw_name.startswith("/"):
        raise reject("is an absolute path")
    if _DRIVE_LETTER.match(raw_name):
        raise reject("starts with a drive letter")
    try:
        raw_name.encode("utf-8")
    except UnicodeEncodeError:
        raise reject("has a name that is not valid UTF-8") from None
    # Empty and "." components ("./a", "a//b", "dir/") carry no meaning; drop them.
    parts = tuple(p for p in raw_name.split("/") if p not in ("", "."))
    if ".." in parts:
        depth = 0
        for part in parts:
            depth += -1 if part == ".." else 1
            if depth < 0:
                raise reject("escapes the archive root")
        raise reject("contains a '..' component")
    if any(len(p.encode("utf-8")) > _MAX_COMPONENT_BYTES for p in parts):
        raise reject(f"has a file or folder name longer than {_MAX_COMPONENT_BYTES} bytes")
    return parts


def _comparison_key(parts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(unicodedata.normalize("NFC", p).casefold() for p in parts)


# --- zip ---------------------------------------------------------------------------------


def _extract_zip(source: Path, destination: Path, limits: ArchiveLimits, label: str) -> None:
    _check_zip_entry_count(source, limits, label)
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        raise ArchiveError(f"{label} is a damaged .zip archive ({exc})") from None
    with archive:
        infos = archive.infolist()
        plan = _Plan(limits, label)
        for info in infos:
            plan.add(info.orig_filename, _zip_kind(info), info.file_size)
            if info.flag_bits & 0x1:
                raise ArchiveError(f"{label}: member {_quote(info.orig_filename)} is encrypted")
        plan.finish()
        with _Writer(destination, limits, label) as writer:
            for info, entry in zip(infos, plan.entries, strict=True):
                if entry is None:
                    continue
                if entry.is_dir:
                    writer.make_dir(entry.parts)
                    continue
                with _read_errors(label, entry.raw_name), archive.open(info) as stream:
                    writer.write_file(entry, stream)


def _check_zip_entry_count(source: Path, limits: ArchiveLimits, label: str) -> None:
    # ZipFile() parses the whole central directory into memory, so read the entry
    # count from the end record first and refuse million-entry archives cheaply.
    # _EndRecData is private but has been stable since Python 2.
    with source.open("rb") as fh:
        end_record = zipfile._EndRecData(fh)  # type: ignore[attr-defined]
    if end_record and end_record[zipfile._ECD_ENTRIES_TOTAL] > limits.max_members:  # type: ignore[attr-defined]
        raise ArchiveError(f"{label} has more than {limits.max_members} members")


def _zip_kind(info: zipfile.ZipInfo) -> _Kind:
    unix_mode = info.external_attr >> 16
    file_type = stat.S_IFMT(unix_mode)
    # Only Unix-made zips carry file types; symlinks are stored as S_IFLNK entries.
    if info.create_system == 3 and file_type not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "other"
    if info.orig_filename.endswith("/") or file_type == stat.S_IFDIR:
        return "dir"
    return "file"


# --- tar ---------------------------------------------------------------------------------


def _extract_tar(
    source: Path, destination: Path, limits: ArchiveLimits, label: str, *, gzipped: bool
) -> None:
    # Two streaming passes (validate, then write) instead of random access: seeking
    # backwards in a gzip stream means decompressing it again from the start.
    try:
        plan = _Plan(limits, label)
        with _open_tar_stream(source, limits, label, gzipped=gzipped) as archive:
            for member in archive:
                plan.add(member.name, _tar_kind(member), member.size)
        plan.finish()
        with (
            _open_tar_stream(source, limits, label, gzipped=gzipped) as archive,
            _Writer(destination, limits, label) as writer,
        ):
            _write_tar_members(archive, plan, writer)
    except _StreamTooLarge:
        raise ArchiveError(
            f"{label} expands beyond {_format_size(limits.max_unpacked_bytes)}"
        ) from None
    except _READ_ERRORS as exc:
        raise ArchiveError(f"{label} is a damaged .tar archive ({exc})") from None


def _write_tar_members(archive: tarfile.TarFile, plan: _Plan, writer: _Writer) -> None:
    expected = iter(plan.entries)
    for member in archive:
        entry = next(expected, None)
        if entry is not None and entry.raw_name != member.name:
            # The file changed between the two passes; never write unvalidated names.
            raise ArchiveError(f"{plan.label} changed while it was being extracted")
        if entry is None:
            continue
        if entry.is_dir:
            writer.make_dir(entry.parts)
            continue
        stream = archive.extractfile(member)
        if stream is None:
            raise ArchiveError(f"{plan.label}: member {_quote(member.name)} cannot be read")
        with stream:
            writer.write_file(entry, stream)


@contextlib.contextmanager
def _open_tar_stream(
    source: Path, limits: ArchiveLimits, label: str, *, gzipped: bool
) -> Iterator[tarfile.TarFile]:
    cap = limits.max_unpacked_bytes + (limits.max_members + 2) * _TAR_OVERHEAD_PER_MEMBER
    with source.open("rb") as raw:
        data: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        # tarfile reads only through the guard, so it never gets a header block (or pax
        # data) the guard has not checked first.
        checked = _TarHeaderGuard(_CappedReader(data, cap), label)
        with data, tarfile.open(fileobj=checked, mode="r|") as archive:  # type: ignore[call-overload]
            yield archive


def _tar_kind(member: tarfile.TarInfo) -> _Kind:
    # Sparse members count as regular in tarfile but expand to their declared
    # "real" size from almost nothing, so they are refused with the links.
    if member.isreg() and not member.issparse():
        return "file"
    if member.isdir():
        return "dir"
    return "other"


class _CappedReader:
    """File-like reader that stops a (decompressed) tar stream past `cap` bytes."""

    def __init__(self, inner: IO[bytes], cap: int) -> None:
        self._inner = inner
        self._cap = cap
        self._read = 0

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self._read += len(data)
        if self._read > self._cap:
            raise _StreamTooLarge
        return data


class _TarHeaderGuard:
    """Walks the 512-byte header blocks of a tar stream as tarfile will read them.

    Every block passes through here before tarfile gets it; pax and GNU long-name headers
    that are too large, pax data tarfile would parse in quadratic time, and size fields
    that are not numbers are refused before tarfile parses any of them. The walk follows
    tarfile's layout rules (which types carry data, old GNU sparse extension blocks) and
    refuses the one thing that would move a header elsewhere: a pax "size" record.
    """

    def __init__(self, inner: _CappedReader, label: str) -> None:
        self._inner = inner
        self._label = label
        self._block = bytearray()  # the header block being collected
        self._skip = 0  # bytes of member or header data (with padding) still to pass
        self._pax: bytearray | None = None  # data of the pax header being passed
        self._sparse_data: int | None = None  # data size once sparse extensions end
        self._member = 1  # 1-based position of the member the next header belongs to
        self._meta_total = 0
        self._ended = False  # an all-zero block: tarfile stops reading headers there

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self._walk(memoryview(data))
        return data

    def _walk(self, data: memoryview) -> None:
        pos = 0
        while pos < len(data) and not self._ended:
            if self._skip:
                take = min(self._skip, len(data) - pos)
                if self._pax is not None:
                    self._pax += data[pos : pos + take]
                self._skip -= take
                pos += take
                if not self._skip and self._pax is not None:
                    self._check_pax_data(bytes(self._pax))
                    self._pax = None
                continue
            take = min(tarfile.BLOCKSIZE - len(self._block), len(data) - pos)
            self._block += data[pos : pos + take]
            pos += take
            if len(self._block) == tarfile.BLOCKSIZE:
                block = bytes(self._block)
                self._block.clear()
                self._on_block(block)

    def _on_block(self, block: bytes) -> None:
        if self._sparse_data is not None:
            # An old GNU sparse extension block; byte 504 says whether another follows.
            if not block[504]:
                self._skip, self._sparse_data = self._sparse_data, None
            return
        if block.count(0) == tarfile.BLOCKSIZE:
            self._ended = True
            return
        kind = block[156:157]
        size = self._size_of(block)
        if kind in _PAX_TYPES or kind in _LONG_NAME_TYPES:
            self._on_meta_header(kind, size)
            return
        data = _padded(size) if _tar_carries_data(kind, block) else 0
        if kind == tarfile.GNUTYPE_SPARSE and block[482]:
            self._sparse_data = data
        else:
            self._skip = data
        self._member += 1

    def _on_meta_header(self, kind: bytes, size: int) -> None:
        what = _PAX_TYPES.get(kind) or _LONG_NAME_TYPES[kind]
        if size > _MAX_TAR_META_HEADER_BYTES:
            raise self._refuse(
                f"has a {what} of {_format_size(size)}, larger than the "
                f"{_format_size(_MAX_TAR_META_HEADER_BYTES)} limit for such headers"
            )
        self._meta_total += size
        if self._meta_total > _MAX_TAR_META_TOTAL_BYTES:
            raise ArchiveError(
                f"{self._label}: its pax and long-name headers add up to more than "
                f"{_format_size(_MAX_TAR_META_TOTAL_BYTES)} (at member {self._member})"
            )
        self._skip = _padded(size)
        self._pax = bytearray() if kind in _PAX_TYPES and self._skip else None

    def _check_pax_data(self, data: bytes) -> None:
        if _PAX_DIGIT_RUN.search(data):
            raise self._refuse(
                f"has a pax header with a run of more than {_MAX_PAX_DIGIT_RUN} digits"
            )
        # Necessary for any "size" record, whatever else the data holds; such a record
        # moves the next header, and honest archives only write one for members > 8 GiB.
        if b" size=" in data:
            raise self._refuse("has a pax header that overrides its size")

    def _size_of(self, block: bytes) -> int:
        size = _tar_number(block[124:136])
        if size is None:
            raise self._refuse("has a tar header with an invalid size field")
        return size

    def _refuse(self, reason: str) -> ArchiveError:
        return ArchiveError(f"{self._label}: member {self._member} {reason}")


def _tar_number(field: bytes) -> int | None:
    """A tar number field as tarfile reads it (octal or GNU base-256), None if invalid.

    Stricter than tarfile, never looser: signs, underscores and "0o" are refused, and so
    are negative base-256 values.
    """
    if field[0] == 0o200:
        return int.from_bytes(field[1:], "big")
    if field[0] == 0o377:
        return None
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0  # tarfile reads an empty field as 0
    if any(byte not in b"01234567" for byte in text):
        return None
    return int(text, 8)


def _tar_carries_data(kind: bytes, block: bytes) -> bool:
    # tarfile skips data after regular and unknown types only; an old-style regular
    # entry whose name ends in "/" is a folder (TarInfo.frombuf and _proc_builtin).
    if kind == tarfile.AREGTYPE and block[:100].split(b"\0", 1)[0].endswith(b"/"):
        return False
    return kind in tarfile.REGULAR_TYPES or kind not in tarfile.SUPPORTED_TYPES


def _padded(size: int) -> int:
    return -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


# --- writing -----------------------------------------------------------------------------


class _Writer:
    """Creates folders and files strictly below the destination, counting real bytes.

    Every path is walked one component at a time from a directory descriptor with
    O_NOFOLLOW, so nothing can be written through a symlink even if one appeared.
    """

    def __init__(self, destination: Path, limits: ArchiveLimits, label: str) -> None:
        self._root_fd = os.open(destination, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._limits = limits
        self._label = label
        self._written = 0

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        os.close(self._root_fd)

    def make_dir(self, parts: tuple[str, ...]) -> None:
        os.close(self._open_dir(parts))

    def write_file(self, entry: _Entry, stream: IO[bytes]) -> None:
        parent_fd = self._open_dir(entry.parts[:-1])
        try:
            fd = self._create_file(entry, parent_fd)
        finally:
            os.close(parent_fd)
        with os.fdopen(fd, "wb") as out:
            while chunk := self._read_chunk(entry, stream):
                self._written += len(chunk)
                if self._written > self._limits.max_unpacked_bytes:
                    raise _expands_beyond(self._label, entry.raw_name, self._limits)
                out.write(chunk)

    def _read_chunk(self, entry: _Entry, stream: IO[bytes]) -> bytes:
        with _read_errors(self._label, entry.raw_name):
            return stream.read(_CHUNK_BYTES)

    def _create_file(self, entry: _Entry, parent_fd: int) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(entry.parts[-1], flags, _FILE_MODE, dir_fd=parent_fd)
        except OSError as exc:
            raise self._write_failed(entry.raw_name, exc) from None
        os.fchmod(fd, _FILE_MODE)  # exact mode whatever the umask; never exec or setuid
        return fd

    def _open_dir(self, parts: tuple[str, ...]) -> int:
        """Return a descriptor for root/parts, creating missing folders on the way."""
        fd = os.dup(self._root_fd)
        for part in parts:
            try:
                child = self._open_or_create_child_dir(fd, part)
            except OSError as exc:
                raise self._write_failed("/".join(parts), exc) from None
            finally:
                os.close(fd)
            fd = child
        return fd

    @staticmethod
    def _open_or_create_child_dir(parent_fd: int, name: str) -> int:
        created = False
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, _DIR_MODE, dir_fd=parent_fd)
            created = True
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, dir_fd=parent_fd)
        if created:
            os.fchmod(fd, _DIR_MODE)
        return fd

    def _write_failed(self, raw_name: str, exc: OSError) -> ArchiveError:
        reason = exc.strerror or type(exc).__name__
        return ArchiveError(
            f"{self._label}: member {_quote(raw_name)} could not be written ({reason})"
        )


# --- helpers -----------------------------------------------------------------------------


@contextlib.contextmanager
def _read_errors(label: str, raw_name: str) -> Iterator[None]:
    try:
        yield
    except _READ_ERRORS as exc:
        raise ArchiveError(
            f"{label}: member {_quote(raw_name)} is damaged and cannot be read ({exc})"
        ) from None


def _expands_beyond(label: str, raw_name: str, limits: ArchiveLimits) -> ArchiveError:
    limit = _format_size(limits.max_unpacked_bytes)
    return ArchiveError(
        f"{label}: member {_quote(raw_name)} makes the archive expand beyond {limit}"
    )


def _prepare_destination(destination: Path) -> None:
    destination.mkdir(parents=True, exist_ok=True)
    if destination.is_symlink() or any(destination.iterdir()):
        # A caller bug, not the uploader's: cleanup would otherwise delete real data.
        raise ValueError(f"extraction destination must be a new empty folder: {destination}")


def _empty_directory(destination: Path) -> None:
    for child in destination.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _is_regular_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _is_real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _quote(name: str, limit: int = 120) -> str:
    # Names end up in web pages and logs: escape control characters, shorten long ones.
    shown = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in name)
    if len(shown) > limit:
        shown = shown[:limit] + "..."
    return f"'{shown}'"


def _format_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.4g} {unit}"
    return f"{size} bytes"
