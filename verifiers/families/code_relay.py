"""Host-side relay between the code_completion test sandbox (T) and worker sandbox (W).

Trusted code, runs in the verifier process. It only moves bounded lines between two pipes:
each request T writes is passed to W, W's one reply is checked (size, JSON object, matching
id) and passed back to T. T's ``result`` frame ends the session. When W is broken (exited,
killed, oversized or forged reply) T gets a host-made ``gone`` reply instead, so the pending
call raises in the tests and no candidate behaviour can turn into a pass.

Everything is non-blocking with one overall deadline: a candidate that never answers, never
reads, or floods its pipe cannot stall the verifier.
"""

from __future__ import annotations

import os
import select
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from verifiers.families.code_codec import CodecError, dumps_frame, loads_frame
from verifiers.sandbox.base import SandboxProcess

MAX_FRAME = 1024 * 1024  # per line, both directions (security.md §7: 1 MiB output cap)
_CHUNK = 65536


class DeadlinePassed(Exception):
    pass


class FrameTooLarge(Exception):
    pass


class LineReader:
    """Reads newline-terminated frames from a pipe without ever blocking past a deadline."""

    def __init__(self, stream: BinaryIO) -> None:
        # Raw fd reads: the stream's own buffer is never used, so nothing is read twice.
        self._fd = stream.fileno()
        os.set_blocking(self._fd, False)
        self._buffer = bytearray()
        self._eof = False

    def read_line(self, deadline: float, limit: int = MAX_FRAME) -> bytes | None:
        """One line without its newline; None at end of stream (a partial line is dropped)."""
        while True:
            end = self._buffer.find(b"\n")
            if end > limit or (end < 0 and len(self._buffer) > limit):
                raise FrameTooLarge
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if self._eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlinePassed
            readable, _, _ = select.select([self._fd], [], [], remaining)
            if not readable:
                continue
            try:
                chunk = os.read(self._fd, _CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


def write_all(stream: BinaryIO, data: bytes, deadline: float) -> None:
    """Write everything or raise (DeadlinePassed; OSError such as BrokenPipeError)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # e.g. Docker's attach socket behind a BufferedWriter
        _write_in_thread(stream, data, deadline)
        return
    os.set_blocking(fd, False)
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlinePassed
        _, writable, _ = select.select([], [fd], [], remaining)
        if not writable:
            continue
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue


def _write_in_thread(stream: BinaryIO, data: bytes, deadline: float) -> None:
    """A blocking write bounded by the deadline: a peer that never reads cannot stall us
    (the stuck thread ends when the sandbox is killed and its stream closes)."""
    failure: list[BaseException] = []

    def write() -> None:
        try:
            stream.write(data)
            stream.flush()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            failure.append(exc)

    thread = threading.Thread(target=write, name="code-relay-write", daemon=True)
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0.0))
    if thread.is_alive():
        raise DeadlinePassed
    if failure:
        error = failure[0]
        raise error if isinstance(error, OSError) else OSError(str(error))


@dataclass
class RelayOutcome:
    result: dict[str, Any] | None = None  # T's final frame, if it sent one
    timed_out: bool = False  # the overall deadline passed
    worker_gone: str | None = None  # why W stopped answering
    worker_oversize: bool = False  # W wrote a line over MAX_FRAME
    tamper: str | None = None  # W wrote something that is not a reply to the request
    harness_problem: str | None = None  # T misbehaved: our fault, not the candidate's
    worker_error_types: list[str] = field(default_factory=list)  # exceptions W reported
    requests: int = 0


class Relay:
    def __init__(self, tests: SandboxProcess, worker: SandboxProcess, deadline: float) -> None:
        self.tests, self.worker, self.deadline = tests, worker, deadline
        self.tests_reader = LineReader(tests.stdout)
        self.worker_reader = LineReader(worker.stdout)
        self.outcome = RelayOutcome()

    def run(self) -> RelayOutcome:
        try:
            self._loop()
        except DeadlinePassed:
            self.outcome.timed_out = True
        return self.outcome

    def _loop(self) -> None:
        outcome = self.outcome
        while True:
            try:
                line = self.tests_reader.read_line(self.deadline)
            except FrameTooLarge:
                outcome.harness_problem = "test harness wrote an oversized frame"
                return
            if line is None:
                outcome.harness_problem = "test harness ended without a result"
                return
            try:
                frame = loads_frame(line)
            except CodecError:
                outcome.harness_problem = "test harness wrote a malformed frame"
                return
            if frame.get("type") == "result":
                outcome.result = frame
                return
            if frame.get("type") != "request":
                outcome.harness_problem = "test harness wrote an unknown frame"
                return
            outcome.requests += 1
            reply = self._forward(line, frame.get("id"))
            try:
                write_all(self.tests.stdin, reply, self.deadline)
            except OSError:
                outcome.harness_problem = "test harness stopped reading"
                return

    def _gone(self, request_id: Any, why: str) -> bytes:
        if self.outcome.worker_gone is None:
            self.outcome.worker_gone = why
            self.worker.kill()  # a half-broken worker gets no second chance
        message = f"candidate process unavailable: {self.outcome.worker_gone}"
        return dumps_frame({"id": request_id, "ok": False, "gone": True, "message": message})

    def _forward(self, line: bytes, request_id: Any) -> bytes:
        if self.outcome.worker_gone is not None:
            return self._gone(request_id, self.outcome.worker_gone)
        try:
            write_all(self.worker.stdin, line + b"\n", self.deadline)
        except OSError:
            return self._gone(request_id, "it exited")
        try:
            answer = self.worker_reader.read_line(self.deadline)
        except FrameTooLarge:
            self.outcome.worker_oversize = True
            return self._gone(request_id, f"it wrote a frame over {MAX_FRAME} bytes")
        if answer is None:
            return self._gone(request_id, "it exited")
        try:
            reply = loads_frame(answer)
        except CodecError:
            self.outcome.tamper = "the candidate wrote a malformed protocol frame"
            return self._gone(request_id, "it broke the protocol")
        if reply.get("id") != request_id or reply.get("gone") or "ok" not in reply:
            # Only code inside W can produce this: the worker always echoes the id.
            self.outcome.tamper = "the candidate wrote a frame that answers no request"
            return self._gone(request_id, "it broke the protocol")
        error = reply.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            self.outcome.worker_error_types.append(error["type"][:100])
        return answer + b"\n"


def relay(tests: SandboxProcess, worker: SandboxProcess, deadline: float) -> RelayOutcome:
    return Relay(tests, worker, deadline).run()
