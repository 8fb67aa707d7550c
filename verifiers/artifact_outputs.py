"""A contract's required outputs, each with its own rule, checked on a candidate's files.

A ``required_outputs`` entry is a path (a string: it must exist, nothing more — the rule it
always was) or an object ``{path, format?, schema?, optional?, max_bytes?, purpose?}``:

- ``format``: ``json`` (one JSON document), ``jsonl`` (one JSON value per non-blank line),
  ``text`` (UTF-8) or ``binary`` (anything). Absent: read from the path's suffix (``.json``,
  ``.jsonl`` / ``.ndjson``), else ``binary``.
- ``schema``: a JSON Schema (Draft 2020-12) every document (json) or line (jsonl) must meet.
- ``optional``: absence is fine; a file that is there is still held to its rule.
- ``max_bytes``: the most the files the entry names may hold together.
- ``purpose``: ``evaluation`` (handed to evaluations) or ``audit`` (kept for people); it
  changes no check.

An entry's path names a file, a folder (``out/``, or ``out`` when the candidate holds files
under it) or a gitwildmatch glob; a format or schema applies to every file it names.

``output_problems`` returns one ``OutputProblem`` per fault under four rule names:
``output_missing``, ``output_malformed`` (naming the JSONL line and the JSON path of the field
that failed its schema), ``output_too_large`` and ``output_late`` (a file the caller knows was
written after the budget ran out). Memory-safe on hostile files: JSONL is read line by line,
and nesting is measured by a flat scan before any parser or validator recurses, so a file of
100,000 ``[`` is ``output_malformed``, never a RecursionError. Pure: no Django, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing.exceptions import Unresolvable

from verifiers.contract_surfaces import compile_globs, normalised_path
from verifiers.task import WorkspaceFile

OUTPUT_MISSING = "output_missing"
OUTPUT_MALFORMED = "output_malformed"
OUTPUT_TOO_LARGE = "output_too_large"
OUTPUT_LATE = "output_late"
OUTPUT_RULES = (OUTPUT_MISSING, OUTPUT_MALFORMED, OUTPUT_TOO_LARGE, OUTPUT_LATE)

FORMATS = ("json", "jsonl", "text", "binary")
JSON_FORMATS = frozenset({"json", "jsonl"})
PURPOSES = ("evaluation", "audit")
OUTPUT_KEYS = ("path", "format", "schema", "optional", "max_bytes", "purpose")
# Deep enough for any honest record, shallow enough that json and jsonschema (a few stack
# frames per level each) stay far from Python's recursion limit.
MAX_JSON_DEPTH = 64
# A schema error quotes the candidate's value; a message stays readable on a run page.
MAX_DETAIL_CHARS = 300
_GLOB_CHARS = frozenset("*?[")
_SUFFIX_FORMATS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}
# A JSON string (escapes included) or one bracket: what nesting is counted from. An
# unterminated string makes its brackets count, which only ever errs towards "too deep" for a
# text that is not JSON anyway.
_NESTING_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


@dataclass(frozen=True)
class OutputRule:
    path: str
    format: str | None = None  # None: presence only (a plain string entry)
    schema: Mapping[str, Any] | None = None
    optional: bool = False
    max_bytes: int | None = None
    purpose: str = "evaluation"


@dataclass(frozen=True)
class OutputProblem:
    rule: str  # one of OUTPUT_RULES
    path: str  # the candidate's file, or the contract's entry for output_missing
    detail: str  # what is wrong, without the rule name


def inferred_format(path: str) -> str:
    """The format a rule object without ``format`` gets from its path's suffix."""
    for suffix, name in _SUFFIX_FORMATS.items():
        if path.lower().endswith(suffix):
            return name
    return "binary"


def output_rule(entry: Any) -> OutputRule | None:
    """One ``required_outputs`` entry as a rule; None for an entry the compiler would refuse
    (stored contracts were compiled, so this only skips what never binds)."""
    if isinstance(entry, str):
        return OutputRule(path=entry) if entry.strip() else None
    if not isinstance(entry, Mapping):
        return None
    path = entry.get("path")
    if not isinstance(path, str) or not path.strip():
        return None
    schema = entry.get("schema")
    max_bytes = entry.get("max_bytes")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        max_bytes = None
    return OutputRule(
        path=path,
        format=entry.get("format") or inferred_format(path),
        schema=schema if isinstance(schema, Mapping) else None,
        optional=entry.get("optional") is True,
        max_bytes=max_bytes,
        purpose=entry.get("purpose") or "evaluation",
    )


def output_rules(contract: Mapping[str, Any] | None) -> list[OutputRule]:
    """The contract's required outputs as rules, in its order."""
    entries = (contract or {}).get("required_outputs") or []
    if not isinstance(entries, list | tuple):
        return []
    return [rule for rule in (output_rule(entry) for entry in entries) if rule is not None]


