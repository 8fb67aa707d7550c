"""The contract's ``required_outputs``: each entry a path, or an object with its own rule.

The rules themselves are ``verifiers.artifact_outputs``'; this checks that a manifest states
them well, naming the field of each fault (``contract.required_outputs[1].schema.type``) so the
manifest reader can add its file and line. A ``schema`` must be a valid Draft 2020-12 schema
(``jsonschema``'s ``check_schema``) whose references stay inside it: the site fetches no
schema from anywhere, and a reference that points nowhere would make every check of a
candidate fail for the contract's fault instead of the candidate's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from verifiers.artifact_outputs import FORMATS, JSON_FORMATS, OUTPUT_KEYS, PURPOSES, inferred_format
from verifiers.families.base import FieldProblem, is_non_empty_string

_REFERENCE_KEYS = ("$ref", "$dynamicRef")
_BASE = "urn:securebench:required-output-schema"
MAX_MESSAGE_CHARS = 200


def required_outputs(value: Any, path: str) -> list[FieldProblem]:
    """A list whose entries are non-empty strings or output rule objects."""
    if not isinstance(value, list):
        return [(path, "must be a list of paths or {path, format?, schema?, ...} objects")]
    problems: list[FieldProblem] = []
    for index, entry in enumerate(value):
        where = f"{path}[{index}]"
        if isinstance(entry, dict):
            problems += output_object(entry, where)
        elif not is_non_empty_string(entry):
            problems.append((where, "must be a non-empty path or a {path, ...} object"))
    return problems


def output_object(entry: dict[str, Any], path: str) -> list[FieldProblem]:
    allowed = ", ".join(OUTPUT_KEYS)
    problems: list[FieldProblem] = [
        (f"{path}.{key}", f"is not a key of a required output (allowed: {allowed})")
        for key in entry
        if key not in OUTPUT_KEYS
    ]
    if not is_non_empty_string(entry.get("path")):
        problems.append((f"{path}.path", "is required and must be a non-empty path"))
    if "format" in entry and entry["format"] not in FORMATS:
        problems.append((f"{path}.format", "must be one of " + ", ".join(FORMATS)))
    if "optional" in entry and not isinstance(entry["optional"], bool):
        problems.append((f"{path}.optional", "must be a boolean"))
    size = entry.get("max_bytes")
    if "max_bytes" in entry and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        problems.append((f"{path}.max_bytes", "must be a positive integer (bytes)"))
    if "purpose" in entry and entry["purpose"] not in PURPOSES:
        problems.append((f"{path}.purpose", "must be one of " + ", ".join(PURPOSES)))
    if "schema" in entry:
        problems += _schema_problems(entry, path)
    return problems


def _schema_problems(entry: dict[str, Any], path: str) -> list[FieldProblem]:
    schema = entry["schema"]
    where = f"{path}.schema"
    if not isinstance(schema, dict):
        return [(where, "must be a JSON Schema object")]
    format = entry.get("format")
    if not isinstance(format, str) and isinstance(entry.get("path"), str):
        format = inferred_format(entry["path"])
    if format not in JSON_FORMATS:
        return [(where, "applies to json or jsonl outputs only (set format: json or jsonl)")]
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        field = where + "".join(_step(part) for part in exc.path)
        return [(field, f"is not a valid JSON Schema (Draft 2020-12): {_capped(exc.message)}")]
    return _reference_problems(schema, where)


def _reference_problems(schema: dict[str, Any], where: str) -> list[FieldProblem]:
    resolver = Registry().with_resource(_BASE, DRAFT202012.create_resource(schema)).resolver(_BASE)
    problems: list[FieldProblem] = []
    for field, reference in _references(schema, where):
        if not reference.startswith("#"):
            problems.append((field, "must point inside this schema (#...): no schema is fetched"))
            continue
        try:
            resolver.lookup(reference)
        except Unresolvable:
            problems.append((field, f"{_capped(reference)} points to nothing in this schema"))
    return problems


def _references(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(field, reference) of every $ref / $dynamicRef string, without recursion."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, field = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if key in _REFERENCE_KEYS and isinstance(child, str):
                    yield f"{field}.{key}", child
                else:
                    stack.append((child, f"{field}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{field}[{index}]") for index, child in enumerate(item))


def _step(part: str | int) -> str:
    return f"[{part}]" if isinstance(part, int) else f".{part}"


def _capped(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"
