"""A verification's host scratch folders: a candidate's untrusted workspace and the trusted
task files (public assets, evaluation files) laid out where a sandbox will mount them.

Everything lands in a folder we just created (``tempfile``), so no symlink can pre-exist;
files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and only the executable bit of a
candidate's mode is kept. Paths must be safe relative posix paths.

The families that verify a workspace (terminal_task, repo_patch) and the live workspaces of
their episodes (verifiers.live) lay out public assets by the same rules, kept here.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from verifiers.task import TaskFile, TaskLanes, WorkspaceFile

WORKSPACE_ROOT = "/workspace"  # where public assets land (spec §5.5)
DEFAULT_WORKDIR = WORKSPACE_ROOT  # terminal_task's workspace when environment.workdir is unset

MAX_WORKSPACE_FILES = 20_000
MAX_WORKSPACE_BYTES = 1024 * 1024 * 1024


class UnsafeWorkspace(ValueError):
    """A candidate workspace we refuse to materialise (→ failed, invalid_candidate)."""


def unsafe_relative_path(path: Any) -> str | None:
    """Why ``path`` is not a safe relative posix path (None when it is)."""
    if not isinstance(path, str) or not path:
        return "empty or non-string path"
    if path.startswith("/"):
        return f"absolute path {path!r}"
    if "\\" in path or "\0" in path or any(ord(char) < 32 for char in path):
        return f"backslash or control character in {path!r}"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return f"path {path!r} escapes the workspace"
    return None


def _write(root: Path, relative: str, content: bytes, mode: int) -> None:
    target = root.joinpath(*relative.split("/"))
    parent = target.parent
    current = root
    for part in parent.relative_to(root).parts:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            raise UnsafeWorkspace(f"{relative}: {current.relative_to(root)} is not a folder")
        current.mkdir(exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(target, flags, mode)
    except FileExistsError as exc:
        raise UnsafeWorkspace(f"{relative}: given twice or clashes with a folder") from exc
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    os.chmod(target, mode)


def write_candidate_workspace(root: Path, files: Mapping[str, WorkspaceFile]) -> list[str]:
    """Write a candidate's files under ``root``; returns the sorted relative paths."""
    if len(files) > MAX_WORKSPACE_FILES:
        raise UnsafeWorkspace(f"workspace has more than {MAX_WORKSPACE_FILES} files")
    total = sum(len(item.content) for item in files.values())
    if total > MAX_WORKSPACE_BYTES:
        raise UnsafeWorkspace(f"workspace is larger than {MAX_WORKSPACE_BYTES} bytes")
    for path in files:
        if reason := unsafe_relative_path(path):
            raise UnsafeWorkspace(reason)
    # Files before folders would clash later; sorting makes "a" come before "a/b".
    for path in sorted(files):
        item = files[path]
        mode = 0o755 if item.mode & 0o111 else 0o644
        _write(root, path, item.content, mode)
    return sorted(files)


def copy_trusted_file(source: Path, target: Path, root: Path | None = None) -> None:
    """Copy one trusted pack file (regular files only) to ``target``. Under a candidate's
    workspace ``root``, trusted content takes precedence: a candidate's file or folder standing
    where the trusted file or one of its folders goes (a read-only asset's folder renamed away
    and replaced by a file, say) is removed first."""
    info = os.lstat(source)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"trusted file {source} is not a regular file")
    if root is not None:
        _clear_the_way(root, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    shutil.copyfile(source, target, follow_symlinks=False)
    os.chmod(target, 0o755 if info.st_mode & 0o111 else 0o644)


def _clear_the_way(root: Path, target: Path) -> None:
    for entry in _files_on_the_way(root, target):
        entry.unlink()
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)


def _files_on_the_way(root: Path, target: Path) -> Iterator[Path]:
    """Entries that are not folders (files, links) where the folders from ``root`` down to
    ``target``'s parent go; lazily, so a caller may remove each before the next is looked at."""
    current = root
    for part in target.parent.relative_to(root).parts:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            yield current


