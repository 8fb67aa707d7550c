"""Live workspaces: the host API an episode's tools call (design: notes/issue12-design.md).

A workspace is a host-side tar snapshot; every action (seed, bash, read_file, write_file,
list_files, diff) is ONE fresh sandbox running the trusted helper over it. Files persist
between actions, processes never do. A step whose tree is unreadable or crosses a
workspace limit is not kept: the workspace stays as it was and the observation says why.

Limits named in ``ActionOutcome.limit``: ``timeout`` (the command's own), ``budget`` (the
episode's remaining wall time, ``wall_cap``), ``memory``, ``processes``, ``output``
(truncated to head + tail, or killed far past it), ``workspace_bytes``, ``workspace_files``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verifiers.live.layout import (
    LOCK,
    LiveWorkspace,
    WorkspaceUnsupported,
    build_seed,
    prepare_folder,
    write_seed_info,
)
from verifiers.live.runner import (
    GRACE_SECONDS,
    HelperReport,
    OutputCallback,
    copy_seconds,
    files_cap,
    helper_spec,
    run_helper,
)
from verifiers.live.tarball import (
    TreeRejected,
    TreeStats,
    changed_between,
    sanitise_tree,
    workspace_files,
)
from verifiers.sandbox.base import MiB, Sandbox
from verifiers.sandbox.capture import looks_like_alloc_failure
from verifiers.task import Candidate, TaskLanes
from verifiers.trusted_runner import new_nonce

BUDGET_EXHAUSTED = "BudgetExhausted"
FLOOD_FACTOR = 1024  # output past this many times output_bytes kills the command
SEED_MAX_FILES = 200_000  # entries a repository baked into an image may have
_REVISION = re.compile(r"[0-9A-Za-z._/^~@{}-]{1,200}")


class LiveWorkspaceError(RuntimeError):
    """Laying out or diffing a workspace failed for a reason that is not the agent's."""


@dataclass(frozen=True)
class ActionOutcome:
    text: str  # the observation text for the agent (already capped)
    ok: bool  # False → a StepError observation (error_type below)
    error_type: str = ""  # e.g. "PathRefused", "FileTooLarge", "NotFound", "WorkspaceLimit"
    exit_code: int | None = None
    limit: str | None = None  # see the module docstring
    changed: bool = False  # the snapshot was replaced
    backend: str = ""
    notes: tuple[str, ...] = ()
    files_written: tuple[str, ...] = ()  # paths the action created/changed (for the trajectory)
    files_deleted: tuple[str, ...] = ()
    stdout: str = ""  # bash: what the command printed (head + tail), also inside ``text``
    stderr: str = ""
    truncated: bool = False  # bash: the command was killed before it ended
    duration_seconds: float = 0.0  # sandbox time of the action


# --- plumbing ---------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One action at a time per workspace (several workers may serve one episode)."""
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _header(ws: LiveWorkspace, backend: str, op: str, args: dict[str, Any], files: int) -> dict:
    lim = ws.limits
    return {
        "nonce": new_nonce(),
        "op": op,
        "workdir": ws.workdir,
        "read_only": list(ws.read_only_paths),
        # bwrap: a pid namespace of our own, kill(-1) reaches everything; Docker: by uid.
        "kill": "pidns" if backend == "bwrap" else "uid",
        "args": args,
        "send_tree": "changed",
        "limits": {
            "bytes": lim.workspace_bytes,
            "files": files,
            "output": lim.output_bytes,
            "flood": lim.output_bytes * FLOOD_FACTOR,
            "pids": lim.pids,
            "read": lim.read_bytes,
        },
    }


@dataclass
class _Step:
    report: HelperReport
    changed: bool = False
    limit: str | None = None  # a workspace limit that made the step's tree not kept
    problem: str | None = None  # why the step's tree was not kept
    notes: tuple[str, ...] = ()
    standin_notes: tuple[str, ...] = ()  # host tools that stood in for the image (bwrap)


