"""evaluation.yaml: reading an author's evaluation and checking every field.

An evaluation (seed 004: "how was a submitted artifact scored?") is uploaded apart from the
packs it scores: a folder with ``evaluation.yaml``, its program under ``program/`` and its
sealed data under ``sealed/``. Every problem names the file, the line and the field, and all
of them are reported in one pass, as a pack's manifest's are.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packs.compiler.errors import PackError, Problem
from packs.compiler.limits import CompileLimits
from packs.compiler.manifest import located_problem, read_yaml_mapping
from verifiers.families.base import FieldProblem, is_number

MANIFEST_NAME = "evaluation.yaml"
PROGRAM_FOLDER = "program"
SEALED_FOLDER = "sealed"
TOP_LEVEL = frozenset({MANIFEST_NAME, PROGRAM_FOLDER, SEALED_FOLDER})
KEYS = (
    "id",
    "version",
    "title",
    "description",
    "scores",
    "scope",
    "metrics",
    "program",
    "reads",
    "candidate_program",
)
# The id is part of a key (``id@version``) that contracts name and URLs carry.
ID_PATTERN = re.compile(r"\A[a-z0-9][a-z0-9._-]{0,62}\Z")
METRIC_PATTERN = re.compile(r"\A[a-z][a-z0-9_@.-]{0,62}\Z")
PACK_ID_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
SCOPES = ("task", "run")
# The site's own scorers (runs.evaluators) are evaluations of the same registry: an upload
# may not take their names.
BUILT_IN_NAMES = frozenset({"securebench", "securebench-pass-at-k"})
DIRECTIONS = ("higher", "lower")
MAX_VERSION = 2_147_483_647
MAX_METRICS = 50
MAX_TIMEOUT_SECONDS = 3600
DEFAULT_TIMEOUT_SECONDS = 60
MAX_MEMORY_MB = 4096
DEFAULT_MEMORY_MB = 512
MAX_REPLY_SECONDS = 60.0
DEFAULT_REPLY_SECONDS = 2.0
MAX_COMMAND_PARTS = 64
MAX_TEXT = 4000


@dataclass(frozen=True)
class MetricSpec:
    name: str
    direction: str  # "higher" | "lower": which way is better
    minimum: float | None
    maximum: float | None
    primary: bool
    # Task scope: a task "passed" when its primary value reaches this (None: never).
    pass_at: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "direction": self.direction,
            "range": [self.minimum, self.maximum],
            "primary": self.primary,
            "pass_at": self.pass_at,
        }


@dataclass(frozen=True)
class EvaluationManifest:
    id: str
    version: int
    title: str
    description: str
    # pack id -> None (every version) or the contract versions it may score
    scores: dict[str, tuple[int, ...] | None]
    scope: str
    metrics: tuple[MetricSpec, ...]
    command: tuple[str, ...]
    image: str | None
    timeout_seconds: int
    memory_mb: int
    reads: tuple[str, ...]
    candidate_command: tuple[str, ...] | None
    candidate_command_file: str | None
    reply_timeout_seconds: float
    # The file as parsed: stored, shown on the evaluation's page, and part of its digest.
    canonical: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.id}@{self.version}"

    @property
    def primary(self) -> MetricSpec:
        return next(metric for metric in self.metrics if metric.primary)

    @property
    def has_candidate_program(self) -> bool:
        return self.candidate_command is not None or self.candidate_command_file is not None


def read_evaluation_manifest(folder: Path, limits: CompileLimits) -> EvaluationManifest:
    """The folder's evaluation.yaml, checked; raises PackError with every problem found."""
    path = folder / MANIFEST_NAME
    if path.is_symlink() or not path.is_file():
        raise PackError(
            [Problem(MANIFEST_NAME, None, None, "is missing: an evaluation needs one at its top")]
        )
    data, key_lines = read_yaml_mapping(path, MANIFEST_NAME, limits)
    problems = [
        located_problem(MANIFEST_NAME, key_lines, field, message)
        for field, message in manifest_problems(data)
    ]
    if problems:
        raise PackError(problems)
    return _build(data)


# --- checks -------------------------------------------------------------------------------------


