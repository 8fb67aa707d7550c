"""Host side of one live-workspace action: the helper's folder, the sandbox, the frames.

Each action is one fresh sandbox whose command is the trusted helper (``shell.py``). The
host writes the header and the snapshot on the helper's stdin and reads its frames; it
trusts a result only if it carries the header's nonce, and a tree only if its length and
CRC-32 are the ones that result names (see ``shell.py`` for why that suffices).
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import hmac
import json
import marshal
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from verifiers.live.layout import LiveWorkspace, seed_files
from verifiers.sandbox.base import Limits, MiB, Mount, Sandbox, SandboxResult, SandboxSpec
from verifiers.sandbox.docker import ImageWorkdirSpec
from verifiers.sandbox.standins import SANDBOX_PYTHON, image_standins, merge_mounts
from verifiers.sandbox.trusted_files import FILE_MODE, FOLDER_MODE, staging_root

HELPER_DIR = "/opt/securebench/live"
HELPER = f"{HELPER_DIR}/shell.py"
HELPER_FILES = ("shell.py", "helper_io.py", "helper_ops.py")
COMPILED = ("helper_io.py", "helper_ops.py")
SANDBOX_HOME = "/tmp"  # noqa: S108 - the sandbox's own tmpfs: dotfiles never land in the workspace
MAGIC = b"SBF1"
MAX_FRAME = 16 * MiB
RESULT_GRACE = 5.0  # seconds a sandbox may take to end once the helper reported
MAX_RESULT = 8 * MiB
GRACE_SECONDS = 30.0  # copying a workspace in and its tree out, beyond the command's time
COPY_RATE = 50 * MiB  # bytes per second we allow for copying a workspace in or out
OutputCallback = Callable[[str, str], None]


# --- the helper's staged folder --------------------------------------------------------------


def _interpreters() -> tuple[str, ...]:
    """Pythons to precompile for: the bwrap sandbox's, and ours (images of the same minor)."""
    found = [SANDBOX_PYTHON] if os.path.exists(SANDBOX_PYTHON) else []
    if sys.executable and sys.executable not in found:
        found.append(sys.executable)
    return tuple(found)


_digest_lock = threading.Lock()
_digest: list[str] = []


def _folder_digest() -> str:
    with _digest_lock:
        if not _digest:
            hasher = hashlib.sha256(b"securebench-live-helper\0")
            here = Path(__file__).resolve().parent
            for name in HELPER_FILES:
                hasher.update(name.encode() + b"\0" + (here / name).read_bytes())
            for python in _interpreters():
                hasher.update(python.encode() + b"\0")
            _digest.append(hasher.hexdigest())
        return _digest[0]


def helper_folder() -> Path:
    """The read-only folder mounted at ``HELPER_DIR``: the helper's files plus bytecode
    (unchecked-hash .pyc, so a copy's mtime never matters) for the sandbox's Python.

    Content-addressed under the trusted staging root, built whole in a private folder and
    renamed into place, rebuilt if a /tmp cleaner removed it (like ``trusted_files``)."""
    holder = staging_root() / _folder_digest()
    target = holder / "live"
    if not target.is_dir():
        _build_helper(holder)
    return target


def _build_helper(holder: Path) -> None:
    building = Path(tempfile.mkdtemp(prefix=".staging-", dir=holder.parent))
    try:
        folder = building / "live"
        folder.mkdir()
        here = Path(__file__).resolve().parent
        for name in HELPER_FILES:
            shutil.copyfile(here / name, folder / name)
        sources = [str(folder / name) for name in COMPILED]
        compile_code = (
            "import py_compile, sys\n"
            "for src in sys.argv[1:]:\n"
            "    py_compile.compile(src, doraise=True,"
            " invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
        )
        for python in _interpreters():
            # Best effort: without bytecode the helper still runs, compiling on each start.
            subprocess.run(  # noqa: S603 - our own interpreters and files
                [python, "-I", "-c", compile_code, *sources],
                capture_output=True,
                timeout=60,
                check=False,
            )
        for path in sorted(folder.rglob("*"), reverse=True):
            path.chmod(FOLDER_MODE if path.is_dir() else FILE_MODE)
        folder.chmod(FOLDER_MODE)
        building.chmod(FOLDER_MODE)
        try:
            building.rename(holder)
        except OSError:
            if not (holder / "live").is_dir():
                raise
    finally:
        if building.exists():
            for path in [building, *building.rglob("*")]:
                if path.is_dir():
                    path.chmod(0o700)
            shutil.rmtree(building, ignore_errors=True)


# --- the sandbox spec -------------------------------------------------------------------


def work_bytes(ws: LiveWorkspace, files_cap: int) -> int:
    """The work tmpfs: the byte limit, page rounding of every allowed file, and headroom,
    so that crossing the limit is seen (and refused) rather than silently hit."""
    return ws.limits.workspace_bytes + 4096 * files_cap + 16 * MiB


def files_cap(ws: LiveWorkspace) -> int:
    return seed_files(ws) + ws.limits.workspace_files