def _act(
    sandbox: Sandbox,
    ws: LiveWorkspace,
    op: str,
    args: dict[str, Any],
    *,
    seconds: float = 0.0,
    on_output: OutputCallback | None = None,
    cancel: threading.Event | None = None,
) -> _Step:
    """One helper run over the snapshot; keeps the tree it sends back if it may."""
    if not ws.snapshot.exists():
        raise LiveWorkspaceError(f"the workspace {ws.folder} has no snapshot (seed it first)")
    with _locked(ws.folder):
        files = files_cap(ws)
        header = _header(ws, sandbox.name, op, args, files)
        wall = seconds + copy_seconds(ws.snapshot)
        spec, standin_notes = helper_spec(ws, sandbox.name, wall=wall, files=files)
        spool = ws.folder / "incoming.tar"
        try:
            report = run_helper(
                sandbox,
                spec,
                header,
                [ws.snapshot],
                tree_spool=spool,
                tree_cap=_tree_cap(ws, files),
                on_output=on_output,
                cancel=cancel,
            )
            step = _keep_tree(ws, report, files)
            step.standin_notes = standin_notes
            return step
        finally:
            spool.unlink(missing_ok=True)


def _tree_cap(ws: LiveWorkspace, files: int) -> int:
    """Bytes a tree stream may take: content plus tar headers (pax ones for long names)."""
    return ws.limits.workspace_bytes + 2048 * files + MiB


def _keep_tree(ws: LiveWorkspace, report: HelperReport, files: int) -> _Step:
    step = _Step(report)
    result = report.result or {}
    over = result.get("over")
    if report.tree_over:
        step.limit = "workspace_bytes"
        step.problem = _over_text("workspace_bytes", None, ws.limits.workspace_bytes)
    elif isinstance(over, dict) and over.get("limit") in ("workspace_bytes", "workspace_files"):
        step.limit = str(over["limit"])
        step.problem = _over_text(step.limit, over.get("value"), over.get("max"))
    elif report.tree is not None:
        fresh = ws.folder / "snapshot.new"
        try:
            with open(report.tree, "rb") as source:
                stats = sanitise_tree(
                    source,
                    fresh,
                    max_bytes=ws.limits.workspace_bytes,
                    max_files=files,
                    blocked=ws.read_only_paths,
                )
        except TreeRejected as exc:
            step.limit, step.problem = exc.limit, str(exc)
        else:
            fresh.chmod(0o600)
            os.replace(fresh, ws.snapshot)  # atomic: a crash never leaves half a workspace
            step.changed, step.notes = True, tuple(stats.notes)
    elif report.problem:
        step.problem = report.problem
    return step


def _over_text(limit: str, value: Any, maximum: Any) -> str:
    if limit == "workspace_files":
        return (
            f"it would hold {value} files, folders and links, over the workspace's limit of "
            f"{maximum} (workspace_files)"
        )
    held = f"{value} bytes of files" if value is not None else "more bytes of files"
    return f"it would hold {held}, over the workspace's limit of {maximum} (workspace_bytes)"


def _note_lines(step: _Step) -> list[str]:
    result = step.report.result or {}
    notes = [str(n) for n in result.get("notes") or []][:20]
    return notes + list(step.notes)


def _error(text: str, error_type: str, backend: str, **fields: Any) -> ActionOutcome:
    return ActionOutcome(text=text, ok=False, error_type=error_type, backend=backend, **fields)


def _no_report(step: _Step, backend: str) -> ActionOutcome | None:
    """The outcome of a run whose helper never reported (killed, or its channel spoiled)."""
    report = step.report
    if report.result is not None and report.problem is None:
        return None
    sandbox = report.sandbox
    limit = "memory" if sandbox.memory_exceeded else "timeout" if sandbox.timed_out else None
    why = {
        "memory": "the sandbox went over its memory limit and was killed",
        "timeout": "the sandbox ran past its time limit and was killed",
    }.get(limit or "", report.problem or "the sandbox ended without a report")
    return _error(
        f"[{why}; nothing it changed was kept]",
        "ResourceLimit" if limit else "SandboxError",
        backend,
        limit=limit,
        notes=tuple(sandbox.notes),
        duration_seconds=sandbox.duration_seconds,
    )


