"""Host side of a live workspace's tars: built from trusted folders, validated, never extracted.

A workspace lives on the host only as ``snapshot.tar`` (and ``seed.tar``, its start). The
host never extracts one: no file or link the agent made ever exists on the host, so nothing
the agent plants can redirect a host write (security.md §1.2, the Judge0 escapes). What the
host does is read tar headers:

* ``tar_folder`` builds a tar from a trusted host folder (public assets laid out by us),
  walking without following links: regular files and folders only;
* ``sanitise_tree`` reads the tree a step's helper sent back (agent-made, untrusted) and
  writes a NEW tar holding only what a workspace may hold: safe relative UTF-8 names,
  regular files, folders and symbolic links (a link is data: its target is only ever
  resolved inside a sandbox); modes reduced to the executable bit (setuid/setgid/sticky
  dropped and noted); FIFOs, devices, hard links and the like dropped and named; totals
  (bytes of file content, entries) within the episode's limits, else ``TreeRejected``
  naming the limit and the step's tree is not kept. The new tar replaces the snapshot
  by an atomic rename, so a crash never leaves half a workspace.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from verifiers.scratch_files import unsafe_relative_path
from verifiers.task import WorkspaceFile

MAX_NOTED = 20  # names listed per kind of drop; the rest are counted
MAX_LINK_TARGET = 4095
MAX_MTIME = 8**11 - 1  # what a ustar header holds
_KIND_NAMES = {
    tarfile.LNKTYPE: "hard link",
    tarfile.FIFOTYPE: "FIFO",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.CONTTYPE: "contiguous file",
}


class TreeRejected(Exception):
    """A step's tree the workspace must not take (over a limit, or unreadable)."""

    def __init__(self, limit: str | None, message: str) -> None:
        super().__init__(message)
        self.limit = limit  # "workspace_bytes" | "workspace_files" | None (unreadable)


@dataclass
class TreeStats:
    files: int = 0  # entries: files, folders and links
    bytes: int = 0  # content of regular files
    notes: list[str] = field(default_factory=list)


class _Drops:
    """Names dropped from a tree, grouped by why, for one short note per reason."""

    def __init__(self) -> None:
        self.by_reason: dict[str, list[str]] = {}

    def add(self, reason: str, name: str) -> None:
        self.by_reason.setdefault(reason, []).append(name)

    def notes(self) -> list[str]:
        lines = []
        for reason, names in self.by_reason.items():
            shown = ", ".join(names[:MAX_NOTED])
            more = f" and {len(names) - MAX_NOTED} more" if len(names) > MAX_NOTED else ""
            lines.append(f"{reason}: {shown}{more}")
        return lines


def _entry(name: str, kind: bytes, mode: int, size: int = 0, mtime: float = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = min(max(int(mtime), 0), MAX_MTIME)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _file_mode(mode: int) -> int:
    return 0o755 if mode & 0o111 else 0o644


def tar_folder(folder: Path, dest: Path) -> TreeStats:
    """A tar of a trusted host folder: regular files and folders, links never followed."""
    stats = TreeStats()
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, folder).replace(os.sep, "/")
                info = os.lstat(full)
                if stat.S_ISDIR(info.st_mode):
                    tar.addfile(_entry(rel, tarfile.DIRTYPE, 0o755, 0, info.st_mtime))
                elif stat.S_ISREG(info.st_mode):
                    fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    with os.fdopen(fd, "rb") as handle:
                        size = os.fstat(handle.fileno()).st_size
                        mode = _file_mode(info.st_mode)
                        tar.addfile(_entry(rel, tarfile.REGTYPE, mode, size, info.st_mtime), handle)
                    stats.bytes += size
                else:
                    stats.notes.append(f"skipped {rel} (not a regular file or folder)")
                    continue
                stats.files += 1
    return stats


def _name_problem(name: str) -> str | None:
    """Why a member name cannot be kept (None when it can)."""
    if unsafe_relative_path(name):
        return "unsafe names dropped"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "names that are not UTF-8 dropped"
    return None


def sanitise_tree(
    source: BinaryIO,
    dest: Path,
    *,
    max_bytes: int,
    max_files: int,
    blocked: tuple[str, ...] = (),
) -> TreeStats:
    """Validate an untrusted tree tar and write its allowed part as a new tar at ``dest``.

    Raises ``TreeRejected`` when the tree is unreadable or over ``max_bytes`` of content or
    ``max_files`` entries; ``dest`` is then removed."""
    stats, drops = TreeStats(), _Drops()
    folders: set[str] = set()
    seen: set[str] = set()
    try:
        with (
            tarfile.open(fileobj=source, mode="r|") as tree,
            tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as out,
        ):
            for member in tree:
                _take(member, tree, out, stats, drops, folders, seen, blocked)
                if stats.files > max_files:
                    raise TreeRejected(
                        "workspace_files",
                        f"it would hold more than {max_files} files, folders and links, over "
                        "the workspace's limit (workspace_files)",
                    )
                if stats.bytes > max_bytes:
                    raise TreeRejected(
                        "workspace_bytes",
                        f"it would hold more than {max_bytes} bytes of files, over the "
                        "workspace's limit (workspace_bytes)",
                    )
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError) as exc:
        dest.unlink(missing_ok=True)
        raise TreeRejected(None, f"the step's files could not be read: {exc}") from exc
    except TreeRejected:
        dest.unlink(missing_ok=True)
        raise
    stats.notes += drops.notes()
    return stats


