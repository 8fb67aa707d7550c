"""Where a live workspace lives and how it starts, per family (no Django; public lanes only).

A workspace starts exactly as the family's verifier expects a candidate to start:

* ``terminal_task``: the public assets at their mount paths under ``environment.workdir``
  (default ``/workspace``, the verifier's). Writable assets are copied into the seed;
  read-only ones (``read_only: true``, the manifest's ``asset_defaults`` applying) are
  copied once into ``<folder>/readonly`` and mounted read-only at their path inside the
  workspace, so they are really read-only for the agent too, and never part of a snapshot.
* ``artifact_task``: laid out as a terminal task (its public assets, read-only ones mounted
  read-only); its candidate is the files the agent created or changed, not the seed's.
* ``repo_patch``: the repository at its base commit from the pack's assets, laid out under
  ``/workspace`` as the verifier's ``plan_repository`` does (the repository at
  ``environment.workdir``); without assets, the image's own folder at
  ``environment.workdir`` (Docker only: bubblewrap has no image to read it from).

Only ``task.public``, ``task.files["assets"]``, ``task.environment`` and ``task.metadata``
are read here: nothing of the evaluation_inputs or hidden lanes can reach a workspace.
"""

from __future__ import annotations

import json
import posixpath
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.live.tarball import TreeStats, tar_folder
from verifiers.sandbox.base import GiB, MiB, Mount
from verifiers.scratch_files import (
    DEFAULT_WORKDIR,
    WORKSPACE_ROOT,
    assets_by_access,
    layout_assets,
    open_up,
    unsafe_relative_path,
)
from verifiers.task import TaskFile, TaskLanes

# Families whose workspace is the public assets at their mounts under the workdir.
ASSET_FAMILIES = ("terminal_task", "artifact_task")
SNAPSHOT = "snapshot.tar"
SEED = "seed.tar"
SEED_INFO = "seed.json"
READ_ONLY = "readonly"
LOCK = ".lock"
# Folders a workspace root may not be or lie in: the sandbox's own system and trusted mounts.
RESERVED = ("/proc", "/dev", "/sys", "/tmp", "/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc")  # noqa: S108
RESERVED_PREFIXES = ("/opt/securebench",)


@dataclass(frozen=True)
class WorkspaceLimits:
    workspace_bytes: int = 256 * MiB  # content of the workspace's files, per episode
    workspace_files: int = 8192  # files, folders and links on top of the seed's own count
    command_seconds_default: float = 60.0
    command_seconds_max: float = 900.0
    memory_bytes: int = 1 * GiB
    pids: int = 256
    output_bytes: int = 64 * 1024  # per stream shown to the agent (head + tail)
    read_bytes: int = 256 * 1024  # read_file at most


@dataclass(frozen=True)
class LiveWorkspace:
    """Where one episode's workspace lives and how its actions run."""

    folder: Path  # host folder holding snapshot.tar and seed.tar
    workdir: str  # the workspace root inside the sandbox
    image: str | None
    read_only_mounts: tuple[Mount, ...]  # trusted copies, targets under workdir
    from_image: bool  # repo seeded from the image (Docker only)
    limits: WorkspaceLimits
    family: str = ""
    repo_path: str = ""  # repo_patch: the repository relative to workdir ("" = workdir)
    read_only_paths: tuple[str, ...] = ()  # relative to workdir (the mounts' targets)

    @property
    def snapshot(self) -> Path:
        return self.folder / SNAPSHOT

    @property
    def seed_tar(self) -> Path:
        return self.folder / SEED


class WorkspaceUnsupported(Exception):
    """The task cannot be served as a live workspace (the message says why)."""


def plan_live_workspace(
    task: TaskLanes, backend: str, folder: Path, limits: WorkspaceLimits
) -> LiveWorkspace:
    """The plan of ``task``'s workspace on ``backend`` (no I/O: ``seed`` lays it out)."""
    image = task.environment.get("image")
    image = image if isinstance(image, str) and image else None
    if task.family in ASSET_FAMILIES:
        workdir = _workdir(task.environment.get("workdir") or DEFAULT_WORKDIR)
        read_only = _read_only_mounts(task)
        mounts = tuple(
            Mount(Path(folder) / READ_ONLY / path, f"{workdir}/{path}", read_only=True)
            for path in read_only
        )
        return LiveWorkspace(
            Path(folder), workdir, image, mounts, False, limits, task.family, "", read_only
        )
    if task.family == "repo_patch":
        return _plan_repository(task, backend, Path(folder), limits, image)
    raise WorkspaceUnsupported(f"{task.family} tasks have no live workspace")


