"""Probes shared by the sandbox suites: what a sandbox mounts, where a candidate could write,
and which of a run's processes are still alive — looked for wherever they live.

A run's processes are found three ways, so the check holds whoever runs the tests (root or
not) and whichever backend ran them:

* by a token the test puts on the command line: ``/proc/<pid>/cmdline`` is readable by every
  uid, and a Docker container's processes are host processes of the same kernel;
* by the pid namespace the sandbox announced (``/proc/<pid>/ns/pid`` of a process is readable
  by root, or by its own uid: bwrap without root runs as us);
* by the sandbox's uid when that uid is ours alone (a bwrap slot uid, as root).
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifiers.sandbox import Limits


def python(code: str, *args: str) -> list[str]:
    return ["python3", "-I", "-c", textwrap.dedent(code), *args]


def wait_for(condition: Callable[[], bool], deadline_seconds: float = 30.0) -> bool:
    """Poll until ``condition()`` holds or the (generous) deadline passes; only for waiting."""
    give_up = time.monotonic() + deadline_seconds
    while not condition():
        if time.monotonic() > give_up:
            return False
        time.sleep(0.02)
    return True


# --- processes ---------------------------------------------------------------------------------


def processes_with_token(token: str) -> list[int]:
    """Live host processes whose command line holds ``token`` (any uid, any container)."""
    needle = token.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes() and not _zombie(entry):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def processes_in_pid_namespace(namespace: str, ignore_uids: tuple[int, ...] = ()) -> list[int]:
    """Live host processes in the pid namespace ``namespace`` (``pid:[inode]``), where the
    namespace link is readable to us (root: every process; otherwise our own), except those
    running as one of ``ignore_uids``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != namespace or _zombie(entry):
                continue
            if _real_uid(entry) not in ignore_uids:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _real_uid(entry: Path) -> int:
    # From status, not the folder's owner: a process that makes itself non-dumpable shows
    # its /proc folder as root's, and could pass for one of the ignored uids.
    for line in (entry / "status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return -1


def _zombie(entry: Path) -> bool:
    # A zombie is dead already: only its parent's wait() is missing (outside the sandbox).
    stat = (entry / "stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def survivors(
    token: str, namespace: str | None = None, *, ignore_uids: tuple[int, ...] = ()
) -> dict[str, list[int]]:
    """Every way of finding a run's processes, with what each found (all empty: none left)."""
    found = {"by command-line token": processes_with_token(token)}
    if namespace is not None:
        found["by pid namespace"] = processes_in_pid_namespace(namespace, ignore_uids)
    return {how: pids for how, pids in found.items() if pids}


# A daemon that announces itself (pid inside, pid namespace) in OUT/daemon.json before the
# command ends, then carries the token (argv[1]) on its command line until it is killed; it
# writes OUT/late.txt only once the test creates OUT/go, i.e. after run() has returned.
ANNOUNCING_DAEMON = """
import json, os, sys, time
out, token = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        note = {"pid": os.getpid(), "ns": os.readlink("/proc/self/ns/pid")}
        with open(out + "/.daemon.json", "w") as fh:
            json.dump(note, fh)
        os.rename(out + "/.daemon.json", out + "/daemon.json")
        script = 'while [ ! -e "$1/go" ]; do sleep 0.01; done; echo survived > "$1/late.txt"'
        os.execv("/bin/sh", ["sh", "-c", script + "; sleep 300", token, out])
    os._exit(0)
for _ in range(1000):  # the announcement is written before we end (polling, not deciding)
    if os.path.exists(out + "/daemon.json"):
        break
    time.sleep(0.01)
print("main done")
"""


# --- mounts ------------------------------------------------------------------------------------

# Prints every mount of the sandbox as JSON, with the owner and mode of its mount point.
MOUNTS_PROBE = """
import json, os, stat
def unescape(path):  # mountinfo escapes space, tab, newline and backslash as octal
    return path.encode().decode("unicode_escape")
mounts = []
for line in open("/proc/self/mountinfo"):
    left, right = line.rstrip("\\n").split(" - ", 1)
    fields, tail = left.split(), right.split()
    point = unescape(fields[4])
    try:
        info = os.stat(point)
        kind = "chr" if stat.S_ISCHR(info.st_mode) else (
            "dir" if stat.S_ISDIR(info.st_mode) else "file")
        owner, mode = info.st_uid, stat.S_IMODE(info.st_mode)
    except OSError:
        kind, owner, mode = "unknown", None, None
    mounts.append({"point": point, "opts": fields[5].split(","), "fstype": tail[0],
                   "super": tail[2].split(",") if len(tail) > 2 else [],
                   "kind": kind, "owner": owner, "mode": mode})
import resource  # asked of the kernel: gVisor has no /proc/self/limits
msgqueue = str(resource.getrlimit(resource.RLIMIT_MSGQUEUE)[1])
print(json.dumps({"uid": os.getuid(), "mounts": mounts, "msgqueue": msgqueue}))
"""

# Kernel filesystems that may stay mounted writable, and why each is harmless.
HARMLESS_PSEUDO = {
    "proc": "no file can be created in it; its writable knobs need privileges we drop",
    "devpts": "holds pseudo-terminals only, no data; opening ptmx is bounded by the pid cap",
    "mqueue": "holds POSIX queues only, and RLIMIT_MSGQUEUE=0 forbids creating any",
}
# Engine-made tmpfs folders that stay rw but that the sandbox uid cannot write: owned by root,
# not group/other-writable, and the sandbox holds no capability (CAP_DAC_OVERRIDE included;
# see the capabilities test). The fill probe proves no byte lands in them.
ROOT_ONLY_TMPFS = {
    "/dev": "Docker's device folder (the nodes in it are devices, not storage)",
    "/sys/fs/cgroup": "Docker's cgroup folder (the cgroup mounts under it are read-only)",
}


def tmpfs_size(mount: dict[str, Any]) -> int | None:
    for option in mount["super"]:
        if option.startswith("size="):
            value = option.removeprefix("size=")
            scale = {"k": 1024, "m": 1024**2, "g": 1024**3}.get(value[-1:].lower(), 1)
            return int(value.rstrip("kKmMgG")) * scale
    return None


def mount_problems(
    probe: dict[str, Any], limits: Limits, workdir: str, writable_mounts: tuple[str, ...] = ()
) -> list[str]:
    """Every mount that breaks the plan: ``/`` read-only, and each writable mount either a
    declared tmpfs at its cap, a mount the spec declared writable, or explained above."""
    caps = {workdir: limits.work_bytes, "/tmp": limits.tmp_bytes}  # noqa: S108
    problems: list[str] = []
    seen: set[str] = set()
    for mount in probe["mounts"]:
        point, writable = mount["point"], "rw" in mount["opts"]
        if point == "/":
            if writable:
                problems.append(f"/ is mounted read-write ({mount['fstype']})")
            continue
        if not writable:
            continue
        if point in caps:
            seen.add(point)
            if mount["fstype"] != "tmpfs" or tmpfs_size(mount) != caps[point]:
                problems.append(f"{point}: {mount['fstype']} {mount['super']}, not a tmpfs "
                                f"of {caps[point]} bytes")  # fmt: skip
        elif point in writable_mounts:
            seen.add(point)
        elif mount["fstype"] in HARMLESS_PSEUDO:
            if mount["fstype"] == "mqueue" and probe["msgqueue"] != "0":
                problems.append(f"{point}: mqueue with RLIMIT_MSGQUEUE={probe['msgqueue']}")
        elif mount["kind"] == "chr":
            continue  # a bind of one device node: writes go to the device, not to storage
        elif (
            point in ROOT_ONLY_TMPFS
            and mount["fstype"] == "tmpfs"
            and mount["owner"] == 0
            and probe["uid"] != 0
            and not mount["mode"] & 0o022
        ):
            continue
        else:
            problems.append(f"{point}: undeclared writable {mount['fstype']} {mount}")
    missing = {*caps, *writable_mounts} - seen
    problems += [f"{point}: declared writable but not mounted so" for point in sorted(missing)]
    return problems


# Tries to fill every place a candidate could write: each mount point, the usual suspects,
# $HOME, and every folder access() calls writable on a walk of the tree (not /proc, /sys).
# Each place stops at CEILING bytes, enough to prove a breach without filling the host.
FILL_PROBE = """
import errno, json, os, sys
ceiling = int(sys.argv[1])
places = {"/", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run", "/run/lock", "/tmp",
          os.environ.get("HOME", "/"), os.getcwd()}
for line in open("/proc/self/mountinfo"):
    places.add(line.split()[4].encode().decode("unicode_escape"))
for root, dirs, _files in os.walk("/"):
    if root in ("/proc", "/sys"):
        dirs[:] = []
        continue
    if os.access(root, os.W_OK):
        places.add(root)
chunk = b"z" * 65536
out = {}
for place in sorted(p for p in places if os.path.isdir(p) and not os.path.islink(p)):
    written, error, n = 0, None, 0
    while written < ceiling and error is None:
        try:
            fd = os.open(f"{place}/sb-fill-{n}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            error = errno.errorcode.get(exc.errno, str(exc.errno))
            break
        n += 1
        try:
            while written < ceiling:
                written += os.write(fd, chunk[: ceiling - written])
        except OSError as exc:
            if exc.errno != errno.EFBIG:  # past RLIMIT_FSIZE: go on in a new file
                error = errno.errorcode.get(exc.errno, str(exc.errno))
        finally:
            os.close(fd)
    out[place] = {"written": written, "error": error, "dev": os.stat(place).st_dev}
print(json.dumps(out))
"""