def manifest_problems(data: dict[str, Any]) -> list[FieldProblem]:
    problems: list[FieldProblem] = [
        (key, "is not a field of evaluation.yaml (allowed: " + ", ".join(KEYS) + ")")
        for key in data
        if key not in KEYS
    ]
    problems += _required_text(data, "id", ID_PATTERN, "lower-case letters, digits, . _ -")
    if data.get("id") in BUILT_IN_NAMES:
        problems.append(("id", f"{data['id']} is the name of one of the site's own scorers"))
    problems += _version(data.get("version"))
    for key in ("title", "description"):
        if key in data and (not isinstance(data[key], str) or len(data[key]) > MAX_TEXT):
            problems.append((key, f"must be text of at most {MAX_TEXT} characters"))
    problems += _scores(data.get("scores"))
    if data.get("scope") not in SCOPES:
        problems.append(("scope", "is required: task (one call per task result) or run"))
    problems += _metrics(data.get("metrics"))
    problems += _program(data.get("program"))
    problems += _string_list(data.get("reads", []), "reads")
    if "candidate_program" in data:
        problems += _candidate_program(data["candidate_program"], data.get("scope"))
    return problems


def _required_text(
    data: dict[str, Any], key: str, pattern: re.Pattern[str], allowed: str
) -> list[FieldProblem]:
    value = data.get(key)
    if not isinstance(value, str) or not pattern.match(value):
        return [(key, f"is required: 1 to 63 characters ({allowed})")]
    return []


def _version(value: Any) -> list[FieldProblem]:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERSION:
        return [("version", "is required: a whole number from 1 (raise it for every change)")]
    return []


def _scores(value: Any) -> list[FieldProblem]:
    if not isinstance(value, list) or not value:
        return [("scores", "is required: a list of {pack, versions} it may score")]
    problems: list[FieldProblem] = []
    seen: set[str] = set()
    for index, entry in enumerate(value):
        path = f"scores[{index}]"
        if not isinstance(entry, dict) or set(entry) - {"pack", "versions"}:
            problems.append((path, "must be {pack: ID, versions: all | [1, 2]}"))
            continue
        pack = entry.get("pack")
        if not isinstance(pack, str) or not PACK_ID_PATTERN.match(pack):
            problems.append((f"{path}.pack", "is required: a pack id"))
        elif pack in seen:
            problems.append((f"{path}.pack", f"names {pack} a second time"))
        else:
            seen.add(pack)
        problems += _versions(entry.get("versions", "all"), f"{path}.versions")
    return problems


def _versions(value: Any, path: str) -> list[FieldProblem]:
    if value == "all":
        return []
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        return []
    return [(path, "must be 'all' or a list of contract version numbers (e.g. [1, 2])")]


def _metrics(value: Any) -> list[FieldProblem]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_METRICS:
        return [("metrics", f"is required: a list of 1 to {MAX_METRICS} metrics")]
    problems: list[FieldProblem] = []
    names: set[str] = set()
    primaries = 0
    for index, entry in enumerate(value):
        path = f"metrics[{index}]"
        if not isinstance(entry, dict):
            problems.append((path, "must be {name, direction, range, primary}"))
            continue
        problems += _metric(entry, path)
        name = entry.get("name")
        if isinstance(name, str) and name in names:
            problems.append((f"{path}.name", f"{name} is declared twice"))
        names.add(str(name))
        primaries += entry.get("primary") is True
    if primaries != 1 and not problems:
        problems.append(
            ("metrics", f"exactly one metric must be primary: true (found {primaries})")
        )
    return problems


def _metric(entry: dict[str, Any], path: str) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    unknown = set(entry) - {"name", "direction", "range", "primary", "pass_at", "description"}
    if unknown:
        problems.append((path, "has unknown field(s): " + ", ".join(sorted(unknown))))
    name = entry.get("name")
    if not isinstance(name, str) or not METRIC_PATTERN.match(name):
        problems.append((f"{path}.name", "is required: a-z first, then a-z 0-9 _ @ . -"))
    if entry.get("direction") not in DIRECTIONS:
        problems.append((f"{path}.direction", "is required: higher or lower (which is better)"))
    problems += _range(entry.get("range", [None, None]), f"{path}.range")
    if "primary" in entry and not isinstance(entry["primary"], bool):
        problems.append((f"{path}.primary", "must be true or false"))
    if "pass_at" in entry and entry["pass_at"] is not None and not is_number(entry["pass_at"]):
        problems.append((f"{path}.pass_at", "must be a finite number or null"))
    return problems


def _range(value: Any, path: str) -> list[FieldProblem]:
    if not isinstance(value, list) or len(value) != 2:
        return [(path, "must be [min, max] (either may be null: unbounded)")]
    low, high = value
    if any(end is not None and not is_number(end) for end in value):
        return [(path, "ends must be finite numbers or null")]
    if low is not None and high is not None and low > high:
        return [(path, f"min {low} is above max {high}")]
    return []


