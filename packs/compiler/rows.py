"""tasks.jsonl: reading rows safely, line by line, and checking their top-level shape.

Lines are numbered from 1 counting blank lines, so every message points at the line an
editor shows. Reading is bounded per line: a huge line is never loaded whole.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packs.compiler.digest import canonical_json, contains_nul, nesting_depth_exceeds
from packs.compiler.errors import Problem, ProblemLog, excerpt_around
from packs.compiler.limits import CompileLimits, human_bytes
from packs.compiler.strict_json import StrictJsonRefused, strict_loads
from verifiers.families.base import FieldProblem

ROW_KEYS = ("id", "family", "input", "assets", "eval", "environment", "metadata")
MAX_ID_CHARS = 200
MAX_FAMILY_CHARS = 64  # Task.family's column
# C0 and C1 control characters: they would hide in URLs, logs and terminal output.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f]")
# Unicode categories an id may not hold: format characters (zero-width ones, bidi overrides
# that print "1q" as "q1"), line and paragraph separators, surrogates, private-use and
# unassigned code points. Each lets two ids that differ look the same on a page.
INVISIBLE_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


@dataclass(frozen=True)
class Row:
    """A row whose top-level shape is valid; family-specific checks come later."""

    line: int
    id: str
    family: str
    input: dict[str, Any]
    assets: list[Any] | None
    eval: dict[str, Any]
    environment: dict[str, Any]
    metadata: dict[str, Any]


# --- reading ---------------------------------------------------------------------------------


def read_rows(
    path: Path, name: str, limits: CompileLimits, log: ProblemLog
) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    """Yield (line, row object, canonical JSON bytes) for every well-formed JSON object line.

    Problems with a line are logged and the line skipped, so later lines are still checked;
    a line or file over its size limit stops reading, since nothing after it can be trusted
    to be cheap.
    """
    _check_file(path, name, limits, log)
    total = 0
    rows = 0
    with path.open("rb") as handle:
        for line_number in _line_numbers():
            raw = handle.readline(limits.max_line_bytes + 1)
            if not raw:
                break
            total += len(raw)
            content = raw[:-1] if raw.endswith(b"\n") else raw
            if len(content) > limits.max_line_bytes:
                log.fail(_too_long(name, line_number, limits))
            if total > limits.max_tasks_file_bytes:
                log.fail(_too_big(name, limits))
            if not content.strip():
                continue
            rows += 1
            if rows > limits.max_rows:
                log.fail(Problem(name, line_number, None, f"has more than {limits.max_rows} rows"))
            parsed = _parse_line(content, line_number, name, limits, log)
            if parsed is not None:
                yield line_number, parsed[0], parsed[1]


def _line_numbers() -> Iterator[int]:
    number = 1
    while True:
        yield number
        number += 1


def _check_file(path: Path, name: str, limits: CompileLimits, log: ProblemLog) -> None:
    if path.is_symlink():
        log.fail(Problem(name, None, None, "may not be a symlink"))
    if not path.exists():
        log.fail(Problem(name, None, None, "is missing: a pack needs one task per line here"))
    if not path.is_file():
        log.fail(Problem(name, None, None, "must be a regular file"))
    if path.stat().st_size > limits.max_tasks_file_bytes:
        log.fail(_too_big(name, limits))


def _too_long(name: str, line: int, limits: CompileLimits) -> Problem:
    return Problem(
        name, line, None, f"line {line} is longer than {human_bytes(limits.max_line_bytes)}"
    )


def _too_big(name: str, limits: CompileLimits) -> Problem:
    return Problem(name, None, None, f"is larger than {human_bytes(limits.max_tasks_file_bytes)}")


def _parse_line(
    content: bytes, line: int, name: str, limits: CompileLimits, log: ProblemLog
) -> tuple[dict[str, Any], bytes] | None:
    def problem(message: str) -> None:
        log.add(Problem(name, line, None, message))

    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem(f"is not valid UTF-8 (byte {exc.start} of the line)")
        return None
    if line == 1:
        text = text.removeprefix("\ufeff")  # editors on Windows add a byte-order mark
    try:
        value = strict_loads(text)
    except json.JSONDecodeError as exc:
        excerpt, column = excerpt_around(text, exc.colno)
        message = f"invalid JSON: {exc.msg} (column {exc.colno})"
        log.add(Problem(name, line, None, message, excerpt=excerpt, column=column))
        return None
    except StrictJsonRefused as exc:
        problem(f"invalid JSON: {exc}")
        return None
    except ValueError:  # int() refuses more than sys.get_int_max_str_digits() digits
        problem("invalid JSON: an integer has too many digits")
        return None
    except RecursionError:
        problem(f"invalid JSON: nests deeper than {limits.max_json_depth} levels")
        return None
    # Cheap pre-check: a line with fewer brackets than the limit cannot nest that deep.
    brackets = content.count(b"[") + content.count(b"{")
    if brackets > limits.max_json_depth and nesting_depth_exceeds(value, limits.max_json_depth):
        problem(f"invalid JSON: nests deeper than {limits.max_json_depth} levels")
        return None
    if not isinstance(value, dict):
        problem("a task row must be a JSON object")
        return None
    try:
        row_json = canonical_json(value)
    except UnicodeEncodeError:
        problem("invalid JSON: contains an unpaired surrogate escape such as \\ud800")
        return None
    # Cheap pre-check on the escaped form before walking the value.
    if b"\\u0000" in row_json and contains_nul(value):
        problem("contains a NUL character (\\u0000), which text fields cannot hold")
        return None
    return value, row_json


# --- top-level shape -------------------------------------------------------------------------


def check_row(
    line: int, data: dict[str, Any], default_family: str | None, *, default_known: bool = True
) -> tuple[Row | None, list[FieldProblem]]:
    """The row, or its problems. ``default_known`` False (a manifest with problems) means a
    row without a family of its own has no family to check against: no Row, and no problem
    for the missing family either, which is the manifest's to fix."""
    problems: list[FieldProblem] = [
        (key, "is not a task row key (allowed: " + ", ".join(ROW_KEYS) + ")")
        for key in data
        if key not in ROW_KEYS
    ]
    problems += _check_id(data)
    family = data.get("family", default_family)
    family_missing = "family" not in data and default_family is None
    if family_missing and default_known:
        problems.append(("family", "is required when manifest defaults.family is not set"))
    elif not family_missing:
        problems += _check_family(family)
    for key in ("input", "eval", "environment", "metadata"):
        if key in data and not isinstance(data[key], dict):
            problems.append((key, "must be an object"))
    if "assets" in data and not isinstance(data["assets"], list):
        problems.append(("assets", "must be a list"))
    if problems or family_missing:
        return None, problems
    row = Row(
        line=line,
        id=data["id"],
        family=family,
        input=data.get("input", {}),
        assets=data.get("assets"),
        eval=data.get("eval", {}),
        environment=data.get("environment", {}),
        metadata=data.get("metadata", {}),
    )
    return row, []


