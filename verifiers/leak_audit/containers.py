"""Reading whatever a pack ships as the text an agent could get out of it.

Containers are walked, nested within each other (a zip inside a tar, a gzip inside a zip),
in memory and within a byte budget: zip and tar archives; gzip, bzip2, xz, lzma, Zstandard,
LZ4 and zlib streams. Text is read as UTF-8, or UTF-16/32 when a byte-order mark or the
pattern of zero bytes says so. A binary file is read as its printable runs (what ``strings``
shows: the text in an SQLite database or an uncompressed PDF) and the zlib streams inside it
(a PDF's compressed pages). Whatever is left unread is reported, never skipped in silence.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import re
import tarfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from hashlib import sha256
from typing import IO, Any, Protocol

import lz4.frame
import zstandard

from verifiers.leak_audit.text import LATIN_FALLBACK, canonical

MAX_FILE_BYTES = 8 * 1024 * 1024  # read of one file or member
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024  # read of one top-level file, all it contains together
MAX_BINARY_BYTES = 256 * 1024 * 1024  # read of one binary file (streamed in windows)
BINARY_WEIGHT = 8  # a binary byte counts this much less than a text byte against the budget
MAX_ARCHIVE_MEMBERS = 2000  # per archive
MAX_NAMES_PAST_CAP = 10 * MAX_ARCHIVE_MEMBERS  # names still read past the cap
MAX_DEPTH = 4  # containers inside containers
MAX_EMBEDDED_STREAMS = 4096  # zlib headers tried in one binary file (random data: 1 in 16 KB)
MAX_INFLATED_BYTES = 4 * MAX_ARCHIVE_BYTES  # decompressed by all layers of one top-level file
# CPU one top-level file may take: a base, and more for each MB of content it gave (text
# is read at 0.3-0.6 s a MB here): a file that costs time without giving text is a bomb.
BASE_FILE_CPU_SECONDS = 10.0
CPU_SECONDS_PER_MB = 1.5
MIN_RUN_CHARS = 6  # a binary file's printable runs shorter than this are noise
CHUNK_BYTES = 64 * 1024
OVERLAP_CHARS = 2048  # text carried into the next chunk, so passages across the cut are seen
HEAD_BYTES = 512

# What a damaged or hostile container raises while it is read.
UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    RuntimeError,
    NotImplementedError,
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
    tarfile.TarError,
    zstandard.ZstdError,
)
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Printable ASCII and well-formed UTF-8 sequences: random bytes (images, weights) rarely
# hold six in a row, text stored in a binary file (an SQLite page) always does.
_PRINTABLE_RUN = re.compile(
    rb"(?:[\x09\x0a\x0d\x20-\x7e]|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}"
    rb"|[\xf0-\xf4][\x80-\xbf]{3}){%d,}" % MIN_RUN_CHARS
)
_ZLIB_HEADER = re.compile(rb"\x78[\x01\x5e\x9c\xda]")


class FileReader(Protocol):
    """What the walker hands one file's (or member's) content to."""

    def text(self, carried: str, new: str) -> None: ...
    def binary(self, carried: bytes, new: bytes) -> None: ...
    def close(self, complete: bool, digest: str, text_digest: str | None) -> None: ...


class Visitor(Protocol):
    def open(self, path: str) -> FileReader: ...
    def note(self, what: str) -> None: ...


class BudgetSpent(Exception):
    """A top-level file used up what one file may cost (bytes decompressed, CPU time)."""


@dataclass
class _Budget:
    left: int  # bytes of content still to read
    cpu_start: float  # this thread's CPU clock when the file was opened
    cpu_deadline: float  # and when the whole audit's reading stops
    inflated_left: int  # bytes still to decompress, every layer counted

    def charge(self, size: int) -> None:
        """Count decompressed bytes; stop a file whose layers (a bomb of empty gzip members,
        a tar entry skipped by decompressing through it) cost more than any real pack."""
        self.inflated_left -= size
        if self.inflated_left < 0:
            raise BudgetSpent(f"more than {MAX_INFLATED_BYTES} bytes decompressed")
        self.check_time()

    def check_time(self) -> None:
        now = time.thread_time()
        content_mb = (MAX_ARCHIVE_BYTES - self.left) / (1024 * 1024)
        allowed = BASE_FILE_CPU_SECONDS + CPU_SECONDS_PER_MB * content_mb
        if now > self.cpu_start + allowed:
            raise BudgetSpent(f"{allowed:.0f} s of CPU for {content_mb:.0f} MB of content")
        if now > self.cpu_deadline:
            raise BudgetSpent("the audit's time for reading files is spent")


class _Charged(io.RawIOBase):
    """A decompressor's output, counted against the file's budget as it is read."""

    def __init__(self, source: IO[bytes], budget: _Budget) -> None:
        self.source, self.budget = source, budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.source.read(len(buffer))
        self.budget.charge(len(data))
        buffer[: len(data)] = data
        return len(data)


def container_kind(head: bytes) -> str | None:
    """The container a file's first bytes announce, or None for plain content."""
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"):
        return "zip"
    if head[257:262] == b"ustar":
        return "tar"
    magic = {
        b"\x1f\x8b": "gz",
        b"BZh": "bz2",
        b"\xfd7zXZ\x00": "xz",
        b"\x28\xb5\x2f\xfd": "zst",
        b"\x04\x22\x4d\x18": "lz4",
    }
    for prefix, kind in magic.items():
        if head.startswith(prefix):
            return kind
    if _lzma_alone(head):
        return "lzma"
    if len(head) >= 2 and _ZLIB_HEADER.match(head) and ((head[0] << 8) | head[1]) % 31 == 0:
        return "zlib" if _inflates(head) else None
    return None


