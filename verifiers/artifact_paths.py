"""Which file paths an artifact candidate may hold: the same wherever one arrives.

Beyond a safe relative path (``scratch_files.unsafe_relative_path``: no ``..``, no absolute
path, no NUL or control character), an artifact is later written out as real files for an
evaluation program, possibly on a host whose file system gives some names a meaning: so a
device-like name (``CON``, ``nul.txt``, ``COM1``; a top-level ``dev/``, ``proc/`` or ``sys/``)
is refused, and two paths may not make one name both a folder and a file (``a`` and
``a/b``), which no file system can hold and which a writer would resolve one way or the other.
"""

from __future__ import annotations

from collections.abc import Iterable

from verifiers.scratch_files import unsafe_relative_path

# Windows device names, with or without an extension ("nul.txt" opens the device too).
_DEVICE_NAMES = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$"}
    | {f"com{n}" for n in range(10)}
    | {f"lpt{n}" for n in range(10)}
)
_SYSTEM_TOPS = frozenset({"dev", "proc", "sys"})
MAX_PATH_CHARS = 1024


def artifact_path_problem(path: object) -> str | None:
    """Why ``path`` cannot be an artifact file's path (None when it can)."""
    unsafe = unsafe_relative_path(path)
    if unsafe or not isinstance(path, str):  # the second: only for the type checker
        return unsafe or "empty or non-string path"
    if len(path) > MAX_PATH_CHARS:
        return f"path is longer than {MAX_PATH_CHARS} characters"
    parts = path.split("/")
    if parts[0].lower() in _SYSTEM_TOPS:
        return f"path {path!r} names a system folder ({parts[0]}/)"
    for part in parts:
        stem = part.split(".", 1)[0].rstrip(" ").lower()
        if stem in _DEVICE_NAMES:
            return f"path {path!r} uses the device name {part!r}"
        if part.endswith((" ", ".")):
            return f"path {path!r} has a name ending in a space or dot ({part!r})"
    return None


def folder_file_clashes(paths: Iterable[str]) -> list[tuple[str, str]]:
    """(file, path under it) pairs where one path is a file and a folder at once."""
    files = set(paths)
    clashes: list[tuple[str, str]] = []
    for path in sorted(files):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in files:
                clashes.append((folder, path))
                break
    return clashes