def _workdir(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise WorkspaceUnsupported("environment.workdir must be an absolute path")
    path = posixpath.normpath(value)
    if ".." in path.split("/") or path == "/":
        raise WorkspaceUnsupported(f"environment.workdir {value!r} cannot be a workspace root")
    if any(path == r or path.startswith(r + "/") for r in RESERVED + RESERVED_PREFIXES):
        raise WorkspaceUnsupported(f"environment.workdir {value!r} is a reserved folder")
    return path


def _mount_path(descriptor: dict[str, Any]) -> tuple[str, str]:
    path = str(descriptor.get("path", "")).strip("/")
    mount = descriptor.get("mount", path)
    if not isinstance(mount, str) or unsafe_relative_path(mount.strip("/")):
        raise WorkspaceUnsupported(f"unsafe asset mount {mount!r}")
    return path, mount.strip("/")


def _has_files(files: tuple[TaskFile, ...], path: str) -> bool:
    return any(item.path == path or item.path.startswith(path + "/") for item in files)


def _read_only_mounts(task: TaskLanes) -> tuple[str, ...]:
    """Mount paths of the read-only assets that have files, outermost only."""
    read_only, _ = assets_by_access(task)
    files = task.files.get("assets", ())
    mounts = sorted(
        {mount for path, mount in map(_mount_path, read_only) if _has_files(files, path)}
    )
    kept: list[str] = []
    for mount in mounts:  # sorted: a folder comes before anything inside it
        if not any(mount.startswith(outer + "/") for outer in kept):
            kept.append(mount)
    return tuple(kept)


def _below(path: str, root: str) -> str | None:
    if path == root:
        return ""
    return path[len(root) + 1 :] if path.startswith(root + "/") else None


def _plan_repository(
    task: TaskLanes, backend: str, folder: Path, limits: WorkspaceLimits, image: str | None
) -> LiveWorkspace:
    env_workdir = task.environment.get("workdir")
    descriptors = [d for d in task.public.get("assets") or [] if isinstance(d, dict)]
    mounts = [_mount_path(d)[1] for d in descriptors if "path" in d]
    if task.files.get("assets") and mounts:
        if env_workdir:
            repo = _workdir(env_workdir)
        else:  # one asset: the repository is that asset's folder
            repo = f"{WORKSPACE_ROOT}/{mounts[0]}" if len(mounts) == 1 else WORKSPACE_ROOT
        rel = _below(repo, WORKSPACE_ROOT)
        if rel is not None and any(
            rel == "" or m == rel or m.startswith(rel + "/") or rel.startswith(m + "/")
            for m in mounts
        ):
            return LiveWorkspace(folder, WORKSPACE_ROOT, image, (), False, limits, task.family, rel)
    if backend != "docker":
        raise WorkspaceUnsupported(
            "the repository is baked into the task's image: its live workspace needs Docker"
        )
    if not env_workdir:
        raise WorkspaceUnsupported("repo_patch without assets needs environment.workdir")
    return LiveWorkspace(folder, _workdir(env_workdir), image, (), True, limits, task.family, "")


# --- laying out the seed on the host (trusted public assets only) ----------------------------


def prepare_folder(ws: LiveWorkspace) -> None:
    """The episode's folder: ours, traversable (not listable) by the sandbox's uid, which
    must reach the read-only copies inside it."""
    ws.folder.mkdir(parents=True, exist_ok=True)
    ws.folder.chmod(0o711)


def build_seed(ws: LiveWorkspace, task: TaskLanes) -> TreeStats:
    """seed.tar from the public assets, and the read-only copies the sandbox mounts."""
    assets = task.files.get("assets", ())
    descriptors = task.public.get("assets")
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=ws.folder))
    try:
        if ws.family in ASSET_FAMILIES:
            read_only, writable = assets_by_access(task)
            layout_assets(staging, writable, assets)
            copies = ws.folder / READ_ONLY
            if copies.exists():
                shutil.rmtree(copies)
            copies.mkdir()
            layout_assets(copies, read_only, assets)
            open_up(copies)
            for path in ws.read_only_paths:  # a writable asset under a read-only one is hidden
                _remove(staging / path)
        else:
            layout_assets(staging, descriptors, assets)
        stats = tar_folder(staging, ws.seed_tar)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    ws.seed_tar.chmod(0o600)
    return stats


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def write_seed_info(ws: LiveWorkspace, stats: TreeStats) -> None:
    info = {"files": stats.files, "bytes": stats.bytes}
    (ws.folder / SEED_INFO).write_text(json.dumps(info), encoding="utf-8")


def seed_files(ws: LiveWorkspace) -> int:
    """How many entries the seed had (the workspace may add ``workspace_files`` more)."""
    try:
        info = json.loads((ws.folder / SEED_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return int(info.get("files", 0)) if isinstance(info, dict) else 0
