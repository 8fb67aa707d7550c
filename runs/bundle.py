"""Candidate bundles: JSON Lines of candidates, plain or inside a .zip / .tar.gz.

Each line is ``{"task_id": ..., "sample": n, "candidate": {...}, "usage": {...}}`` (``sample``
optional, 0-based: several candidates for one task, for pass@k); an optional line
``{"run": {...}}`` carries run metadata and run-level usage (DESIGN.md §4). Parsing checks the
shape of every line and collects every problem with file, line and field; whether the task ids
exist and the kinds fit their families is checked against the contract version by
``runs.services``. Nothing here touches the database.
"""

from __future__ import annotations

import base64
import binascii
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from packs.compiler.archive import ArchiveError, ArchiveLimits, extract_archive, find_pack_root
from packs.compiler.digest import contains_lone_surrogate, contains_nul
from packs.compiler.limits import human_bytes
from packs.compiler.strict_json import StrictJsonRefused, strict_loads
from runs.budgets import usage_figure_problem
from runs.bundle_artifact import (
    ARTIFACT_KEYS,
    MAX_ARTIFACT_FILES,
    artifact_files_from_map,
    folder_problems,
)
from verifiers.scratch_files import unsafe_relative_path
from verifiers.task import Candidate, WorkspaceFile

CANDIDATES_NAME = "candidates.jsonl"
CANDIDATE_KINDS = ("text", "code", "patch", "workspace", "artifact")
UNPAIRED_SURROGATE = "contains an unpaired surrogate escape (such as \\ud800), which is not text"
USAGE_KEYS = ("wall_seconds", "input_tokens", "output_tokens", "usd")
METADATA_KEYS = ("agent_name", "agent_version", "model_name", "notes")
LINE_KEYS = ("task_id", "sample", "candidate", "usage")
MAX_PROBLEMS = 50
MAX_WORKSPACE_FILES = 2_000


