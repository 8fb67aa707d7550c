"""Slot uids and process scans of the bubblewrap backend.

A root supervisor runs each sandbox under an unprivileged uid of its own from a small pool,
held with an ``flock`` for the whole run; leftovers of that uid are killed before the slot is
used and verified gone afterwards (see ``verifiers.sandbox.bwrap``). The process scans here
(by uid, by process tree, by pid namespace) are what the teardown check and the watchdog read.
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import os
import shutil
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from verifiers.sandbox.base import SandboxUnavailable
from verifiers.sandbox.capture import KILL_GRACE

DEFAULT_UID_BASE = 61000
DEFAULT_UID_COUNT = 64
DEFAULT_SLOT_DIR = "/tmp/securebench-sandbox-slots"  # noqa: S108 - checked owner/mode below


@functools.cache  # the host's tools do not move while we run; failures are not cached
def tool(name: str) -> str:
    path = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin")
    if path is None:
        raise SandboxUnavailable(f"bwrap backend needs `{name}`, which is not installed")
    return path


def read_proc_status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def pids_of_uid(uid: int) -> list[int]:
    """Live (non-zombie) processes whose real uid is ``uid``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != uid:
                continue  # /proc/<pid> is owned by the effective uid: a cheap first filter
        except OSError:
            continue
        status = read_proc_status(int(entry.name))
        real_uid = status.get("Uid", "").split()
        if real_uid and int(real_uid[0]) == uid and not status.get("State", "").startswith("Z"):
            found.append(int(entry.name))
    return found


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants, from each thread's ``children`` list.

    Every process of a sandbox descends from its outer bwrap (orphans are re-parented to the
    namespace's pid 1), so this is the run's whole process set, read in a few files."""
    found: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone already
        found.append(pid)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    stack.extend(int(child) for child in fh.read().split())
            except (OSError, ValueError):
                continue
    return found


def pids_in_pidns(ns_link: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") == ns_link:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pids: list[int]) -> int:
    """Summed resident set (VmRSS) of ``pids``, from the short ``statm`` files."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * _PAGE_SIZE
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass
class Slot:
    uid: int | None  # None: not root, runs as our own uid
    lock_fd: int | None = None
    guard: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def release(self) -> None:
        with self.guard:
            if self.lock_fd is not None:
                os.close(self.lock_fd)  # closing drops the flock
                self.lock_fd = None

    def kill_all(self) -> None:
        """SIGKILL every process of the slot uid while the slot is still ours (once released
        the uid may be another sandbox's)."""
        with self.guard:
            if self.uid is not None and self.lock_fd is not None:
                kill_uid(self.uid)


def slot_dir() -> Path:
    path = Path(os.environ.get("SECUREBENCH_SANDBOX_SLOT_DIR", DEFAULT_SLOT_DIR))
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot create sandbox slot dir {path}: {exc}") from exc
    info = path.lstat()
    # Someone else's folder (or a symlink planted in /tmp) must not decide our slot locks.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(f"sandbox slot dir {path} is not a private folder of ours")
    return path


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` by signalling as that uid: no pid-reuse race."""
    subprocess.run(
        [tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
         tool("kill"), "-9", "-1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        check=False, timeout=10,
    )  # fmt: skip


_SLOT_TURN = itertools.count()


def acquire_slot(base: int, count: int, timeout: float) -> Slot:
    folder = slot_dir()
    deadline = time.monotonic() + timeout
    # Spread workers and successive runs over the pool: bwrap's pid 1 stays a zombie of the
    # uid until the host's init reaps it, and zombies count against RLIMIT_NPROC.
    start = (os.getpid() + next(_SLOT_TURN)) % count
    while True:
        for i in range(count):
            uid = base + (start + i) % count
            fd = os.open(folder / f"slot-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)  # fmt: skip
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            # Stragglers of a supervisor that died holding the slot are ours now: kill them
            # before the slot is used again (one scan, well under a millisecond).
            kill_stragglers(uid)
            return Slot(uid, fd)
        if time.monotonic() > deadline:
            raise SandboxUnavailable(f"all {count} sandbox slots are busy")
        time.sleep(0.05)


def kill_stragglers(uid: int) -> None:
    deadline = time.monotonic() + KILL_GRACE
    while pids_of_uid(uid) and time.monotonic() < deadline:
        kill_uid(uid)
        time.sleep(0.01)
