"""Plumbing of the Docker backend: ``docker exec`` with its attach socket, the trusted shell
scripts run inside the container, the copy-in tar and the cgroup's OOM counter."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import stat
import struct
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

from verifiers.sandbox.docker_engine import docker_module

SANDBOX_UID = 65534
RUN_THEN_KILL = '"$@"; rc=$?; kill -9 -1 2>/dev/null; exit $rc'
# The copy-in folded into the command's own exec (one engine round trip instead of two):
# stdin starts with a nonce line, then exactly $1 bytes of tar for the work dir $2, then the
# command's own input. `head -c` reads no further than it is told, so the rest stays for the
# command. A failed extraction prints the nonce (never known inside the sandbox before this
# point, and gone from memory with the `exec`) and exits 125: only that pair is ours.
COPY_IN_EXIT = 125
COPY_IN_THEN_RUN = (
    "IFS= read -r n || exit 125; "
    'if [ "$1" != 0 ] && ! e=$(head -c "$1" | tar -x -f - -C "$2" 2>&1); then '
    'printf "%s %s\\n" "$n" "$e" >&2; exit 125; fi; '
    "n=; shift 2; exec sh -c '" + RUN_THEN_KILL + '\' sh "$@"'
)
# `kill -9 -1` as 65534 until no process of 65534 but this shell is left. `kill -0 -1` cannot
# be the test: kill(-1) also returns 0 when the only others are processes it may not signal.
# Prints each argument path that has a symlink anywhere along it (parents or the leaf).
LINKED_PATHS = r"""
for p do
  cur=
  rest=$p
  while [ -n "$rest" ]; do
    part=${rest%%/*}
    [ "$part" = "$rest" ] && rest= || rest=${rest#*/}
    cur=${cur:+$cur/}$part
    if [ -L "$cur" ]; then echo "$p"; break; fi
  done
done
"""

KILL_ALL = r"""
me=$$; n=0
while :; do
  kill -9 -1 2>/dev/null; left=
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" = "$me" ] && continue
    u=$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' "$d/status" 2>/dev/null)
    [ "$u" = 65534 ] && left=1
  done
  [ -z "$left" ] && exit 0
  n=$((n+1)); [ "$n" -gt 500 ] && exit 1
  sleep 0.01
