"""Capped capture of a sandbox's output streams, shared by both backends.

Each stream keeps its head and tail up to ``limits.output_bytes``; far past it
(``OUTPUT_KILL_FACTOR`` times) the backend kills the run as ``output_exceeded``.
"""

from __future__ import annotations

import collections
import re
import threading
from typing import BinaryIO

PATH_VALUE = "/usr/local/bin:/usr/bin:/bin"
KILL_GRACE = 2.0  # seconds we allow teardown after a kill before calling it stuck
OUTPUT_KILL_FACTOR = 8  # past this many times limits.output_bytes the run is killed
# Stderr markers of an allocation refused by RLIMIT_AS (an allocation failure seen from inside).
ALLOC_FAILURE = re.compile(
    rb"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory", re.IGNORECASE
)


class OutputCapture:
    """Keeps the head and tail of a stream up to ``cap`` bytes; counts everything."""

    def __init__(self, cap: int) -> None:
        self.cap = max(cap, 2)
        self.total = 0
        self._head = bytearray()
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_len = 0
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> int:
        """Add a chunk; returns the running total (callers kill far past the cap)."""
        with self._lock:
            self.total += len(data)
            half = self.cap // 2
            room = half - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if data:
                self._tail.append(data)
                self._tail_len += len(data)
                # Trim whole chunks, then the front of the first, to keep cap - half bytes.
                keep = self.cap - half
                while self._tail_len - len(self._tail[0]) >= keep:
                    self._tail_len -= len(self._tail.popleft())
                if self._tail_len > keep:
                    cut = self._tail_len - keep
                    self._tail[0] = self._tail[0][cut:]
                    self._tail_len -= cut
            return self.total

    def value(self) -> bytes:
        with self._lock:
            tail = b"".join(self._tail)
            omitted = self.total - len(self._head) - len(tail)
            if omitted <= 0:
                return bytes(self._head) + tail
            marker = f"\n[... {omitted} bytes omitted by the sandbox ...]\n".encode()
            return bytes(self._head) + marker + tail

    @property
    def truncated(self) -> bool:
        return self.total > self.cap


def looks_like_alloc_failure(exit_code: int | None, stderr: bytes) -> bool:
    """A failed run whose stderr tail names an allocation failure (RLIMIT_AS/ENOMEM)."""
    return exit_code not in (None, 0) and bool(ALLOC_FAILURE.search(stderr[-4096:]))


def drain(fd: BinaryIO, capture: OutputCapture, on_flood: threading.Event) -> None:
    """Read a pipe to EOF; signal a kill once it goes far past the cap."""
    limit = capture.cap * OUTPUT_KILL_FACTOR
    while True:
        chunk = fd.read1(65536) if hasattr(fd, "read1") else fd.read(65536)
        if not chunk:
            break
        if capture.feed(chunk) > limit:
            on_flood.set()
    fd.close()
