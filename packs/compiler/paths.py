"""The path policy (spec §1.6) and the walk of the two asset roots.

The policy functions are lexical and work on posix strings. The walk refuses every entry that
is not a regular file or a directory, so a safe relative path that names an entry of a walked
tree cannot escape its root through a symlink.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packs.compiler.digest import contains_lone_surrogate
from packs.compiler.errors import Problem, ProblemLog

RootName = Literal["public", "eval"]
_CHUNK = 1024 * 1024

# Workspace roots where the framework places non-public files; public mounts stay out.
RESERVED_ROOTS = ("securebench/evaluation_inputs", "securebench/evaluator")
EVALUATION_INPUTS_ROOT = "securebench/evaluation_inputs"
EVALUATOR_ROOT = "securebench/evaluator"
# Places graders conventionally read answers from; a public file must never land there.
DENIED_PATHS = (
    "ground_truth",
    "scorer",
    "eval",
    "task/hidden.json",
    "task/evaluation_inputs.json",
    "input/hidden.json",
    "output/score.json",
)
# Where the agent harness writes the agent payload.
AGENT_TASK_FILE = "task.json"


def unsafe_path_reason(value: object) -> str | None:
    """Why `value` is not a safe relative path, or None when it is."""
    if not isinstance(value, str) or value.strip() == "":
        return "must be a non-empty relative path"
    if "\\" in value:
        return "may not contain backslashes"
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return "may not contain control characters"
    if value.startswith("/"):
        return "may not be absolute"
    if ".." in value.split("/"):
        return "may not contain '..'"
    if normalise(value) == ".":
        return "may not be '.' (the pack itself)"
    return None


def normalise(value: str) -> str:
    """'assets/' -> 'assets', 'a//b/./c' -> 'a/b/c' (only call on safe paths)."""
    return posixpath.normpath(value)


def is_within(path: str, root: str) -> bool:
    """path equals root or lies beneath it; case-insensitive, because a case-insensitive
    filesystem would treat 'Eval' and 'eval' as the same place."""
    path, root = path.casefold(), root.casefold()
    return path == root or path.startswith(root + "/")


def overlaps(first: str, second: str) -> bool:
    return is_within(first, second) or is_within(second, first)


def public_target_problem(target: str) -> str | None:
    """Why a public file may not be placed at workspace path `target`, or None."""
    for root in RESERVED_ROOTS:
        if overlaps(target, root):
            return f"is reserved for non-public files ({root})"
    for denied in DENIED_PATHS:
        if is_within(target, denied):
            return f"is a denied path ({denied} and anything beneath it)"
    if is_within(target, AGENT_TASK_FILE):
        return f"is where the agent's {AGENT_TASK_FILE} is written"
    return None


# --- walking the asset roots ------------------------------------------------------------


@dataclass(frozen=True)
class PackFileEntry:
    root: RootName  # which asset root it lies under
    path: str  # posix path relative to that root
    source: Path  # absolute path on disk (to copy from)
    size: int
    sha256: str


@dataclass
class RootTree:
    """The files and directories under one asset root, by root-relative posix path."""

    name: RootName
    rel: str  # the root, relative to the pack, e.g. "hidden"
    files: dict[str, PackFileEntry] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)  # symlinks and special files found
    _sorted: list[str] | None = field(default=None, repr=False)

    def files_at(self, path: str) -> list[PackFileEntry]:
        """The file at `path`, or every file beneath directory `path` (sorted)."""
        if path in self.files:
            return [self.files[path]]
        if self._sorted is None or len(self._sorted) != len(self.files):
            self._sorted = sorted(self.files)
        # Binary search, not a scan: many rows may each point at a directory of a big tree.
        # Every key starting with "path/" sorts in ["path/", "path0") since "0" follows "/".
        low = bisect.bisect_left(self._sorted, path + "/")
        high = bisect.bisect_left(self._sorted, path + "0")
        return [self.files[key] for key in self._sorted[low:high]]

    def kind_of(self, path: str) -> Literal["file", "directory"] | None:
        if path in self.files:
            return "file"
        return "directory" if path in self.dirs else None


def file_sha256(path: Path) -> str:
    # Streaming: pack files may be far larger than memory we want to spend on one.
    # O_NOFOLLOW: if the file was swapped for a symlink after the walk saw it, fail instead.
    digest = hashlib.sha256()
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def walk_root(pack: Path, name: RootName, rel: str, log: ProblemLog) -> RootTree:
    tree = RootTree(name=name, rel=rel)
    base = pack / rel
    if not base.is_dir():  # an absent root is fine: the pack simply has no such files
        return tree
    stack = [""]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(base / current if current else base) as entries:
                for entry in entries:
                    _visit(tree, base, current, entry, stack, log)
        except OSError as exc:
            # Report the pack-relative path only; the OS message would name the host path.
            shown = f"{rel}/{current}" if current else rel
            log.add(
                Problem(
                    shown, None, None, f"could not be read ({exc.strerror or type(exc).__name__})"
                )
            )
    return tree


def _visit(
    tree: RootTree,
    base: Path,
    current: str,
    entry: os.DirEntry[str],
    stack: list[str],
    log: ProblemLog,
) -> None:
    path = f"{current}/{entry.name}" if current else entry.name
    shown = f"{tree.rel}/{path}"

    def reject(message: str) -> None:
        tree.rejected.add(path)
        log.add(Problem(shown, None, None, message))

    # Undecodable bytes arrive as surrogate escapes; they cannot be stored or hashed as text.
    if contains_lone_surrogate(entry.name):
        reject("has a name that is not valid UTF-8")
        return
    info = entry.stat(follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        tree.dirs.add(path)
        stack.append(path)
    elif stat.S_ISREG(info.st_mode):
        source = base / path
        try:
            sha = file_sha256(source)
        except OSError as exc:
            reject(f"could not be read ({exc.strerror or type(exc).__name__})")
            return
        tree.files[path] = PackFileEntry(tree.name, path, source.absolute(), info.st_size, sha)
    else:
        what = "a symlink" if stat.S_ISLNK(info.st_mode) else "a device, fifo or socket"
        reject(f"is {what}; packs may only contain regular files and directories")


def ignored_files(pack: Path, skip: set[str]) -> list[str]:
    """Pack-relative paths outside the asset roots and the pack files; not part of the contract.

    `skip` holds pack-relative paths not to report (the manifest, the tasks file) or descend
    into (the asset roots). Symlinked directories are listed, never followed.
    """
    found: list[str] = []
    for current, dirnames, filenames in os.walk(pack, followlinks=False):
        rel_dir = Path(current).relative_to(pack).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        kept = []
        for dirname in sorted(dirnames):
            rel = prefix + dirname
            if rel in skip:
                continue
            if (Path(current) / dirname).is_symlink():
                found.append(rel)
            else:
                kept.append(dirname)
        dirnames[:] = kept
        found.extend(prefix + name for name in filenames if prefix + name not in skip)
    return sorted(found)