@dataclass(frozen=True)
class BundleProblem:
    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file} line {self.line}"
        return (
            f"{where}, {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class BundleRejected(Exception):
    """The bundle was refused; ``problems`` names file, line and field of each fault."""

    def __init__(self, problems: list[BundleProblem]) -> None:
        self.problems = problems[:MAX_PROBLEMS]
        self.more = max(0, len(problems) - MAX_PROBLEMS)
        first = str(problems[0]) if problems else "the bundle was refused"
        extra = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        super().__init__(first + extra)


@dataclass(frozen=True)
class BundleLine:
    line: int | None
    task_id: str
    candidate: Candidate
    usage: dict[str, float] = field(default_factory=dict)
    file: str = "candidates"  # where the line came from, for messages
    # Which of the task's candidates this is (0, 1, …); one candidate per task is sample 0.
    sample: int = 0


@dataclass
class ParsedBundle:
    metadata: dict[str, str] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    lines: list[BundleLine] = field(default_factory=list)


@dataclass(frozen=True)
class BundleLimits:
    max_bundle_bytes: int
    max_candidate_bytes: int
    max_line_bytes: int

    @classmethod
    def from_settings(cls) -> BundleLimits:
        candidate = settings.SECUREBENCH_MAX_CANDIDATE_BYTES
        return cls(
            max_bundle_bytes=settings.SECUREBENCH_MAX_BUNDLE_BYTES,
            max_candidate_bytes=candidate,
            # A line holds one candidate plus its JSON escaping (base64 is 4/3 larger).
            max_line_bytes=2 * candidate + 64 * 1024,
        )


class _Problems:
    def __init__(self, file: str) -> None:
        self.file = file
        self.items: list[BundleProblem] = []

    def add(self, line: int | None, field_name: str, message: str) -> None:
        self.items.append(BundleProblem(self.file, line, field_name, message))


# --- entry points ------------------------------------------------------------------------------


def parse_bundle_file(
    path: Path, *, display_name: str, limits: BundleLimits | None = None
) -> ParsedBundle:
    """Parse an uploaded bundle: ``.jsonl`` as is, or an archive with ``candidates.jsonl``."""
    limits = limits or BundleLimits.from_settings()
    size = path.stat().st_size
    if size > limits.max_bundle_bytes:
        raise BundleRejected(
            [
                BundleProblem(
                    display_name,
                    None,
                    "",
                    f"is {human_bytes(size)}, over the limit of "
                    f"{human_bytes(limits.max_bundle_bytes)}",
                )
            ]
        )
    if _looks_like_archive(path):
        return _parse_archive_bundle(path, display_name, limits)
    with path.open("rb") as stream:
        return _parse_lines(stream, display_name, limits, bundle_root=None)


def parse_candidate_objects(
    objects: Iterable[Any], *, file_name: str = "request", limits: BundleLimits | None = None
) -> list[BundleLine]:
    """Validate a batch of already-decoded line objects (the API's candidates array)."""
    limits = limits or BundleLimits.from_settings()
    problems = _Problems(file_name)
    lines: list[BundleLine] = []
    for index, value in enumerate(objects, start=1):
        parsed = _check_line(value, index, problems, limits, bundle_root=None, allow_run=False)
        if isinstance(parsed, BundleLine):
            lines.append(parsed)
    _check_duplicates(lines, problems)
    if problems.items:
        raise BundleRejected(problems.items)
    return lines


# --- archives ---------------------------------------------------------------------------------


def _looks_like_archive(path: Path) -> bool:
    with path.open("rb") as stream:
        head = stream.read(4)
    return head.startswith(b"PK\x03\x04") or head.startswith(b"\x1f\x8b")


def _parse_archive_bundle(path: Path, display_name: str, limits: BundleLimits) -> ParsedBundle:
    archive_limits = ArchiveLimits(
        max_archive_bytes=limits.max_bundle_bytes,
        max_members=settings.SECUREBENCH_MAX_ARCHIVE_MEMBERS,
        max_unpacked_bytes=4 * limits.max_bundle_bytes,
    )
    scratch = Path(tempfile.mkdtemp(prefix="bundle-"))
    try:
        try:
            extract_archive(path, scratch, limits=archive_limits, display_name=display_name)
            root = find_pack_root(scratch, CANDIDATES_NAME, display_name=display_name)
        except ArchiveError as exc:
            raise BundleRejected([BundleProblem(display_name, None, "", str(exc))]) from None
        with (root / CANDIDATES_NAME).open("rb") as stream:
            return _parse_lines(stream, f"{display_name}:{CANDIDATES_NAME}", limits, root)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# --- lines --------------------------------------------------------------------------------------


def _read_lines(stream: Any, limit: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, content) pairs; content None for a line over the byte limit."""
    number = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            # Skip the rest of the over-long line without holding it in memory.
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(limit + 1)
            yield number, None
            continue
        yield number, raw


def _parse_lines(
    stream: Any, file_name: str, limits: BundleLimits, bundle_root: Path | None
) -> ParsedBundle:
    problems = _Problems(file_name)
    bundle = ParsedBundle()
    seen_run_line: int | None = None
    for number, raw in _read_lines(stream, limits.max_line_bytes):
        if raw is None:
            problems.add(number, "", f"is longer than {human_bytes(limits.max_line_bytes)}")
            continue
        value = _decode_json(raw, number, problems)
        if value is _INVALID or (isinstance(value, str) and not value):
            continue
        parsed = _check_line(value, number, problems, limits, bundle_root, allow_run=True)
        if isinstance(parsed, BundleLine):
            bundle.lines.append(parsed)
        elif isinstance(parsed, tuple):
            if seen_run_line is not None:
                problems.add(
                    number, "run", f"a second run line (the first is line {seen_run_line})"
                )
                continue
            seen_run_line = number
            bundle.metadata, bundle.usage = parsed
        if len(problems.items) >= MAX_PROBLEMS:
            break
    if not bundle.lines and not problems.items:
        problems.add(None, "", "holds no candidates")
    _check_duplicates(bundle.lines, problems)
    if problems.items:
        raise BundleRejected(problems.items)
    return bundle


_INVALID = object()


def _decode_json(raw: bytes, number: int, problems: _Problems) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.add(number, "", f"is not valid UTF-8 (byte {exc.start} of the line)")
        return _INVALID
    text = text.removeprefix("\ufeff") if number == 1 else text
    if not text.strip():
        return ""  # blank lines are allowed (editors add a trailing one)
    try:
        return strict_loads(text)
    except json.JSONDecodeError as exc:
        problems.add(number, "", f"invalid JSON: {exc.msg} (column {exc.colno})")
    except StrictJsonRefused as exc:
        problems.add(number, "", f"invalid JSON: {exc}")
    except (ValueError, RecursionError):
        problems.add(number, "", "invalid JSON: a number is too long or the line nests too deep")
    return _INVALID


def _check_line(
    value: Any,
    number: int,
    problems: _Problems,
    limits: BundleLimits,
    bundle_root: Path | None,
    *,
    allow_run: bool,
) -> BundleLine | tuple[dict[str, str], dict[str, float]] | None:
    if not isinstance(value, dict):
        problems.add(number, "", "a candidate line must be a JSON object")
        return None
    if contains_nul(value):
        problems.add(number, "", "contains a NUL character (\\u0000), which text cannot hold")
        return None
    if contains_lone_surrogate(value):
        problems.add(number, "", UNPAIRED_SURROGATE)
        return None
    if allow_run and "run" in value:
        return _check_run_line(value, number, problems)
    before = len(problems.items)
    for key in value:
        if key not in LINE_KEYS:
            allowed = ", ".join(LINE_KEYS) + (" (or a single run line)" if allow_run else "")
            problems.add(number, key, f"is not a candidate line key (allowed: {allowed})")
    task_id = value.get("task_id")
    if not isinstance(task_id, str) or not task_id.strip():
        problems.add(number, "task_id", "is required and must be a non-empty string")
    sample = _check_sample(value.get("sample", 0), number, problems)
    usage = _check_usage(value.get("usage", {}), number, "usage", problems)
    candidate = _check_candidate(value.get("candidate"), number, problems, limits, bundle_root)
    if len(problems.items) > before or candidate is None or not isinstance(task_id, str):
        return None
    return BundleLine(
        line=number,
        task_id=task_id,
        candidate=candidate,
        usage=usage,
        file=problems.file,
        sample=sample,
    )


def max_samples() -> int:
    """Samples per task a run may carry at most (``SECUREBENCH_MAX_SAMPLES``)."""
    return settings.SECUREBENCH_MAX_SAMPLES


def _check_sample(value: Any, number: int, problems: _Problems) -> int:
    # bool is an int in Python, but `"sample": true` is a mistake, not sample 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.add(number, "sample", "must be a non-negative integer (0 is the first sample)")
        return 0
    if value >= max_samples():
        problems.add(
            number,
            "sample",
            f"{value} is out of range: samples are numbered 0 to {max_samples() - 1}",
        )
        return 0
    return value


def _check_run_line(
    value: dict[str, Any], number: int, problems: _Problems
) -> tuple[dict[str, str], dict[str, float]] | None:
    before = len(problems.items)
    if len(value) != 1:
        problems.add(number, "run", "a run line holds only the key 'run'")
    run = value["run"]
    if not isinstance(run, dict):
        problems.add(number, "run", "must be an object")
        return None
    metadata: dict[str, str] = {}
    for key, item in run.items():
        if key == "usage":
            continue
        if key not in METADATA_KEYS:
            allowed = ", ".join((*METADATA_KEYS, "usage"))
            problems.add(number, f"run.{key}", f"is not a run key (allowed: {allowed})")
        elif not isinstance(item, str):
            problems.add(number, f"run.{key}", "must be a string")
        else:
            metadata[key] = item.strip()
    usage = _check_usage(run.get("usage", {}), number, "run.usage", problems)
    return None if len(problems.items) > before else (metadata, usage)


def _check_usage(value: Any, number: int, where: str, problems: _Problems) -> dict[str, float]:
    if not isinstance(value, dict):
        problems.add(number, where, "must be an object")
        return {}
    usage: dict[str, float] = {}
    for key, item in value.items():
        if key not in USAGE_KEYS:
            problems.add(
                number,
                f"{where}.{key}",
                "is not a usage key (allowed: " + ", ".join(USAGE_KEYS) + ")",
            )
        elif problem := usage_figure_problem(item):
            problems.add(number, f"{where}.{key}", problem)
        else:
            usage[key] = item
    return usage


def _check_candidate(
    value: Any,
    number: int,
    problems: _Problems,
    limits: BundleLimits,
    bundle_root: Path | None,
) -> Candidate | None:
    if not isinstance(value, dict):
        problems.add(number, "candidate", "is required and must be an object with a 'kind'")
        return None
    kind = value.get("kind")
    if kind not in CANDIDATE_KINDS:
        problems.add(number, "candidate.kind", "must be one of " + ", ".join(CANDIDATE_KINDS))
        return None
    if kind == "workspace":
        return _check_workspace(value, number, problems, limits, bundle_root)
    if kind == "artifact":
        return _check_artifact(value, number, problems, limits, bundle_root)
    allowed = ("kind", kind)
    extra = [key for key in value if key not in allowed]
    for key in extra:
        problems.add(
            number, f"candidate.{key}", f"is not a key of a {kind} candidate (use '{kind}')"
        )
    content = value.get(kind)
    if not isinstance(content, str):
        problems.add(number, f"candidate.{kind}", "is required and must be a string")
        return None
    if len(content.encode("utf-8", "surrogatepass")) > limits.max_candidate_bytes:
        problems.add(
            number,
            f"candidate.{kind}",
            f"is larger than {human_bytes(limits.max_candidate_bytes)}",
        )
        return None
    if contains_lone_surrogate(content):
        problems.add(number, f"candidate.{kind}", "contains an unpaired surrogate escape")
        return None
    return None if extra else Candidate(kind=kind, text=content)


# --- workspaces ----------------------------------------------------------------------------------


def _check_workspace(
    value: dict[str, Any],
    number: int,
    problems: _Problems,
    limits: BundleLimits,
    bundle_root: Path | None,
) -> Candidate | None:
    sources = [key for key in ("files", "archive", "directory") if key in value]
    for key in value:
        if key not in ("kind", "files", "archive", "directory"):
            problems.add(number, f"candidate.{key}", "is not a key of a workspace candidate")
    if len(sources) != 1:
        problems.add(
            number,
            "candidate",
            "a workspace candidate has exactly one of files, archive, directory",
        )
        return None
    source = sources[0]
    where = f"candidate.{source}"
    if source == "files":
        files = _files_from_map(value["files"], number, problems, limits)
    elif bundle_root is None:
        problems.add(number, where, "only bundle archives can carry workspace archives or folders")
        return None
    else:
        files = _files_from_bundle(
            value[source], source, number, problems, limits, bundle_root, MAX_WORKSPACE_FILES
        )
    return None if files is None else Candidate(kind="workspace", files=files)


def _check_artifact(
    value: dict[str, Any],
    number: int,
    problems: _Problems,
    limits: BundleLimits,
    bundle_root: Path | None,
) -> Candidate | None:
    """An artifact: a ``files`` map (runs.bundle_artifact), or in a bundle archive an
    ``archive`` or ``directory`` of it; either way held to the artifact path rules."""

    def add(field_name: str, message: str) -> None:
        problems.add(number, field_name, message)

    for key in value:
        if key not in ARTIFACT_KEYS:
            add(f"candidate.{key}", "is not a key of an artifact candidate")
    sources = [key for key in ("files", "archive", "directory") if key in value]
    if len(sources) != 1:
        add("candidate", "an artifact candidate has exactly one of files, archive, directory")
        return None
    source = sources[0]
    if source == "files":
        files = artifact_files_from_map(value["files"], add, limits.max_candidate_bytes)
    elif bundle_root is None:
        add(f"candidate.{source}", "only bundle archives can carry artifact archives or folders")
        return None
    else:
        files = _files_from_bundle(
            value[source], source, number, problems, limits, bundle_root, MAX_ARTIFACT_FILES
        )
        if files is not None and folder_problems(files, f"candidate.{source}", add):
            return None
    return None if files is None else Candidate(kind="artifact", files=files)


def _files_from_map(
    value: Any, number: int, problems: _Problems, limits: BundleLimits
) -> dict[str, WorkspaceFile] | None:
    if not isinstance(value, dict):
        problems.add(number, "candidate.files", "must be an object mapping paths to contents")
        return None
    files: dict[str, WorkspaceFile] = {}
    total = 0
    before = len(problems.items)
    for path, entry in value.items():
        where = f"candidate.files.{path}"
        unsafe = unsafe_relative_path(path)
        if unsafe:
            problems.add(number, where, unsafe)
            continue
        workspace_file = _workspace_file(entry, number, where, problems)
        if workspace_file is not None:
            files[path] = workspace_file
            total += len(workspace_file.content)
    if len(files) > MAX_WORKSPACE_FILES:
        problems.add(number, "candidate.files", f"holds more than {MAX_WORKSPACE_FILES} files")
    if total > limits.max_candidate_bytes:
        message = f"add up to more than {human_bytes(limits.max_candidate_bytes)}"
        problems.add(number, "candidate.files", message)
    return None if len(problems.items) > before else files


def _workspace_file(
    entry: Any, number: int, where: str, problems: _Problems
) -> WorkspaceFile | None:
    if isinstance(entry, str):
        return WorkspaceFile(entry.encode("utf-8", "surrogatepass"))
    if not isinstance(entry, dict):
        problems.add(number, where, "must be a string or an object with content or content_b64")
        return None
    unknown = [key for key in entry if key not in ("content", "content_b64", "mode")]
    for key in unknown:
        problems.add(number, f"{where}.{key}", "is not a file key (content, content_b64, mode)")
    mode = _parse_mode(entry.get("mode", "644"))
    if mode is None:
        problems.add(number, f"{where}.mode", 'must be an octal mode such as "644" or "755"')
    has_text, has_b64 = "content" in entry, "content_b64" in entry
    if has_text == has_b64:
        problems.add(number, where, "needs exactly one of content and content_b64")
        return None
    if has_text:
        if not isinstance(entry["content"], str):
            problems.add(number, f"{where}.content", "must be a string")
            return None
        content = entry["content"].encode("utf-8", "surrogatepass")
    else:
        try:
            content = base64.b64decode(entry["content_b64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            problems.add(number, f"{where}.content_b64", "is not valid base64")
            return None
    if unknown or mode is None:
        return None
    return WorkspaceFile(content, mode)


def _parse_mode(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o777:
        return value
    if isinstance(value, str) and value and len(value) <= 4:
        try:
            mode = int(value, 8)
        except ValueError:
            return None
        return mode if 0 <= mode <= 0o777 else None
    return None


def _files_from_bundle(
    reference: Any,
    source: str,
    number: int,
    problems: _Problems,
    limits: BundleLimits,
    bundle_root: Path,
    max_files: int,
) -> dict[str, WorkspaceFile] | None:
    where = f"candidate.{source}"
    unsafe = unsafe_relative_path(reference)
    if unsafe:
        problems.add(number, where, unsafe)
        return None
    target = bundle_root.joinpath(*reference.split("/"))
    if source == "archive":
        if not target.is_file() or target.is_symlink():
            problems.add(number, where, f"{reference} is not a file in the bundle")
            return None
        scratch = Path(tempfile.mkdtemp(prefix="workspace-"))
        try:
            archive_limits = ArchiveLimits(
                max_archive_bytes=limits.max_candidate_bytes,
                max_members=max_files,
                max_unpacked_bytes=limits.max_candidate_bytes,
            )
            try:
                extract_archive(target, scratch, limits=archive_limits, display_name=reference)
            except ArchiveError as exc:
                problems.add(number, where, str(exc))
                return None
            return _collect_folder(scratch, where, number, problems, limits, max_files)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    if not target.is_dir() or target.is_symlink():
        problems.add(number, where, f"{reference} is not a folder in the bundle")
        return None
    return _collect_folder(target, where, number, problems, limits, max_files)


def _collect_folder(
    root: Path,
    where: str,
    number: int,
    problems: _Problems,
    limits: BundleLimits,
    max_files: int,
) -> dict[str, WorkspaceFile] | None:
    # The archive extractor already refused links and devices; a folder is checked here.
    files: dict[str, WorkspaceFile] = {}
    total = 0
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            problems.add(number, where, f"{relative} is a link or a special file")
            return None
        if path.is_dir():
            continue
        total += path.stat().st_size
        if total > limits.max_candidate_bytes or len(files) >= max_files:
            message = (
                f"is larger than {human_bytes(limits.max_candidate_bytes)} or has too many files"
            )
            problems.add(number, where, message)
            return None
        mode = 0o755 if path.stat().st_mode & 0o100 else 0o644
        files[relative] = WorkspaceFile(path.read_bytes(), mode)
    return files


def sample_label(task_id: str, sample: int) -> str:
    """How messages name one candidate: the task alone for sample 0, else task and sample."""
    return f"{task_id!r}" if sample == 0 else f"{task_id!r} sample {sample}"


def _check_duplicates(lines: list[BundleLine], problems: _Problems) -> None:
    # One candidate per (task, sample): a task's samples are told apart by their number.
    first_line: dict[tuple[str, int], int | None] = {}
    for item in lines:
        key = (item.task_id, item.sample)
        if key in first_line:
            problems.add(
                item.line,
                "sample" if item.sample else "task_id",
                f"{sample_label(*key)} already has a candidate on line {first_line[key]}",
            )
        else:
            first_line[key] = item.line