def _step_failure(step: _Step, backend: str) -> ActionOutcome | None:
    """A helper that reported a refusal (StepError) or a step whose tree was not kept."""
    result = step.report.result or {}
    notes = tuple(_note_lines(step))
    duration = step.report.sandbox.duration_seconds
    if not result.get("ok", False):
        message = str(result.get("message") or "the action failed")
        error_type = str(result.get("error_type") or "SandboxError")
        return _error(message, error_type, backend, notes=notes, duration_seconds=duration)
    if step.problem:
        text = f"[the workspace was NOT updated: {step.problem}]"
        kind = "WorkspaceLimit" if step.limit else "SandboxError"
        return _error(text, kind, backend, limit=step.limit, notes=notes, duration_seconds=duration)
    return None


# --- the actions ------------------------------------------------------------------------


def seed(sandbox: Sandbox, ws: LiveWorkspace, task: TaskLanes) -> ActionOutcome:
    """Lay out the episode's workspace (text = its file listing). Raises
    ``WorkspaceUnsupported`` (the task) or ``LiveWorkspaceError`` (ours) when it cannot."""
    prepare_folder(ws)
    with _locked(ws.folder):
        standin_notes: tuple[str, ...] = ()
        if ws.from_image:
            stats, report = _seed_from_image(sandbox, ws)
        else:
            stats = build_seed(ws, task)
            if stats.bytes > ws.limits.workspace_bytes or stats.files > SEED_MAX_FILES:
                raise WorkspaceUnsupported("the task's files are over the workspace's limits")
            write_seed_info(ws, stats)
            _link(ws.seed_tar, ws.snapshot)
            files = files_cap(ws)
            header = _header(ws, sandbox.name, "seed", {}, files)
            spec, standin_notes = helper_spec(
                ws, sandbox.name, wall=copy_seconds(ws.snapshot), files=files
            )
            report = run_helper(sandbox, spec, header, [ws.snapshot])
    result = report.result or {}
    if report.problem or not result.get("ok"):
        reason = report.problem or result.get("message") or "unknown"
        stderr = report.sandbox.stderr.decode("utf-8", "replace")[-2000:] if report.sandbox else ""
        raise LiveWorkspaceError(f"the workspace could not be laid out: {reason} {stderr}".strip())
    return ActionOutcome(
        text=str(result.get("text", "")),
        ok=True,
        changed=True,
        backend=sandbox.name,
        notes=_unique(
            standin_notes
            + tuple(report.sandbox.notes)
            + tuple(stats.notes)
            + tuple(str(n) for n in result.get("notes") or [])
        ),
        duration_seconds=report.sandbox.duration_seconds,
    )


def _unique(notes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(note for note in notes if note))


def _seed_from_image(sandbox: Sandbox, ws: LiveWorkspace) -> tuple[TreeStats, HelperReport]:
    """The repository the image holds at the workdir, read in a sandbox into seed.tar."""
    header = _header(ws, sandbox.name, "seed", {}, SEED_MAX_FILES)
    header["send_tree"] = "always"
    spec, _ = helper_spec(
        ws, sandbox.name, wall=GRACE_SECONDS * 4, files=SEED_MAX_FILES, from_image=True
    )
    spool = ws.folder / "incoming.tar"
    try:
        report = run_helper(
            sandbox,
            spec,
            header,
            [],
            tree_spool=spool,
            tree_cap=_tree_cap(ws, SEED_MAX_FILES),
        )
        if report.tree is None:
            raise LiveWorkspaceError(
                f"the image's {ws.workdir} could not be read: "
                f"{report.problem or (report.result or {}).get('over') or 'no tree'}"
            )
        try:
            with open(report.tree, "rb") as source:
                stats = sanitise_tree(
                    source,
                    ws.seed_tar,
                    max_bytes=ws.limits.workspace_bytes,
                    max_files=SEED_MAX_FILES,
                )
        except TreeRejected as exc:
            raise WorkspaceUnsupported(f"the image's {ws.workdir}: {exc}") from exc
    finally:
        spool.unlink(missing_ok=True)
    ws.seed_tar.chmod(0o600)
    write_seed_info(ws, stats)
    _link(ws.seed_tar, ws.snapshot)
    return stats, report


