"""Materialising untrusted workspaces and trusted task files into host scratch folders.

Everything lands in a folder we just created (``tempfile``), so no symlink can pre-exist;
files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and only the executable bit of a
candidate's mode is kept. Paths must be safe relative posix paths.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from verifiers.redaction import output_secrets
from verifiers.sandbox.base import Mount, SandboxResult
from verifiers.sandbox.standins import PYLIB_DIR as PYLIB_DIR
from verifiers.sandbox.standins import Standins
from verifiers.sandbox.standins import pylib_mounts as pylib_mounts
from verifiers.task import TaskFile, TaskLanes, WorkspaceFile
from verifiers.trusted_files import staged
from verifiers.verdict import Reason, cap_text, scrub

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


# --- trusted runner plumbing (shared by repo_patch and terminal_task) -----------------------

RUNNER_DIR = "/opt/securebench/runner"
FRAME_PREFIX = b"SECUREBENCH-FRAME "
_RUNNER_FILES = ("repo_runner.py", "terminal_runner.py")
# The site's pytest for sandboxes whose interpreter has none (PYLIB_DIR, pylib_mounts) is
# part of the bwrap stand-ins for a pack's image (verifiers.sandbox.standins); both are
# imported above under their own names, so trusted_files.stage_all still finds them here.


def runner_mounts() -> tuple[Mount, ...]:
    # Staged copies: the checkout itself may be unreachable for the sandbox uid.
    here = Path(__file__).resolve().parent / "families"
    return tuple(Mount(staged(here / name), f"{RUNNER_DIR}/{name}") for name in _RUNNER_FILES)


def new_nonce() -> str:
    return secrets.token_hex(16)


def read_frame(stdout: bytes, nonce: str) -> tuple[dict[str, Any] | None, str | None]:
    """The runner's one frame, or why there is none (stdout must hold nothing else)."""
    lines = [line for line in stdout.split(b"\n") if line.strip()]
    if not lines:
        return None, "missing"
    if len(lines) != 1 or not lines[0].startswith(FRAME_PREFIX):
        return None, "forged"
    try:
        frame = json.loads(lines[0][len(FRAME_PREFIX) :].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "forged"
    if not isinstance(frame, dict) or not hmac.compare_digest(str(frame.get("nonce", "")), nonce):
        return None, "forged"
    return frame, None


def limit_reason(result: SandboxResult) -> str | None:
    """The failure reason of a run that hit a sandbox limit (None if none was hit)."""
    if result.timed_out:
        return Reason.TIMEOUT
    if result.memory_exceeded:
        return Reason.MEMORY_LIMIT
    if result.output_exceeded:
        return Reason.OUTPUT_LIMIT
    if result.process_limit:
        return Reason.PROCESS_LIMIT
    return None


MIN_EVAL_SECRET_LENGTH = 12


def log_secrets(task: TaskLanes) -> list[str]:
    """What to scrub from stored logs: every hidden string, and the longer evaluation-input
    strings (short ones such as "pytest" or "tests" would mangle every log line; the
    verifier sandbox, where these logs come from, may see evaluation inputs anyway), less
    the strings the agent was shown too (verifiers.redaction)."""
    return output_secrets(task, min_input_length=MIN_EVAL_SECRET_LENGTH)


def sandbox_fields(result: SandboxResult, secrets_: Iterable[str] = ()) -> dict[str, Any]:
    """Verdict keyword arguments describing the run (capped, scrubbed output)."""
    secret_list = list(secrets_)
    return {
        "stdout": scrub(cap_text(result.stdout.decode("utf-8", "replace"), 64_000), secret_list),
        "stderr": scrub(cap_text(result.stderr.decode("utf-8", "replace"), 64_000), secret_list),
        "duration_seconds": result.duration_seconds,
        "sandbox_backend": result.backend,
        "sandbox_image": result.image,
    }


STANDINS_DETAIL = "sandbox_standins"  # shown on the result page beside the sandbox backend


def notes_details(result: SandboxResult, standins: Standins) -> dict[str, Any]:
    """The run's notes for a verdict's details: the sandbox's own, then which host tools
    stood in for the task's image (bwrap), also under their own key for the result page.

    Stand-in notes come from trusted code only (the public image name, host tool versions)."""
    details: dict[str, Any] = {"notes": [*result.notes, *standins.notes]}
    if standins.notes:
        details[STANDINS_DETAIL] = list(standins.notes)
    return details
