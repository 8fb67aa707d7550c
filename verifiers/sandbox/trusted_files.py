"""Trusted files a sandbox mounts, staged where the sandbox's uid can read them.

The runner scripts, the code harness and (for pytest checkers) the host's pytest packages
live in the checkout and the venv. A checkout may sit in a private folder (``/root`` is
0700, and so is every ``mktemp -d`` folder), which bubblewrap's unprivileged sandbox uid
cannot traverse: every sandboxed verification would fail. So a sandbox never mounts them from
where they live; it mounts a read-only copy under a folder of ours that others may traverse,
``SECUREBENCH_TRUSTED_DIR`` (default ``/tmp/securebench-trusted-<uid>``).

Copies are content-addressed (``<root>/<sha256>/<name>``): an edited script gets a new copy,
two workers staging at once agree on the result, and a copy is never rewritten in place. A
copy appears whole or not at all (built in a private folder, then renamed). The worker stages
everything at start (``verifiers.staging``); each mount checks its copy again, so a copy
removed by a /tmp cleaner comes back on first use.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from verifiers.sandbox.base import SandboxUnavailable

TRUSTED_DIR_ENV = "SECUREBENCH_TRUSTED_DIR"
DEFAULT_PARENT = "/tmp"  # noqa: S108 - world-traversable; our folder's owner and mode are checked
FILE_MODE = 0o444
FOLDER_MODE = 0o555
_IGNORED = ("__pycache__", "*.pyc")

_lock = threading.Lock()
_digests: dict[Path, str] = {}  # source -> digest, once per process: sources change on deploy


def staging_root() -> Path:
    """Our staging folder, created on first use: owned by us, writable by nobody else, and
    traversable by everyone (the sandbox uid must reach the copies)."""
    configured = os.environ.get(TRUSTED_DIR_ENV, "").strip()
    root = Path(configured or f"{DEFAULT_PARENT}/securebench-trusted-{os.geteuid()}")
    try:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot create the trusted files folder {root}: {exc}") from exc
    info = root.lstat()
    # A folder planted by another local user (or a symlink in /tmp) must not decide what a
    # sandbox runs as its trusted runner.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(f"trusted files folder {root} is not a folder only we can write")
    if info.st_mode & 0o005 != 0o005:
        root.chmod(0o755)  # made by an older version or a umask of 077
    return root


def staged(source: Path) -> Path:
    """The read-only copy of ``source`` (a file or a package folder) that sandboxes mount."""
    source = source.resolve()
    with _lock:
        digest = _digests.get(source)
        if digest is None:
            digest = _tree_digest(source)
            _digests[source] = digest
    target = staging_root() / digest / source.name
    if not target.exists():
        _stage(source, target)
    return target


def _tree_digest(source: Path) -> str:
    """Names and contents of the file, or of every file below the folder (bytecode aside)."""
    hasher = hashlib.sha256()
    if source.is_file():
        hasher.update(b"file\0" + source.read_bytes())
        return hasher.hexdigest()
    for path in sorted(_tree_files(source)):
        relative = path.relative_to(source).as_posix().encode()
        content = path.read_bytes()
        hasher.update(b"%d:%s%d:" % (len(relative), relative, len(content)))
        hasher.update(content)
    return hasher.hexdigest()


def _tree_files(source: Path) -> list[Path]:
    return [
        path
        for path in source.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]


def _stage(source: Path, target: Path) -> None:
    """Copy into a private folder beside the target, make it read-only, rename it in place."""
    holder = target.parent
    building = Path(tempfile.mkdtemp(prefix=".staging-", dir=holder.parent))
    try:
        copy = building / source.name
        if source.is_dir():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns(*_IGNORED))
        else:
            shutil.copyfile(source, copy)
        _make_read_only(copy)
        building.chmod(FOLDER_MODE)
        try:
            building.rename(holder)
        except OSError:
            if not target.exists():  # not a concurrent stager that won the rename
                raise
    finally:
        if building.exists():
            _remove_tree(building)


def _make_read_only(path: Path) -> None:
    if path.is_dir():
        for child in path.iterdir():
            _make_read_only(child)
        path.chmod(FOLDER_MODE)
    else:
        path.chmod(FILE_MODE)


def _remove_tree(path: Path) -> None:
    # Read-only folders cannot lose their entries: make them ours to empty first.
    for folder, _, _ in os.walk(path):
        os.chmod(folder, 0o700)  # noqa: PTH101 - os.walk hands str paths
    shutil.rmtree(path, ignore_errors=True)