def helper_spec(
    ws: LiveWorkspace,
    backend: str,
    *,
    wall: float,
    files: int,
    tmp_bytes: int | None = None,
    from_image: bool = False,
) -> tuple[SandboxSpec, tuple[str, ...]]:
    """The sandbox of one helper run, and the notes saying which host tools stood in for
    the task's image (bwrap) for the action's outcome."""
    standins = image_standins(backend, ws.image)
    mounts = merge_mounts(
        (Mount(helper_folder(), HELPER_DIR),), ws.read_only_mounts, standins.mounts
    )
    python = SANDBOX_PYTHON if backend == "bwrap" else "python3"
    work = work_bytes(ws, files)
    limits = Limits(
        wall_seconds=wall,
        cpu_seconds=int(wall * 2) + 30,  # a backstop only: the wall clock decides
        memory_bytes=ws.limits.memory_bytes,
        pids=ws.limits.pids,
        file_size_bytes=work,
        tmp_bytes=tmp_bytes or min(ws.limits.workspace_bytes, 256 * MiB) + 16 * MiB,
        work_bytes=work,
        open_files=1024,
        stack_bytes=8 * MiB,  # glibc reserves this per thread against RLIMIT_AS
        output_bytes=64 * 1024,  # the helper's own stderr; the frames are read directly
    )
    spec_type = ImageWorkdirSpec if from_image else SandboxSpec
    spec = spec_type(
        command=[python, "-I", "-S", HELPER],
        image=ws.image,
        workdir=ws.workdir,
        mounts=mounts,
        env={**standins.env, "HOME": SANDBOX_HOME},
        limits=limits,
    )
    return spec, standins.notes


def copy_seconds(*paths: Path) -> float:
    size = sum(p.stat().st_size for p in paths if p.exists())
    return GRACE_SECONDS + size / COPY_RATE


# --- one run: header and tars in, frames out --------------------------------------------------


@dataclass
class StreamText:
    """What the agent's command printed on one stream: head, tail, and how much in between."""

    cap: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    dropped: int = 0  # head bytes past the cap (injected frames), never shown

    def add_head(self, data: bytes) -> bytes:
        room = max(self.cap // 2 - len(self.head), 0)
        self.head += data[:room]
        self.dropped += max(len(data) - room, 0)
        return data[:room]

    def add_tail(self, data: bytes) -> bytes:
        room = max(self.cap - self.cap // 2 - len(self.tail), 0)
        self.tail += data[:room]
        return data[:room]

    def text(self, omitted: int) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if omitted > 0:
            return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}"
        return head + tail


@dataclass
class HelperReport:
    result: dict[str, Any] | None  # the helper's result (nonce checked), None if none
    problem: str | None  # why there is no trustworthy result or tree
    sandbox: SandboxResult
    stdout: StreamText
    stderr: StreamText
    tree: Path | None = None  # the received tree (length and CRC verified)
    tree_over: bool = False  # the tree stream passed the byte cap on its way in
    patch: bytearray = field(default_factory=bytearray)


class _Frames:
    """Reads the helper's frames and sorts them; anything malformed stops the reading."""

    def __init__(
        self,
        report: HelperReport,
        nonce: str,
        patch_cap: int,
        tree_spool: Path | None,
        tree_cap: int,
        on_output: OutputCallback | None,
    ) -> None:
        self.report = report
        self.nonce = nonce
        self.patch_cap = patch_cap
        self.tree_spool = tree_spool
        self.tree_cap = tree_cap
        self.on_output = on_output
        self.tree_file: IO[bytes] | None = None
        self.tree_len = 0
        self.tree_crc = 0
        self.decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in "12"}

    def read(self, pipe: BinaryIO, kill: Callable[[], None]) -> None:
        try:
            while True:
                head = pipe.read(9)
                if not head:
                    return
                if len(head) < 9 or head[:4] != MAGIC:
                    self.fail("the helper's channel held something other than its frames")
                    kill()
                    return
                kind, size = head[4:5], int.from_bytes(head[5:9], "big")
                if size > MAX_FRAME:
                    self.fail("a frame on the helper's channel was too large")
                    kill()
                    return
                payload = pipe.read(size)
                if len(payload) < size:
                    self.fail("the helper's channel ended inside a frame")
                    return
                if not self.take(kind, payload, kill):
                    kill()  # a spoiled channel: nothing the sandbox does now can count
                    return
                if self.report.result is not None:
                    # The helper's result is its last frame: whatever still holds the pipe
                    # open (code the candidate planted in the sandbox's pid 1) is not waited on.
                    return
        finally:
            if self.tree_file is not None:
                self.tree_file.close()

    def fail(self, problem: str) -> None:
        self.report.problem = self.report.problem or problem

    def take(self, kind: bytes, payload: bytes, kill: Callable[[], None]) -> bool:
        report = self.report
        if report.result is not None:
            self.fail("frames followed the helper's result (forged)")
            return False
        if kind in (b"1", b"2"):
            stream = report.stdout if kind == b"1" else report.stderr
            self.emit(kind, stream.add_head(payload))
        elif kind in (b"3", b"4"):
            stream = report.stdout if kind == b"3" else report.stderr
            stream.add_tail(payload)
        elif kind == b"T":
            self.take_tree(payload, kill)
        elif kind == b"P":
            if len(report.patch) + len(payload) > self.patch_cap:
                # Only a diff sends a patch, never larger than twice the workspace: anything
                # else is frames the candidate forged, which would grow our memory unbounded.
                self.fail("a patch arrived that the action did not make (forged)")
                return False
            report.patch += payload
        elif kind == b"R":
            self.take_result(payload)
        else:
            self.fail(f"unknown frame type {kind!r} on the helper's channel")
            return False
        return True

    def emit(self, kind: bytes, data: bytes) -> None:
        if self.on_output is not None and data:
            name = "stdout" if kind == b"1" else "stderr"
            chunk = self.decoders[kind.decode()].decode(data)
            if chunk:
                self.on_output(name, chunk)

    def take_tree(self, payload: bytes, kill: Callable[[], None]) -> None:
        if self.tree_spool is None:
            self.fail("a tree arrived for an action that changes nothing")
            return
        self.tree_len += len(payload)
        self.tree_crc = zlib.crc32(payload, self.tree_crc)
        if self.tree_len > self.tree_cap:
            if not self.report.tree_over:
                self.report.tree_over = True
                kill()  # no point in copying the rest: the tree will not be kept
            return
        if self.tree_file is None:
            self.tree_file = open(self.tree_spool, "wb")  # noqa: SIM115 - closed in read()
        self.tree_file.write(payload)

    def take_result(self, payload: bytes) -> None:
        if len(payload) > MAX_RESULT:
            self.fail("the helper's result was too large")
            return
        try:
            result = json.loads(payload)
        except ValueError:
            self.fail("the helper's result was unreadable")
            return
        if not isinstance(result, dict) or not hmac.compare_digest(
            str(result.get("nonce", "")), self.nonce
        ):
            self.fail("a result without the action's nonce arrived (forged)")
            return
        self.report.result = result

    def finish_tree(self) -> None:
        report = self.report
        tree = (report.result or {}).get("tree")
        if self.tree_len == 0 and not tree:
            return
        if report.tree_over:
            return
        ok = (
            isinstance(tree, dict)
            and tree.get("bytes") == self.tree_len
            and tree.get("crc") == self.tree_crc
            and report.problem is None
        )
        if ok:
            report.tree = self.tree_spool
        else:
            self.fail("the step's files arrived damaged or with frames the helper did not send")