def layout_task_files(
    root: Path, files: Iterable[TaskFile], prefix: str = "", mount: str | None = None
) -> list[str]:
    """Copy task files whose path is ``prefix`` or below it to ``root/<mount>/<rest>``."""
    placed: list[str] = []
    prefix = prefix.strip("/")
    target_base = (mount if mount is not None else prefix).strip("/")
    for item in files:
        if unsafe_relative_path(item.path):
            raise ValueError(f"unsafe task file path {item.path!r}")
        if prefix and item.path != prefix and not item.path.startswith(prefix + "/"):
            continue
        rest = item.path[len(prefix) :].lstrip("/") if prefix else item.path
        relative = "/".join(part for part in (target_base, rest) if part)
        if not relative:
            relative = item.path.rsplit("/", 1)[-1]
        copy_trusted_file(item.source, root.joinpath(*relative.split("/")), root)
        placed.append(relative)
    return placed


def layout_assets(root: Path, descriptors: Any, files: Iterable[TaskFile]) -> list[str]:
    """Public assets at their mounts (default: their path) under ``root``."""
    placed: list[str] = []
    items = list(files)
    for descriptor in descriptors if isinstance(descriptors, list) else []:
        if not isinstance(descriptor, dict) or not isinstance(descriptor.get("path"), str):
            continue
        path = descriptor["path"].strip("/")
        mount = descriptor.get("mount", path)
        if not isinstance(mount, str) or unsafe_relative_path(mount.strip("/")):
            raise ValueError(f"unsafe asset mount {mount!r}")
        singles = [item for item in items if item.path == path]
        if singles:  # a single file mounted at `mount`
            target = root.joinpath(*mount.strip("/").split("/"))
            copy_trusted_file(singles[0].source, target, root)
            placed.append(mount.strip("/"))
            continue
        placed += layout_task_files(root, items, prefix=path, mount=mount)
    return placed


def add_missing_files(source: Path, root: Path) -> None:
    """Copy regular files from a trusted staging tree into ``root`` where ``root`` has none.
    The candidate's own layout stands: where it put a file in place of a folder of the tree
    (a writable asset folder replaced by a file), nothing is added below it."""
    for path in sorted(source.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        target = root.joinpath(*path.relative_to(source).parts)
        if target.exists() or target.is_symlink() or any(_files_on_the_way(root, target)):
            continue
        copy_trusted_file(path, target)


def read_only_asset_mounts(descriptors: Any) -> list[str]:
    """Mount paths of assets declared read_only: true (restored over the workspace)."""
    mounts: list[str] = []
    for descriptor in descriptors if isinstance(descriptors, list) else []:
        if isinstance(descriptor, dict) and descriptor.get("read_only") is True:
            mount = descriptor.get("mount", descriptor.get("path"))
            if isinstance(mount, str) and not unsafe_relative_path(mount.strip("/")):
                mounts.append(mount.strip("/"))
    return mounts


def remove_path(root: Path, relative: str) -> None:
    """Remove a file or folder under ``root`` without following symlinks."""
    target = root.joinpath(*relative.split("/"))
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)


def assets_by_access(task: TaskLanes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Asset descriptors split by their effective read_only (the manifest default applies)."""
    defaults = task.metadata.get("asset_defaults")
    default = defaults.get("read_only", True) if isinstance(defaults, dict) else True
    descriptors = [d for d in task.public.get("assets") or [] if isinstance(d, dict)]
    read_only = [{**d, "read_only": True} for d in descriptors if d.get("read_only", default)]
    writable = [d for d in descriptors if not d.get("read_only", default)]
    return read_only, writable


def open_up(folder: Path) -> None:
    """Make a scratch tree readable by the sandbox's unprivileged uid (read-only mounts)."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        path.chmod(0o755 if path.is_dir() or path.stat().st_mode & 0o111 else 0o644)