done
"""


def work_tar(root: Path, notes: list[str]) -> tempfile.SpooledTemporaryFile[bytes]:
    """A tar of regular files and folders under root (links skipped), owned by 65534."""
    spool: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(16 << 20)  # noqa: SIM115
    with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                info = os.lstat(full)
                member = tarfile.TarInfo(rel)
                member.uid = member.gid = SANDBOX_UID
                member.mode = stat.S_IMODE(info.st_mode) & 0o755 | 0o600
                member.mtime = int(info.st_mtime)
                if stat.S_ISDIR(info.st_mode):
                    member.type = tarfile.DIRTYPE
                    member.mode |= 0o700
                    tar.addfile(member)
                elif stat.S_ISREG(info.st_mode):
                    fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    with os.fdopen(fd, "rb") as fh:
                        member.size = os.fstat(fh.fileno()).st_size
                        tar.addfile(member, fh)
                else:
                    notes.append(f"work_files: skipped {rel} (not a regular file or folder)")
    spool.seek(0)
    return spool


class DockerExec:
    """One ``docker exec`` with its attach socket; frames are demultiplexed by ``pump``."""

    def __init__(self, api: Any, container_id: str, cmd: list[str], **kwargs: Any) -> None:
        self.api = api
        self.id = api.exec_create(
            container_id, cmd, stdin=True, stdout=True, stderr=True, tty=False, **kwargs
        )["Id"]
        handle = api.exec_start(self.id, socket=True)
        self._handle = handle
        self.sock: socket.socket = getattr(handle, "_sock", handle)
        # The client's timeout would end a read on a command that is silent for that long
        # (a test suite thinking, a candidate spinning) as if the command had ended, losing
        # its output and exit status. The wall limit is our watchdog's; it kills the
        # container, which closes this stream.
        self.sock.settimeout(None)

    def send(self, data: bytes | BinaryIO, *, close: bool = True) -> bool:
        """Write ``data`` to the process's stdin (then EOF, unless ``close`` is false);
        False when the process stopped reading, like a broken pipe."""
        try:
            if isinstance(data, bytes | bytearray):
                self.sock.sendall(data)
            else:
                while chunk := data.read(1 << 20):
                    self.sock.sendall(chunk)
        except OSError:
            self.close_stdin()
            return False
        if close:
            self.close_stdin()
        return True

    def close_stdin(self) -> None:
        # Half-close: the daemon then closes the process's stdin.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def abandon(self) -> None:
        """End the stream from our side: the pump reads EOF now. For a command whose
        container stopped under it, which some runtimes never close the stream for."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def pump(self, on_stdout: Any, on_stderr: Any) -> None:
        """Read frames until EOF: ``[stream, 0, 0, 0, size:u32be] payload``."""
        reader = self.sock.makefile("rb")
        try:
            while header := reader.read(8):
                if len(header) < 8:
                    break
                kind, size = header[0], struct.unpack(">I", header[4:])[0]
                payload = reader.read(size)
                (on_stderr if kind == 2 else on_stdout)(payload)
        except OSError:
            pass
        finally:
            reader.close()

    def exit_code(self, timeout: float = 5.0) -> int | None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                info = self.api.exec_inspect(self.id)
            except docker_module().errors.NotFound:
                return None  # its container stopped under it: the engine forgot the exec
            if not info.get("Running") or time.monotonic() > deadline:
                return info.get("ExitCode")
            time.sleep(0.01)

    def close(self) -> None:
        for thing in (self.sock, self._handle):
            with contextlib.suppress(OSError):
                thing.close()


class SocketWriter(io.RawIOBase):
    """stdin of a started sandbox: write/flush like a pipe, close = EOF for the process."""

    def __init__(self, ex: DockerExec) -> None:
        self._ex = ex

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._ex.sock.sendall(bytes(data))
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._ex.close_stdin()
        super().close()


def oom_counter_path(container_id: str) -> str | None:
    """The file holding the container cgroup's oom_kill counter (v1 or v2, cgroupfs or
    systemd driver), or None where this host cannot read it (a remote engine). Only
    meaningful while the container runs: the engine deletes the cgroup once it stops."""
    candidates = (
        f"/sys/fs/cgroup/memory/docker/{container_id}/memory.oom_control",
        f"/sys/fs/cgroup/memory/system.slice/docker-{container_id}.scope/memory.oom_control",
        f"/sys/fs/cgroup/docker/{container_id}/memory.events",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.events",
    )
    return next((path for path in candidates if read_oom_kills(path) is not None), None)


def pids_events_path(container_id: str) -> str | None:
    """The container cgroup's pids.events (v1 or v2, cgroupfs or systemd driver), whose
    ``max`` counts the forks refused at the pids limit; None where this host cannot read it."""
    candidates = (
        f"/sys/fs/cgroup/pids/docker/{container_id}/pids.events",
        f"/sys/fs/cgroup/pids/system.slice/docker-{container_id}.scope/pids.events",
        f"/sys/fs/cgroup/docker/{container_id}/pids.events",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/pids.events",
    )
    return next((path for path in candidates if read_counter(path, "max") is not None), None)


def read_oom_kills(path: str) -> int | None:
    """The oom_kill counter in a cgroup file; None once the cgroup is gone."""
    return read_counter(path, "oom_kill")


def read_counter_value(path: str) -> int | None:
    """A cgroup file holding one number (pids.current); None once the cgroup is gone."""
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def read_counter(path: str, name: str) -> int | None:
    """A ``name value`` line of a cgroup file; None once the cgroup is gone."""
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == name:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def safe_relpath(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)
