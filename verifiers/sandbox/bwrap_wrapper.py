"""The bubblewrap backend's trusted wrapper and both ends of its two pipes.

The wrapper runs inside the sandbox (the host's Python from the read-only ``/usr``, ``-I -S``):
it writes the work files streamed on one pipe into the size-capped tmpfs, runs the command,
SIGKILLs every other process of the pid namespace, and only then streams the ``collect`` paths
back on the second pipe (see ``verifiers.sandbox.bwrap`` for why).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

# Runs inside the sandbox as ``python3 -I -S -c WRAPPER CONFIG``. Kept small and stdlib-only.
WRAPPER = r"""
import ctypes, json, os, signal, stat, sys, time
cfg = json.loads(sys.argv[1])
try:  # PR_SET_DUMPABLE=0: same-uid processes cannot ptrace us or open /proc/<us>/fd/*
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
except Exception:
    pass
out = os.fdopen(cfg["out_fd"], "wb")
def record(obj, data=b""):
    out.write(json.dumps(obj).encode() + b"\n" + data)
    out.flush()
def fail(phase, msg, code):
    sys.stderr.write("securebench-sandbox: %s: %s\n" % (phase, msg))
    sys.stderr.flush()
    record({"error": phase, "msg": msg})
    os._exit(code)
def safe_parts(rel):
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError("bad path %r" % rel)
    return parts
work = os.open(cfg["workdir"], os.O_RDONLY | os.O_DIRECTORY)
if cfg["in_fd"] >= 0:
    src = os.fdopen(cfg["in_fd"], "rb")
    try:
        while True:
            line = src.readline()
            if not line:
                break
            item = json.loads(line)
            parts = safe_parts(item["p"])
            if item["t"] == "d":
                os.mkdir(item["p"], item["m"] & 0o755 | 0o700, dir_fd=work)
                continue
            fd = os.open(item["p"], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         item["m"] & 0o755 | 0o600, dir_fd=work)
            left = item["s"]
            while left:
                chunk = src.read(min(left, 1 << 20))
                if not chunk:
                    raise EOFError("truncated copy-in stream")
                os.write(fd, chunk)
                left -= len(chunk)
            os.close(fd)
    except Exception as exc:
        fail("copy-in", repr(exc), 125)
    src.close()
for name in os.listdir("/proc/self/fd"):  # like close_fds: the command sees fds 0-2 only
    if int(name) > 2:
        try:
            os.set_inheritable(int(name), False)
        except OSError:
            pass
try:  # posix_spawn, not subprocess: far fewer imports; bwrap's --chdir set the cwd
    child = os.posix_spawnp(cfg["cmd"][0], cfg["cmd"], os.environ)
except FileNotFoundError as exc:
    fail("exec", "command not found: %s" % exc.filename, 127)
except OSError as exc:
    fail("exec", "cannot run command: %s" % exc, 126)
status = os.waitpid(child, 0)[1]
code = os.waitstatus_to_exitcode(status)
code = code if code >= 0 else 128 - code
record({"exit": code})
me = os.getpid()
for _ in range(2000):  # SIGKILL everything else in the pid namespace (bwrap's pid 1 reaps)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        break
    time.sleep(0.002)
else:
    fail("teardown", "processes survived SIGKILL", 125)
cap = cfg["cap"]
for rel in cfg["collect"]:
    try:
        parts = safe_parts(rel)
        fd = os.dup(work)
        for part in parts[:-1]:
            # O_NOFOLLOW|O_DIRECTORY on a symlink gives ENOTDIR, not ELOOP: check first so a
            # linked folder is refused (tampering), not reported missing.
            if stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode):
                raise ValueError("symlink in path")
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        os.close(fd)
    except ValueError as exc:
        record({"p": rel, "st": "refused", "why": str(exc)})
        continue
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symlink where a file or folder was expected
            record({"p": rel, "st": "refused", "why": "symlink"})
        else:
            record({"p": rel, "st": "missing", "why": os.strerror(exc.errno or 0)})
        continue
    if not stat.S_ISREG(os.fstat(leaf).st_mode):
        os.close(leaf)
        record({"p": rel, "st": "refused", "why": "not a regular file"})
        continue
    data = b""
    while len(data) < cap:
        chunk = os.read(leaf, min(cap - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    os.close(leaf)
    record({"p": rel, "st": "ok", "s": len(data)}, data)
record({"end": True})
out.close()
os._exit(code)
"""


def iter_work_files(root: Path, notes: list[str]) -> list[tuple[str, str, int]]:
    """(relative path, "d"|"f", mode) of regular files and folders; links are skipped."""
    items: list[tuple[str, str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames) + sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            info = os.lstat(full)
            if stat.S_ISDIR(info.st_mode):
                items.append((rel, "d", stat.S_IMODE(info.st_mode)))
            elif stat.S_ISREG(info.st_mode):
                items.append((rel, "f", stat.S_IMODE(info.st_mode)))
            else:
                notes.append(f"work_files: skipped {rel} (not a regular file or folder)")
        dirnames.sort()
    return items


def write_work_files(fd: int, root: Path, items: list[tuple[str, str, int]]) -> None:
    """Stream work files to the wrapper; a dead reader (EPIPE) just ends the stream."""
    try:
        with os.fdopen(fd, "wb") as out:
            for rel, kind, mode in items:
                if kind == "d":
                    out.write(json.dumps({"t": "d", "p": rel, "m": mode}).encode() + b"\n")
                    continue
                src = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                with os.fdopen(src, "rb") as fh:
                    size = os.fstat(fh.fileno()).st_size
                    out.write(json.dumps({"t": "f", "p": rel, "m": mode, "s": size}).encode())
                    out.write(b"\n")
                    left = size
                    while left:  # exactly the announced size, even if the file changes
                        chunk = fh.read(min(left, 1 << 20)) or b"\0" * min(left, 1 << 20)
                        out.write(chunk)
                        left -= len(chunk)
    except (BrokenPipeError, OSError):
        pass


def read_all(fd: int, cap: int, sink: bytearray) -> None:
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read1(65536):
            if len(sink) < cap:
                sink += chunk[: cap - len(sink)]


def parse_channel(data: bytes) -> tuple[dict, list[dict], list[bytes]]:
    """Split the wrapper's records; returns (status, collect records, payloads)."""
    status: dict = {}
    records: list[dict] = []
    payloads: list[bytes] = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        try:
            rec = json.loads(data[pos:nl])
        except ValueError:
            break
        pos = nl + 1
        if not isinstance(rec, dict):
            break
        if "exit" in rec or "error" in rec or "end" in rec:
            status.update(rec)
            continue
        size = rec.get("s", 0) if rec.get("st") == "ok" else 0
        if not isinstance(size, int) or size < 0 or pos + size > len(data):
            break
        records.append(rec)
        payloads.append(data[pos : pos + size])
        pos += size
    return status, records, payloads