def _take(
    member: tarfile.TarInfo,
    tree: tarfile.TarFile,
    out: tarfile.TarFile,
    stats: TreeStats,
    drops: _Drops,
    folders: set[str],
    seen: set[str],
    blocked: tuple[str, ...],
) -> None:
    name = member.name.removeprefix("./").rstrip("/")
    if not name or name == ".":
        return
    problem = _name_problem(name)
    if problem:
        drops.add(problem, repr(name))
        return
    parent = name.rpartition("/")[0]
    if any(name == b or name.startswith(b + "/") for b in blocked):
        drops.add("paths of read-only assets dropped", name)
        return
    if parent and parent not in folders:
        drops.add("entries inside a dropped or linked folder dropped", name)
        return
    if name in seen:
        drops.add("duplicate entries dropped", name)
        return
    if member.mode & 0o7000 and (member.isdir() or member.isreg()):
        drops.add("setuid/setgid/sticky bits dropped from", name)
    if member.isdir():
        out.addfile(_entry(name, tarfile.DIRTYPE, 0o755, 0, member.mtime))
        folders.add(name)
    elif member.isreg():
        handle = tree.extractfile(member)
        mode = _file_mode(member.mode)
        out.addfile(_entry(name, tarfile.REGTYPE, mode, member.size, member.mtime), handle)
        stats.bytes += member.size
    elif member.issym():
        target = member.linkname
        if not target or "\0" in target or len(target) > MAX_LINK_TARGET:
            drops.add("links with an unusable target dropped", name)
            return
        try:
            target.encode("utf-8")
        except UnicodeEncodeError:
            drops.add("links with a target that is not UTF-8 dropped", name)
            return
        info = _entry(name, tarfile.SYMTYPE, 0o777, 0, member.mtime)
        info.linkname = target
        out.addfile(info)
    else:
        kind = _KIND_NAMES.get(member.type, "special file")
        drops.add(f"{kind}s dropped (a workspace keeps files, folders and links)", name)
        return
    seen.add(name)
    stats.files += 1


def iter_members(path: Path) -> Iterator[tuple[tarfile.TarInfo, bytes | None]]:
    """(member, content of a regular file) of one of our own normalised tars."""
    with tarfile.open(path, "r:") as tar:
        for member in tar:
            data = None
            if member.isreg():
                handle = tar.extractfile(member)
                data = handle.read() if handle else b""
            yield member, data


def workspace_files(path: Path) -> tuple[dict[str, WorkspaceFile], list[str]]:
    """Regular files of a snapshot (links are dropped with a note; folders are implied)."""
    files: dict[str, WorkspaceFile] = {}
    links: list[str] = []
    for member, data in iter_members(path):
        if data is not None:
            files[member.name] = WorkspaceFile(data, _file_mode(member.mode))
        elif member.issym():
            links.append(member.name)
    notes = []
    if links:
        more = f" and {len(links) - MAX_NOTED} more" if len(links) > MAX_NOTED else ""
        notes.append(
            "symbolic links are not part of a workspace candidate, dropped: "
            + ", ".join(links[:MAX_NOTED])
            + more
        )
    return files, notes


def fingerprints(path: Path) -> dict[str, tuple[str, str]]:
    """Name → (kind, content digest or link target + exec bit) of files and links."""
    found: dict[str, tuple[str, str]] = {}
    for member, data in iter_members(path):
        if data is not None:
            digest = hashlib.sha256(data).hexdigest()
            found[member.name] = ("file", f"{digest}:{_file_mode(member.mode):o}")
        elif member.issym():
            found[member.name] = ("link", member.linkname)
    return found


def changed_between(before: Path, after: Path) -> list[str]:
    """Files and links added, changed or removed from ``before`` to ``after``, sorted."""
    old, new = fingerprints(before), fingerprints(after)
    return sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))


def count_entries(path: Path) -> TreeStats:
    stats = TreeStats()
    with tarfile.open(path, "r:") as tar:
        for member in tar:
            stats.files += 1
            stats.bytes += member.size if member.isreg() else 0
    return stats
