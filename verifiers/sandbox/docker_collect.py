"""Reading a Docker run's result files out of its container (step 3 of docker.py's flow).

Files are read while the container runs, after every process of the run is dead: the
archive API cannot see tmpfs mounts and the tmpfs is gone once the container stops. Only
regular files named by the spec come back; a path that is unsafe, runs through a symlink,
or names anything but a regular file is refused, never followed.
"""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Callable
from typing import Any, BinaryIO

from verifiers.sandbox.base import Limits
from verifiers.sandbox.docker_exec import KILL_ALL, LINKED_PATHS, DockerExec, safe_relpath

# (exit code, stdout, stderr) of a short trusted exec run to completion
RunExec = Callable[..., tuple[int | None, bytes, bytes]]
StartExec = Callable[..., DockerExec]
SPOOL_IN_MEMORY = 16 << 20


def collect_files(
    run_exec: RunExec,
    start_exec: StartExec,
    *,
    wanted: tuple[str, ...],
    workdir: str,
    limits: Limits,
    notes: list[str],
) -> tuple[dict[str, bytes], list[str]]:
    """Kill what is left of the run, then tar the ``wanted`` paths out of ``workdir``;
    (the regular files read, the paths refused)."""
    code, _, _ = run_exec(["sh", "-c", KILL_ALL])
    if code != 0:
        notes.append("collection skipped: the run's processes could not be stopped")
        return {}, []
    refused = [p for p in wanted if not safe_relpath(p)]
    paths = [p for p in wanted if safe_relpath(p)]
    # tar follows a symlinked folder on the way to a path; refuse any path with a link in
    # it (every process of the run is dead, so nothing can swap one in afterwards).
    _, out, _ = run_exec(["sh", "-c", LINKED_PATHS, "sh", *paths], workdir=workdir)
    linked = set(out.decode("utf-8", "replace").splitlines())
    refused += [p for p in paths if p in linked]
    paths = [p for p in paths if p not in linked]
    if not paths:
        return {}, refused
    # A tar of regular files is at most their capped sizes plus headers: more is not read.
    budget = len(paths) * (limits.file_size_bytes + 8192) + 65536
    with _tar_of(start_exec, paths, workdir, budget) as spool:
        collected = _regular_files(spool, set(paths), refused, limits.output_bytes, notes)
    return collected, refused


def _tar_of(
    start_exec: StartExec, paths: list[str], workdir: str, budget: int
) -> tempfile.SpooledTemporaryFile[bytes]:
    ex = start_exec(
        ["tar", "-c", "-f", "-", "--no-recursion", "--ignore-failed-read", "--", *paths],
        workdir=workdir,
    )
    ex.close_stdin()
    spool: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY)  # noqa: SIM115
    left = [budget]

    def keep(data: bytes) -> None:
        if left[0] > 0:
            spool.write(data[: left[0]])
            left[0] -= len(data)

    ex.pump(keep, lambda _data: None)
    ex.close()
    spool.seek(0)
    return spool


def _regular_files(
    spool: BinaryIO | Any, wanted: set[str], refused: list[str], max_bytes: int, notes: list[str]
) -> dict[str, bytes]:
    """The wanted regular files of the tar, each read up to ``max_bytes``; anything else
    the tar holds under a wanted name joins ``refused``."""
    collected: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=spool, mode="r:") as tar:
            for member in tar:
                name = member.name.removeprefix("./")
                if name not in wanted or name in collected or name in refused:
                    continue
                if not member.isreg():
                    refused.append(name)
                    continue
                fh = tar.extractfile(member)
                collected[name] = fh.read(max_bytes) if fh else b""
    except tarfile.TarError as exc:
        notes.append(f"collection incomplete: {exc}")
    return collected


__all__ = ["collect_files"]