def _feed(stdin: BinaryIO, header: bytes, files: list[BinaryIO]) -> None:
    """Header and tars to the helper; a helper that stopped reading only ends the stream."""
    try:
        stdin.write(len(header).to_bytes(8, "big") + header)
        for handle in files:
            while chunk := handle.read(MiB):
                stdin.write(chunk)
        stdin.flush()
    except (OSError, ValueError):
        pass
    finally:
        for handle in files:
            handle.close()
        with contextlib.suppress(OSError, ValueError):
            stdin.close()


def run_helper(
    sandbox: Sandbox,
    spec: SandboxSpec,
    header: dict[str, Any],
    inputs: list[Path],
    *,
    tree_spool: Path | None = None,
    tree_cap: int = 0,
    on_output: OutputCallback | None = None,
    cancel: threading.Event | None = None,
) -> HelperReport:
    """Run the helper once in a fresh sandbox and sort what it sent back."""
    files: list[BinaryIO] = [open(path, "rb") for path in inputs]  # noqa: SIM115 - _feed closes
    header = {**header, "tars": [os.fstat(f.fileno()).st_size for f in files]}
    encoded = marshal.dumps(header, 2)
    output_cap = int(header["limits"]["output"])
    try:
        process = sandbox.start(spec)
    except BaseException:
        for handle in files:
            handle.close()
        raise
    report = HelperReport(None, None, None, StreamText(output_cap), StreamText(output_cap))  # type: ignore[arg-type]
    patch_cap = 2 * int(header["limits"]["bytes"]) + MiB if header.get("op") == "diff" else 0
    frames = _Frames(report, str(header["nonce"]), patch_cap, tree_spool, tree_cap, on_output)
    writer = threading.Thread(target=_feed, args=(process.stdin, encoded, files), daemon=True)
    writer.start()
    stop = threading.Event()
    if cancel is not None:
        threading.Thread(
            target=_cancel_watch, args=(cancel, stop, process.kill), daemon=True
        ).start()
    try:
        frames.read(process.stdout, process.kill)
    except BaseException:
        process.kill()
        raise
    finally:
        stop.set()
        # After its result the helper has killed everything else and exits: a sandbox still
        # running then is held by something the candidate planted (see _Frames.read).
        report.sandbox = process.finish(RESULT_GRACE if report.result is not None else None)
        writer.join(5)
    if report.result is None and report.problem is None:
        report.problem = "the sandbox ended without the helper's report"
    frames.finish_tree()
    return report


def _cancel_watch(cancel: threading.Event, stop: threading.Event, kill: Callable[[], None]) -> None:
    while not stop.is_set():
        if cancel.wait(0.1):
            kill()
            return