def _link(source: Path, target: Path) -> None:
    """The first snapshot IS the seed (a hard link: snapshots are replaced, never edited)."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _command_seconds(timeout: Any, ws: LiveWorkspace) -> tuple[float, list[str]]:
    lim = ws.limits
    if timeout is None:
        return lim.command_seconds_default, []
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        note = f"timeout {timeout!r} is not a positive number of seconds: used the default"
        return lim.command_seconds_default, [note]
    if timeout > lim.command_seconds_max:
        return lim.command_seconds_max, [f"timeout lowered to {lim.command_seconds_max:g} s"]
    return float(timeout), []


def run_bash(
    sandbox: Sandbox,
    ws: LiveWorkspace,
    command: str,
    timeout: float | None,
    *,
    on_output: OutputCallback | None = None,
    wall_cap: float | None = None,
    cancel: threading.Event | None = None,
) -> ActionOutcome:
    """Run ``bash -c command`` in the workspace; ``on_output(stream, text)`` sees its output
    as it arrives; ``wall_cap`` (the episode's remaining budget) ends it as ``budget``;
    setting ``cancel`` kills it (nothing it changed is kept)."""
    backend = sandbox.name
    if not isinstance(command, str) or not command.strip():
        return _error("bash needs a non-empty command", "InvalidArguments", backend)
    seconds, notes = _command_seconds(timeout, ws)
    by_budget = False
    if wall_cap is not None:
        if wall_cap <= 0:
            text = "[not run: the episode's wall-time budget is used up]"
            return _error(text, BUDGET_EXHAUSTED, backend, limit="budget", truncated=True)
        if wall_cap < seconds:
            seconds, by_budget = float(wall_cap), True
    args: dict[str, Any] = {"command": command, "timeout": seconds}
    if wall_cap is not None:
        args["until"] = time.time() + wall_cap  # the budget's end, on the clock the helper reads
    step = _act(sandbox, ws, "bash", args, seconds=seconds, on_output=on_output, cancel=cancel)
    return _bash_outcome(step, ws, seconds, by_budget, notes, backend)


def _bash_outcome(
    step: _Step, ws: LiveWorkspace, seconds: float, by_budget: bool, notes: list[str], backend: str
) -> ActionOutcome:
    report = step.report
    result = report.result or {}
    omitted = result.get("omitted") or [0, 0]
    stdout = report.stdout.text(int(omitted[0]))
    stderr = report.stderr.text(int(omitted[1]))
    failure = _no_report(step, backend)
    killed = result.get("killed")
    exit_code = result.get("exit_code") if failure is None else None
    limit: str | None = None
    if killed == "timeout":
        limit = "budget" if by_budget else "timeout"
    elif killed == "budget":  # the helper's clock reached the budget's end first
        limit = "budget"
    elif killed in ("processes", "output"):
        limit = killed
    elif report.sandbox.memory_exceeded or looks_like_alloc_failure(
        exit_code, (report.stderr.head + report.stderr.tail)
    ):
        limit = "memory"
    elif max(omitted) > 0:
        limit = "output"
    status = {
        "timeout": f"[killed: the command ran past its {seconds:g} s timeout]",
        "budget": "[killed: the episode's wall-time budget ran out]",
        "processes": f"[killed: the command started more than {ws.limits.pids - 4} processes]",
        "output": f"[killed: more than {ws.limits.output_bytes * FLOOD_FACTOR} bytes of output]",
    }.get(str(limit if killed == "timeout" else killed)) or (
        f"[exit code {exit_code}]" if exit_code is not None else ""
    )
    lines = [stdout.rstrip("\n")] if stdout else []
    if stderr:
        lines.append("[stderr]\n" + stderr.rstrip("\n"))
    if limit == "memory" and failure is None:
        status += f" [memory limit: {ws.limits.memory_bytes // MiB} MiB]"
    if max(omitted) > 0:
        half = ws.limits.output_bytes // 2048
        lines.append(f"[output truncated: the first and last {half} KiB of a stream are shown]")
    outcome_notes = list(step.standin_notes) + notes + _note_lines(step)
    if failure is not None:
        lines.append(failure.text)
        return ActionOutcome(
            **{**failure.__dict__, "text": "\n".join(filter(None, lines)), "stdout": stdout,
               "stderr": stderr, "truncated": True, "limit": failure.limit or limit,
               "notes": failure.notes + tuple(outcome_notes)},
        )  # fmt: skip
    if status:
        lines.append(status)
    ok, error_type = True, ""
    if step.problem:
        lines.append(f"[the workspace was NOT updated: {step.problem}]")
        ok, error_type = False, "WorkspaceLimit" if step.limit else "SandboxError"
        limit = step.limit or limit
    return ActionOutcome(
        text="\n".join(lines),
        ok=ok,
        error_type=error_type,
        exit_code=exit_code,
        limit=limit,
        changed=step.changed,
        backend=backend,
        notes=tuple(outcome_notes),
        files_written=tuple(result.get("written") or ()) if step.changed else (),
        files_deleted=tuple(result.get("deleted") or ()) if step.changed else (),
        stdout=stdout,
        stderr=stderr,
        truncated=killed is not None,
        duration_seconds=report.sandbox.duration_seconds,
    )


def _path_arg(path: Any) -> str | None:
    return path if isinstance(path, str) else None


def read_file(
    sandbox: Sandbox, ws: LiveWorkspace, path: str, offset: int | None, limit: int | None
) -> ActionOutcome:
    """Lines [offset, offset + limit) of a text file (offset: lines to skip, 0-based; both
    optional), at most ``read_bytes``; paths leaving the workspace are refused."""
    backend = sandbox.name
    if _path_arg(path) is None:
        return _error("read_file needs a path", "InvalidArguments", backend)
    for name, value in (("offset", offset), ("limit", limit)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            return _error(f"{name} must be a non-negative integer", "InvalidArguments", backend)
    step = _act(sandbox, ws, "read_file", {"path": path, "offset": offset, "limit": limit})
    failure = _no_report(step, backend) or _step_failure(step, backend)
    if failure is not None:
        return failure
    result = step.report.result or {}
    text = str(result.get("text", ""))
    limit_hit = None
    if result.get("truncated"):
        limit_hit = "output"
        text += f"\n[truncated at {ws.limits.read_bytes} bytes: read the rest with offset/limit]"
    return ActionOutcome(
        text=text,
        ok=True,
        limit=limit_hit,
        backend=backend,
        notes=tuple(_note_lines(step)),
        duration_seconds=step.report.sandbox.duration_seconds,
    )


def write_file(
    sandbox: Sandbox,
    ws: LiveWorkspace,
    path: str,
    content: str,
    *,
    wall_cap: float | None = None,
) -> ActionOutcome:
    """Create or replace a file (parent folders created); read-only and escaping paths are
    refused. ``wall_cap`` (the episode's remaining budget): a write that would land after it
    is not made (``budget``)."""
    backend = sandbox.name
    if _path_arg(path) is None or not isinstance(content, str):
        return _error("write_file needs a path and a text content", "InvalidArguments", backend)
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > ws.limits.workspace_bytes:
        text = f"the content ({size} bytes) is larger than the workspace limit"
        return _error(text, "FileTooLarge", backend, limit="workspace_bytes")
    if wall_cap is not None and wall_cap <= 0:
        text = "[not written: the episode's wall-time budget is used up]"
        return _error(text, BUDGET_EXHAUSTED, backend, limit="budget", truncated=True)
    args: dict[str, Any] = {"path": path, "content": content}
    if wall_cap is not None:
        args["until"] = time.time() + wall_cap
    step = _act(sandbox, ws, "write_file", args)
    failure = _no_report(step, backend) or _step_failure(step, backend)
    if failure is not None and failure.error_type == BUDGET_EXHAUSTED:
        return replace(failure, limit="budget", truncated=True)
    if failure is not None:
        return failure
    result = step.report.result or {}
    written = tuple(result.get("written") or ())
    return ActionOutcome(
        text=f"wrote {size} bytes to {written[-1] if written else path}",
        ok=True,
        changed=step.changed,
        backend=backend,
        notes=tuple(_note_lines(step)),
        files_written=written,
        duration_seconds=step.report.sandbox.duration_seconds,
    )


def list_files(sandbox: Sandbox, ws: LiveWorkspace, path: str | None) -> ActionOutcome:
    """A bounded recursive listing (type, size, path; ``.git`` folders not entered)."""
    backend = sandbox.name
    if path is not None and _path_arg(path) is None:
        return _error("list_files' path must be a string", "InvalidArguments", backend)
    step = _act(sandbox, ws, "list_files", {"path": path or "."})
    failure = _no_report(step, backend) or _step_failure(step, backend)
    if failure is not None:
        return failure
    result = step.report.result or {}
    return ActionOutcome(
        text=str(result.get("text", "")),
        ok=True,
        backend=backend,
        notes=tuple(_note_lines(step)),
        duration_seconds=step.report.sandbox.duration_seconds,
    )


# --- the end of an episode --------------------------------------------------------------


def workspace_candidate(ws: LiveWorkspace) -> tuple[Candidate, list[str]]:
    """terminal_task: the snapshot's regular files as the candidate (links dropped, noted)."""
    with _locked(ws.folder):
        files, notes = workspace_files(ws.snapshot)
    return Candidate.of_workspace(dict(files)), notes


def artifact_candidate(ws: LiveWorkspace) -> tuple[Candidate, list[str], list[str]]:
    """artifact_task: the files the agent created or changed since the seed, as an artifact
    (the seed's untouched files are not what it produced; links are never files of it, and
    nothing outside the workspace is in its snapshot). Returns the candidate, every changed
    path (links and removals included, for the contract's surfaces) and notes."""
    with _locked(ws.folder):
        changed = changed_between(ws.seed_tar, ws.snapshot)
        files, notes = workspace_files(ws.snapshot)
    wanted = set(changed)
    produced = {path: item for path, item in files.items() if path in wanted}
    return Candidate.of_artifact(produced), changed, notes


def changed_paths(ws: LiveWorkspace) -> list[str]:
    """Files and links added, changed or removed since the seed (workspace-relative)."""
    with _locked(ws.folder):
        return changed_between(ws.seed_tar, ws.snapshot)


def repo_diff(sandbox: Sandbox, ws: LiveWorkspace, task: TaskLanes) -> tuple[str, list[str]]:
    """repo_patch: ``git diff --binary`` of the workspace's repository against base_commit,
    computed in a fresh sandbox from the PRISTINE repository (the seed's .git, from the
    pack's assets or the image), never the agent's own .git. Returns the patch text and
    the changed paths (relative to the repository)."""
    base = str(task.public.get("base_commit") or "HEAD")
    if not _REVISION.fullmatch(base) or base.startswith("-"):
        raise LiveWorkspaceError(f"base_commit {base!r} is not a revision git can take")
    with _locked(ws.folder):
        files = files_cap(ws)
        header = _header(ws, sandbox.name, "diff", {"repo": ws.repo_path, "base": base}, files)
        wall = 2 * copy_seconds(ws.snapshot, ws.seed_tar) + 60.0
        tmp = 3 * ws.seed_tar.stat().st_size + 64 * MiB
        spec, _ = helper_spec(ws, sandbox.name, wall=wall, files=files, tmp_bytes=tmp)
        report = run_helper(sandbox, spec, header, [ws.snapshot, ws.seed_tar])
    result = report.result or {}
    if report.problem or not result.get("ok"):
        why = report.problem or result.get("message") or "unknown"
        raise LiveWorkspaceError(f"the workspace's diff could not be computed: {why}")
    patch = result.get("patch") or {}
    if patch.get("bytes") != len(report.patch):
        raise LiveWorkspaceError("the workspace's diff arrived damaged")
    paths = sorted(str(p) for p in result.get("paths") or [])
    return bytes(report.patch).decode("utf-8", "replace"), paths


def destroy(ws_folder: Path) -> None:
    """Remove an episode's workspace folder (idempotent)."""
    folder = Path(ws_folder)
    if not folder.exists():
        return
    for dirpath, _, _ in os.walk(folder):
        with contextlib.suppress(OSError):
            os.chmod(dirpath, 0o700)  # noqa: PTH101 - read-only copies lose no entries otherwise
    shutil.rmtree(folder, ignore_errors=True)