def required_output_paths(contract: Mapping[str, Any] | None) -> list[str]:
    """Every entry's path, strings and objects alike (what an agent is told to produce)."""
    return [rule.path for rule in output_rules(contract)]


def matching_paths(entry: str, paths: Iterable[str]) -> list[str]:
    """The normalised ``paths`` an entry names: the file itself, every file under it as a
    folder (``out/`` is a folder only), or every match of a glob."""
    normalised = sorted({path for path in (normalised_path(raw) for raw in paths) if path})
    if _GLOB_CHARS & set(entry):
        globs = compile_globs([entry])
        return [path for path in normalised if any(glob.matches(path) for glob in globs)]
    wanted = normalised_path(entry)
    if not wanted:
        return []
    exact = [] if entry.endswith("/") or wanted not in normalised else [wanted]
    return exact + [path for path in normalised if path.startswith(wanted + "/")]


# --- the check -----------------------------------------------------------------------------


def output_problems(
    rules: Iterable[OutputRule],
    files: Mapping[str, WorkspaceFile],
    *,
    produced_after_budget: Iterable[str] | None = None,
) -> list[OutputProblem]:
    """Every rule the files break, rule by rule in the contract's order."""
    by_path = {normalised_path(path): item for path, item in files.items()}
    late = {normalised_path(path) for path in produced_after_budget or ()}
    problems: list[OutputProblem] = []
    for rule in rules:
        named = matching_paths(rule.path, by_path)
        if not named:
            if not rule.optional:
                problems.append(OutputProblem(OUTPUT_MISSING, rule.path, "is not produced"))
            continue
        problems += _size_problems(rule, named, by_path)
        problems += [
            OutputProblem(OUTPUT_LATE, path, "was written after the budget ran out")
            for path in named
            if path in late
        ]
        problems += _format_problems(rule, named, by_path)
    return problems


def _size_problems(
    rule: OutputRule, named: list[str], files: Mapping[str, WorkspaceFile]
) -> list[OutputProblem]:
    if rule.max_bytes is None:
        return []
    size = sum(len(files[path].content) for path in named)
    if size <= rule.max_bytes:
        return []
    where = named[0] if len(named) == 1 else rule.path
    detail = f"is {size} bytes, over the contract's max_bytes of {rule.max_bytes}"
    return [OutputProblem(OUTPUT_TOO_LARGE, where, detail)]


def _format_problems(
    rule: OutputRule, named: list[str], files: Mapping[str, WorkspaceFile]
) -> list[OutputProblem]:
    if rule.format is None or rule.format == "binary":
        return []
    validator = _validator(rule.schema)
    problems: list[OutputProblem] = []
    for path in named:
        detail = _content_problem(rule.format, files[path].content, validator)
        if detail is not None:
            problems.append(OutputProblem(OUTPUT_MALFORMED, path, detail))
    return problems


def _validator(schema: Mapping[str, Any] | None) -> Draft202012Validator | None:
    # Formats are annotations in 2020-12 (no format checker): a schema constrains structure.
    return None if schema is None else Draft202012Validator(schema)


def _content_problem(
    format: str, content: bytes, validator: Draft202012Validator | None
) -> str | None:
    """What is wrong with one file's content for its format, or None."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 text (byte {exc.start})"
    if format == "text":
        return None
    if format == "json":
        return _document_problem(text, validator, where="")
    for number, line in _lines(text):
        if line.strip():
            problem = _document_problem(line, validator, where=f"line {number}")
            if problem is not None:
                return problem
    return None


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line) without building a list of every line of a large file."""
    start = 0
    number = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end == -1 else end
        number += 1
        yield number, text[start:end]
        start = end + 1


def _document_problem(
    text: str, validator: Draft202012Validator | None, *, where: str
) -> str | None:
    prefix = f"{where}: " if where else ""
    if json_nesting_exceeds(text, MAX_JSON_DEPTH):
        return f"{prefix}nests deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return f"{prefix}is not JSON: {exc.msg} (column {exc.colno})"
    except (ValueError, RecursionError) as exc:
        return f"{prefix}is not JSON: {_capped(str(exc))}"
    if validator is None:
        return None
    try:
        error = best_match(validator.iter_errors(value))
    except RecursionError:
        return f"{prefix}nests too deep to check against the schema"
    except Unresolvable as exc:
        # The compiler refuses schemas with references it cannot resolve; fail closed anyway.
        return f"{prefix}could not be checked: the schema's reference {_capped(str(exc))}"
    if error is None:
        return None
    return f"{prefix}{error.json_path}: {_capped(error.message)}"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _capped(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


def json_nesting_exceeds(text: str, limit: int) -> bool:
    """Whether arrays and objects in ``text`` nest deeper than ``limit``: a flat scan that
    stops at the first level too deep, so a nesting bomb costs ``limit`` tokens."""
    depth = 0
    for match in _NESTING_TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth = max(0, depth - 1)
    return False