def _check_family(family: Any) -> list[FieldProblem]:
    if not isinstance(family, str) or not family.strip():
        return [("family", "must be a non-empty string")]
    if len(family) > MAX_FAMILY_CHARS:
        return [("family", f"must be at most {MAX_FAMILY_CHARS} characters")]
    return []


def _check_id(data: dict[str, Any]) -> list[FieldProblem]:
    if "id" not in data:
        return [("id", "is required")]
    value = data["id"]
    if not isinstance(value, str) or not value.strip():
        return [("id", "must be a non-empty string")]
    if len(value) > MAX_ID_CHARS:
        return [("id", f"must be at most {MAX_ID_CHARS} characters")]
    if CONTROL_CHARACTERS.search(value):
        return [("id", "may not contain control characters")]
    hidden = next((c for c in value if unicodedata.category(c) in INVISIBLE_CATEGORIES), None)
    if hidden is not None:
        return [("id", f"may not contain invisible or format characters (U+{ord(hidden):04X})")]
    if value != value.strip():
        return [("id", "may not start or end with whitespace")]
    return []


def look_alike_key(task_id: str) -> str:
    """Ids equal under this key print alike (full-width letters, ligatures, compatibility
    forms): a pack may not hold two of them."""
    return unicodedata.normalize("NFKC", task_id)
