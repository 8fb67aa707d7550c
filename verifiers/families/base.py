"""Building blocks of a family definition: the schema, the eval lane map, file-carrying fields.

A family module declares one ``SPEC = FamilySpec(...)``; a ``verify`` function can later be
added beside it in the same module without changing this file's shape. Everything here is
plain data in, plain data out: no Django, no filesystem.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from verifiers.lanes import HIDDEN, Lane

# (dotted field path, human message), e.g. ("eval.answer", "is required").
FieldProblem = tuple[str, str]
# A check receives the value and its dotted field path and returns the problems it found.
Check = Callable[[Any, str], list[FieldProblem]]
# Given an eval value, return the eval-root-relative path it carries (or None).
FilePathOf = Callable[[Any], str | None]


@dataclass(frozen=True)
class Field:
    check: Check
    required: bool = False
    # A JSON null counts as "absent" for this field (spec allows it for a few fields).
    nullable: bool = False


@dataclass(frozen=True)
class FamilySpec:
    name: str
    active: bool
    candidate_kind: str | None = None
    eval_lanes: Mapping[str, Lane] = field(default_factory=dict)
    # None means "any keys, no validation" (deferred and unknown families).
    input_fields: Mapping[str, Field] | None = None
    eval_fields: Mapping[str, Field] | None = None
    # Eval fields that carry files under the eval root beyond the generic file-reference
    # rule (a {path, mount?, read_only?} object), e.g. terminal_task's trusted-file checker.
    eval_file_paths: Mapping[str, FilePathOf] = field(default_factory=dict)
    # Input keys beyond ``input_fields`` are allowed (all public): an artifact task's author
    # describes the data (a split, a dataset version) in keys of their own.
    open_input: bool = False

    def __post_init__(self) -> None:
        # Specs are shared module-level singletons; make their maps read-only.
        for name in ("eval_lanes", "input_fields", "eval_fields", "eval_file_paths"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    def lane_for(self, key: str) -> Lane:
        # Anything the family does not list is hidden: failing closed keeps a typo'd or
        # future eval key away from the agent and the sandbox.
        return self.eval_lanes.get(key, HIDDEN)

    def validate(self, input: dict[str, Any], eval: dict[str, Any]) -> list[FieldProblem]:
        problems: list[FieldProblem] = []
        if self.input_fields is not None:
            known = self.input_fields
            if self.open_input:
                known = {**{key: Field(any_value) for key in input}, **self.input_fields}
            problems += check_fields(input, known, "input")
        if self.eval_fields is not None:
            problems += check_fields(eval, self.eval_fields, "eval")
        return problems

    def eval_file_path(self, key: str, value: Any) -> str | None:
        path_of = self.eval_file_paths.get(key)
        return path_of(value) if path_of is not None else None


def deferred_family(name: str, eval_lanes: Mapping[str, Lane]) -> FamilySpec:
    """A family whose verifier does not exist yet: any keys, tasks stay pending."""
    return FamilySpec(name=name, active=False, eval_lanes=eval_lanes)


# --- object checks -------------------------------------------------------------------------


def check_fields(
    value: Mapping[str, Any], fields: Mapping[str, Field], path: str
) -> list[FieldProblem]:
    problems = unknown_fields(value, fields.keys(), path)
    for name, spec in fields.items():
        child = f"{path}.{name}"
        if name not in value or (spec.nullable and value[name] is None):
            if spec.required:
                problems.append((child, "is required"))
            continue
        problems += spec.check(value[name], child)
    return problems


def unknown_fields(value: Mapping[str, Any], allowed: Any, path: str) -> list[FieldProblem]:
    unknown = sorted(set(value) - set(allowed))
    if not unknown:
        return []
    return [(path, "has unknown field(s): " + ", ".join(unknown))]


def strict_object(fields: Mapping[str, Field]) -> Check:
    """An object with exactly these (optional/required) fields and nothing else."""

    def check(value: Any, path: str) -> list[FieldProblem]:
        if not isinstance(value, dict):
            return [(path, "must be an object")]
        return check_fields(value, fields, path)

    return check


# --- scalar checks -------------------------------------------------------------------------


def is_number(value: Any) -> bool:
    # bool is an int subclass in Python; a JSON true is never a number here.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_non_empty_string(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def non_empty_string(value: Any, path: str) -> list[FieldProblem]:
    return [] if is_non_empty_string(value) else [(path, "must be a non-empty string")]


def string(value: Any, path: str) -> list[FieldProblem]:
    return [] if isinstance(value, str) else [(path, "must be a string")]


def json_object(value: Any, path: str) -> list[FieldProblem]:
    return [] if isinstance(value, dict) else [(path, "must be an object")]


def any_value(value: Any, path: str) -> list[FieldProblem]:
    return []


def string_or_object(value: Any, path: str) -> list[FieldProblem]:
    if isinstance(value, str | dict):
        return []
    return [(path, "must be a string or an object")]


def non_empty_string_or_object(value: Any, path: str) -> list[FieldProblem]:
    if is_non_empty_string(value) or isinstance(value, dict):
        return []
    return [(path, "must be a non-empty string or object")]


def positive_number(value: Any, path: str) -> list[FieldProblem]:
    return [] if is_number(value) and value > 0 else [(path, "must be a positive number")]


def non_negative_number(value: Any, path: str) -> list[FieldProblem]:
    if is_number(value) and value >= 0:
        return []
    return [(path, "must be a non-negative number")]


def positive_integer(value: Any, path: str) -> list[FieldProblem]:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return [] if ok else [(path, "must be a positive integer")]


def boolean(value: Any, path: str) -> list[FieldProblem]:
    return [] if isinstance(value, bool) else [(path, "must be a boolean")]


def equals(expected: str) -> Check:
    def check(value: Any, path: str) -> list[FieldProblem]:
        return [] if value == expected else [(path, f"must be '{expected}'")]

    return check


def one_of(*choices: str) -> Check:
    wanted = " or ".join(f"'{choice}'" for choice in choices)

    def check(value: Any, path: str) -> list[FieldProblem]:
        return [] if value in choices and isinstance(value, str) else [(path, f"must be {wanted}")]

    return check


# --- array checks --------------------------------------------------------------------------


def _is_string_or_number(value: Any) -> bool:
    return is_non_empty_string(value) or is_number(value)


def string_array(value: Any, path: str) -> list[FieldProblem]:
    """A non-empty array of non-empty strings."""
    if not isinstance(value, list) or not value:
        return [(path, "must be a non-empty string array")]
    if not all(is_non_empty_string(item) for item in value):
        return [(path, "must contain only non-empty strings")]
    return []


def string_list(value: Any, path: str) -> list[FieldProblem]:
    """An array (possibly empty) of non-empty strings."""
    if not isinstance(value, list):
        return [(path, "must be a string array")]
    if not all(is_non_empty_string(item) for item in value):
        return [(path, "must contain only non-empty strings")]
    return []


def string_or_number_array(value: Any, path: str) -> list[FieldProblem]:
    if not isinstance(value, list) or not value:
        return [(path, "must be a non-empty string-or-number array")]
    if not all(_is_string_or_number(item) for item in value):
        return [(path, "must contain only non-empty strings or numbers")]
    return []


def string_number_or_array(value: Any, path: str) -> list[FieldProblem]:
    """A non-empty string, a number, or a non-empty array of those."""
    if _is_string_or_number(value):
        return []
    if isinstance(value, list) and value and all(_is_string_or_number(item) for item in value):
        return []
    return [(path, "must be a non-empty string, number, or string-or-number array")]


def non_empty_string_or_string_array(value: Any, path: str) -> list[FieldProblem]:
    if is_non_empty_string(value):
        return []
    if isinstance(value, list) and value and all(is_non_empty_string(i) for i in value):
        return []
    return [(path, "must be a non-empty string or a non-empty string array")]