def _program(value: Any) -> list[FieldProblem]:
    if not isinstance(value, dict):
        return [("program", "is required: {command: [...], image?, timeout_seconds?}")]
    problems: list[FieldProblem] = []
    unknown = set(value) - {"command", "image", "timeout_seconds", "memory_mb"}
    if unknown:
        problems.append(("program", "has unknown field(s): " + ", ".join(sorted(unknown))))
    problems += _command(value.get("command"), "program.command")
    image = value.get("image")
    if image is not None and (not isinstance(image, str) or not 1 <= len(image) <= 255):
        problems.append(("program.image", "must be an image reference (at most 255 characters)"))
    problems += _bounded_int(value, "timeout_seconds", MAX_TIMEOUT_SECONDS)
    problems += _bounded_int(value, "memory_mb", MAX_MEMORY_MB, low=16)
    return problems


def _command(value: Any, path: str) -> list[FieldProblem]:
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= MAX_COMMAND_PARTS
        or not all(isinstance(part, str) and part and "\0" not in part for part in value)
    ):
        return [(path, "is required: a list of arguments (never a shell string)")]
    return []


def _bounded_int(value: dict[str, Any], key: str, high: int, low: int = 1) -> list[FieldProblem]:
    if key not in value:
        return []
    number = value[key]
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        return [(f"program.{key}", f"must be a whole number from {low} to {high}")]
    return []


def _string_list(value: Any, path: str) -> list[FieldProblem]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        return [(path, "must be a list of output paths of the contract")]
    return []


def _candidate_program(value: Any, scope: Any) -> list[FieldProblem]:
    path = "candidate_program"
    if not isinstance(value, dict):
        return [(path, "must be {command_file: PATH} or {command: [...]}")]
    problems: list[FieldProblem] = []
    unknown = set(value) - {"command", "command_file", "reply_timeout_seconds"}
    if unknown:
        problems.append((path, "has unknown field(s): " + ", ".join(sorted(unknown))))
    if ("command" in value) == ("command_file" in value):
        problems.append((path, "needs exactly one of command and command_file"))
    elif "command" in value:
        problems += _command(value["command"], f"{path}.command")
    elif not isinstance(value["command_file"], str) or not value["command_file"]:
        problems.append((f"{path}.command_file", "must be the path of a candidate's file"))
    reply = value.get("reply_timeout_seconds", DEFAULT_REPLY_SECONDS)
    if not is_number(reply) or not 0.01 <= reply <= MAX_REPLY_SECONDS:
        problems.append(
            (f"{path}.reply_timeout_seconds", f"must be a number from 0.01 to {MAX_REPLY_SECONDS}")
        )
    if scope == "run":
        problems.append((path, "needs scope: task (one candidate per call)"))
    return problems


# --- building ----------------------------------------------------------------------------------


def manifest_from_canonical(data: dict[str, Any]) -> EvaluationManifest:
    """A stored declaration (checked when it was uploaded) as the typed manifest."""
    return _build(data)


def _build(data: dict[str, Any]) -> EvaluationManifest:
    program = data["program"]
    candidate = data.get("candidate_program") or {}
    command = candidate.get("command")
    return EvaluationManifest(
        id=data["id"],
        version=data["version"],
        title=data.get("title", ""),
        description=data.get("description", ""),
        scores={
            entry["pack"]: None
            if entry.get("versions", "all") == "all"
            else tuple(sorted(set(entry["versions"])))
            for entry in data["scores"]
        },
        scope=data["scope"],
        metrics=tuple(_metric_spec(entry) for entry in data["metrics"]),
        command=tuple(program["command"]),
        image=program.get("image"),
        timeout_seconds=program.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS),
        memory_mb=program.get("memory_mb", DEFAULT_MEMORY_MB),
        reads=tuple(data.get("reads", [])),
        candidate_command=tuple(command) if command else None,
        candidate_command_file=candidate.get("command_file"),
        reply_timeout_seconds=float(candidate.get("reply_timeout_seconds", DEFAULT_REPLY_SECONDS)),
        canonical=data,
    )


def _metric_spec(entry: dict[str, Any]) -> MetricSpec:
    low, high = entry.get("range", [None, None])
    direction = entry["direction"]
    best_end = high if direction == "higher" else low
    pass_at = entry.get("pass_at", best_end)
    return MetricSpec(
        name=entry["name"],
        direction=direction,
        minimum=_finite(low),
        maximum=_finite(high),
        primary=entry.get("primary") is True,
        pass_at=_finite(pass_at),
    )


def _finite(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