def _lzma_alone(head: bytes) -> bool:
    """The legacy ``.lzma`` header: properties 0x5D and a dictionary size liblzma writes
    (2^n or 2^n + 2^(n-1)); raw numbers starting with 93 are no such file."""
    if len(head) < 13 or head[0] != 0x5D:
        return False
    size = int.from_bytes(head[1:5], "little")
    if not any(size in (1 << n, (1 << n) | (1 << (n - 1))) for n in range(12, 31)):
        return False
    try:
        lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(head)
    except lzma.LZMAError:
        return False
    return True


def _inflates(head: bytes) -> bool:
    """Whether bytes that start like a zlib stream are one: text can start with "x^" too, and
    read as a stream, text soon breaks the format or ends short of the stream's end."""
    inflater = zlib.decompressobj()
    try:
        inflater.decompress(head)
    except zlib.error:
        return False
    return inflater.eof or len(head) >= HEAD_BYTES


def text_encoding(sample: bytes) -> str | None:
    """The encoding of a file from its first bytes; None for binary content."""
    boms = (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    )
    for bom, encoding in boms:
        if sample.startswith(bom):
            return encoding
    head = sample[:8192]
    if b"\0" not in head:
        # Text has few control bytes, whatever its encoding (bytes that are not UTF-8 are
        # read as Windows-1252); compressed or packed bytes (a PDF's streams) have many.
        controls = len(_CONTROL.findall(head))
        return "utf-8" if controls <= 2 + len(head) // 100 else None
    pairs = max(len(head) // 2, 1)
    even_zeros = head[0::2].count(0) / pairs
    odd_zeros = head[1::2].count(0) / pairs
    if odd_zeros > 0.3 and even_zeros < 0.02:  # ASCII-range text in UTF-16, no mark
        return "utf-16-le"
    if even_zeros > 0.3 and odd_zeros < 0.02:
        return "utf-16-be"
    return None


def printable_runs(data: bytes) -> str:
    """A binary file's text as ``strings`` would show it: runs of printable bytes (of
    MIN_RUN_CHARS or more: shorter ones are noise in images and weights), one per line."""
    runs = _PRINTABLE_RUN.findall(data)
    return b"\n".join(runs).decode("utf-8", errors=LATIN_FALLBACK)


class _Inflating(io.RawIOBase):
    """A zlib stream read as a file (the standard library has no file object for it)."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source, self.inflater, self.pending = source, zlib.decompressobj(), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self.pending and not self.inflater.eof:
            data = self.inflater.unconsumed_tail or self.source.read(CHUNK_BYTES)
            if not data:
                break
            self.pending = self.inflater.decompress(data, CHUNK_BYTES)
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        self.pending = self.pending[size:]
        return size


class _Unzstd(io.RawIOBase):
    """Zstandard frames read as a file, raising on a stream cut short: the library's own
    reader returns nothing then, and a damaged file would count as read and empty."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source, self.pending = source, b""
        self.frame = zstandard.ZstdDecompressor().decompressobj()
        self.started = False  # bytes of the current frame were fed

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self.pending:
            data = self.source.read(CHUNK_BYTES)
            if not data:
                if self.started and not self.frame.eof:
                    raise zstandard.ZstdError("the Zstandard stream ends inside a frame")
                return 0
            self._feed(data)
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        self.pending = self.pending[size:]
        return size

    def _feed(self, data: bytes) -> None:
        while data:
            if self.frame.eof:  # the next frame starts in what the last one left over
                self.frame = zstandard.ZstdDecompressor().decompressobj()
            self.started = True
            self.pending += self.frame.decompress(data)
            data = self.frame.unused_data if self.frame.eof else b""


class _Peeked(io.RawIOBase):
    """A stream whose first bytes were read already to see what it holds."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.head:
            size = min(len(buffer), len(self.head))
            buffer[:size] = self.head[:size]
            self.head = self.head[size:]
            return size
        data = self.rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _decompressed(kind: str, stream: IO[bytes]) -> IO[bytes]:
    if kind == "gz":
        return gzip.GzipFile(fileobj=stream)
    if kind == "bz2":
        return bz2.BZ2File(stream)
    if kind in ("xz", "lzma"):
        return lzma.LZMAFile(stream)
    if kind == "zst":
        return io.BufferedReader(_Unzstd(stream))
    if kind == "lz4":
        return lz4.frame.LZ4FrameFile(stream)
    return io.BufferedReader(_Inflating(stream))


class Walker:
    """Walks one top-level file for a visitor, within MAX_ARCHIVE_BYTES."""

    def __init__(self, visitor: Visitor, cpu_deadline: float) -> None:
        self.visitor, self.cpu_deadline = visitor, cpu_deadline

    def walk(self, path: str, stream: IO[bytes]) -> None:
        budget = _Budget(
            MAX_ARCHIVE_BYTES, time.thread_time(), self.cpu_deadline, MAX_INFLATED_BYTES
        )
        try:
            self._item(path, stream, budget, 0, seekable=True)
        except BudgetSpent as spent:
            self.visitor.note(f"{path} (not read to the end: {spent})")

    def _item(
        self, path: str, stream: IO[bytes], budget: _Budget, depth: int, *, seekable: bool
    ) -> None:
        head = stream.read(HEAD_BYTES)
        kind = container_kind(head)
        if kind is not None and depth >= MAX_DEPTH:
            self.visitor.note(f"{path} (containers nested deeper than {MAX_DEPTH}: not read)")
            return
        if kind is None:
            self._content(path, _Peeked(head, stream), budget, depth)
            return
        if seekable:
            stream.seek(0)
        else:
            stream = io.BufferedReader(_Peeked(head, stream))
        try:
            if kind == "zip":
                self._zip(path, stream, budget, depth, seekable=seekable)
            elif kind == "tar":
                self._tar(path, stream, budget, depth)
            else:
                self._stream(path, kind, stream, budget, depth)
        except UNREADABLE:
            self.visitor.note(f"archive {path} (damaged: not read to the end)")

    def _stream(self, path: str, kind: str, stream: IO[bytes], budget: _Budget, depth: int) -> None:
        inner = io.BufferedReader(_Charged(_decompressed(kind, stream), budget))
        head = inner.read(HEAD_BYTES)
        rest = _Peeked(head, inner)
        if container_kind(head) is not None:
            self._item(path, io.BufferedReader(rest), budget, depth + 1, seekable=False)
        else:
            self._content(f"{path}!(decompressed)", rest, budget, depth)

    def _zip(
        self, path: str, stream: IO[bytes], budget: _Budget, depth: int, *, seekable: bool
    ) -> None:
        if not seekable:  # a zip is read from its end: hold a nested one in memory
            room = max(min(MAX_FILE_BYTES, budget.left), 0)
            data = stream.read(room + 1)
            if len(data) > room:
                self.visitor.note(f"archive {path} (nested zip past {MAX_FILE_BYTES} bytes)")
                return
            budget.left -= len(data)
            stream = io.BytesIO(data)
        with zipfile.ZipFile(stream) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            past = members[MAX_ARCHIVE_MEMBERS : MAX_ARCHIVE_MEMBERS + MAX_NAMES_PAST_CAP]
            self._names(path, [info.filename for info in past])
            for info in members[:MAX_ARCHIVE_MEMBERS]:
                inner = f"{path}!{info.filename}"
                if info.flag_bits & 0x1:
                    self.visitor.note(f"{inner} (encrypted: not read)")
                    self.visitor.open(inner).close(False, "", None)
                    continue
                try:
                    with archive.open(info) as member:
                        charged = io.BufferedReader(_Charged(member, budget))
                        self._item(inner, charged, budget, depth + 1, seekable=False)
                except (NotImplementedError, RuntimeError, zipfile.BadZipFile, *UNREADABLE):
                    self.visitor.note(f"{inner} (compression not supported or damaged: not read)")
                if budget.left <= 0:
                    self.visitor.note(f"archive {path} (read budget spent: not read to the end)")
                    return

    def _tar(self, path: str, stream: IO[bytes], budget: _Budget, depth: int) -> None:
        # Streaming mode: members are read in order, never seeking back.
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            skipped: list[str] = []
            files = entries = 0
            for info in archive:
                # Streaming mode still keeps every header read: drop them as we go.
                archive.members.clear()
                entries += 1
                if entries > MAX_ARCHIVE_MEMBERS + MAX_NAMES_PAST_CAP:
                    self.visitor.note(f"archive {path} (more than {entries - 1} entries)")
                    break
                budget.check_time()
                if not info.isfile():
                    continue
                files += 1
                if files > MAX_ARCHIVE_MEMBERS:
                    skipped.append(info.name)
                    if len(skipped) >= MAX_NAMES_PAST_CAP:
                        break
                    continue
                member = archive.extractfile(info)
                if member is None:
                    continue
                self._item(f"{path}!{info.name}", member, budget, depth + 1, seekable=False)
                if member.read(1):
                    # Going on would decompress the rest of this member only to skip it.
                    self.visitor.note(f"archive {path} (stopped after a member read in part)")
                    return
                if budget.left <= 0:
                    self.visitor.note(f"archive {path} (read budget spent: not read to the end)")
                    return
            self._names(path, skipped)

    def _names(self, path: str, skipped: list[str]) -> None:
        """Members past the cap: their names are still public text; their content is noted."""
        if not skipped:
            return
        shown = len(skipped) if len(skipped) < MAX_NAMES_PAST_CAP else f"{len(skipped)} or more"
        self.visitor.note(f"archive {path} ({shown} members past {MAX_ARCHIVE_MEMBERS})")
        for name in skipped:
            self.visitor.open(f"{path}!{name}").close(False, "", None)

    def _content(self, path: str, stream: IO[bytes], budget: _Budget, depth: int) -> None:
        """Read plain content in overlapping chunks, up to the file and budget caps."""
        limit = max(min(MAX_FILE_BYTES, budget.left), 0)  # read(-1) would read it all
        reader = self.visitor.open(path)
        first = stream.read(min(CHUNK_BYTES, limit))
        encoding = text_encoding(first)
        digest = sha256(first)
        read = len(first)
        if encoding is None:
            read, complete = self._binary_stream(path, stream, first, digest, reader, budget, depth)
            text_digest = None
        else:
            decoder = codecs.getincrementaldecoder(encoding)(errors=LATIN_FALLBACK)
            text = decoder.decode(first)
            small = text
            reader.text("", text)
            budget.check_time()
            carried = text[-OVERLAP_CHARS:]
            while read < limit and (more := stream.read(min(CHUNK_BYTES, limit - read))):
                read += len(more)
                digest.update(more)
                text = decoder.decode(more)
                small = None
                reader.text(carried, text)
                budget.check_time()
                carried = (carried + text)[-OVERLAP_CHARS:]
            complete = not stream.read(1)
            budget.left -= read
            text_digest = _text_digest(small) if complete and small is not None else None
        if not complete:
            self.visitor.note(f"file {path} (read to {read} bytes)")
        reader.close(complete, digest.hexdigest(), text_digest)

    def _binary_stream(
        self,
        path: str,
        stream: IO[bytes],
        first: bytes,
        digest: Any,
        reader: FileReader,
        budget: _Budget,
        depth: int,
    ) -> tuple[int, bool]:
        """Binary content in windows of MAX_FILE_BYTES, up to MAX_BINARY_BYTES: images and
        weights are big and mostly noise, so they count an eighth against the budget."""
        window, read, offset, tail = bytearray(first), len(first), 0, b""
        while True:
            room = min(MAX_BINARY_BYTES, BINARY_WEIGHT * max(budget.left, 0))
            while len(window) < MAX_FILE_BYTES and read < room:
                more = stream.read(min(CHUNK_BYTES, MAX_FILE_BYTES - len(window), room - read))
                if not more:
                    break
                window += more
                read += len(more)
                digest.update(more)
            data = bytes(window)
            budget.left -= -(-len(data) // BINARY_WEIGHT)
            self._binary(path, data, reader, budget, depth, offset, tail)
            offset, tail = offset + len(data), data[-OVERLAP_CHARS:]
            if len(data) < MAX_FILE_BYTES or read >= room:
                break
            window = bytearray()
        return read, not stream.read(1)

    def _binary(
        self,
        path: str,
        data: bytes,
        reader: FileReader,
        budget: _Budget,
        depth: int,
        offset: int = 0,
        tail: bytes = b"",
    ) -> None:
        reader.binary(tail, data)
        carried, start = "", 0
        while start < len(data):
            # Cut at a control byte, so no run is split between two chunks.
            stop = _CONTROL.search(data, start + CHUNK_BYTES, start + 2 * CHUNK_BYTES)
            end = stop.start() if stop else start + CHUNK_BYTES
            runs = printable_runs(data[start:end])
            reader.text(carried, runs)
            carried = (carried + "\n" + runs)[-OVERLAP_CHARS:]
            start = end
            budget.check_time()
        if depth < MAX_DEPTH:
            self._embedded(path, data, budget, depth, offset)

    def _embedded(self, path: str, data: bytes, budget: _Budget, depth: int, offset: int) -> None:
        """The zlib streams inside a binary file (a PDF's pages, a git pack's objects)."""
        view = memoryview(data)
        for count, match in enumerate(_ZLIB_HEADER.finditer(data)):
            if count >= MAX_EMBEDDED_STREAMS:
                self.visitor.note(f"{path} (past {MAX_EMBEDDED_STREAMS} embedded zlib headers)")
                return
            budget.check_time()
            room = min(MAX_FILE_BYTES, budget.left)
            if room <= 0:  # a max_length of 0 would mean no limit at all
                self.visitor.note(f"{path} (read budget spent on embedded streams)")
                return
            inflater = zlib.decompressobj()
            try:
                inflated = inflater.decompress(view[match.start() :], room)
            except zlib.error:
                continue
            if len(inflated) < 16:  # two bytes that only look like a header
                continue
            budget.left -= len(inflated)
            budget.charge(len(inflated))
            inner = f"{path}!@{offset + match.start()}"
            cut = not inflater.eof and (inflater.unconsumed_tail or len(inflated) >= room)
            if cut and text_encoding(inflated[:CHUNK_BYTES]) is not None:
                # A cut stream of pixels or samples hides no text worth a warning.
                self.visitor.note(f"{inner} (embedded stream read in part)")
            self._item(inner, io.BytesIO(inflated), budget, depth + 1, seekable=True)
            if budget.left <= 0:
                self.visitor.note(f"{path} (read budget spent on embedded streams)")
                return


def _text_digest(text: str) -> str:
    """The digest of a small text file with runs of whitespace aside: a copy with other line
    endings or a trailing newline is the same file (one in other case is not)."""
    spaced = " ".join(canonical(text).split())
    return sha256(spaced.encode("utf-8", "surrogatepass")).hexdigest()
