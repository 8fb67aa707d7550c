"""The channel of an evaluation program: its stdout lines, parsed and checked (issue 33).

Pure functions, no sandbox: every line the program prints is untrusted text until it parses
as exactly one of the three messages below, and a final message counts only once every
metric in it is declared, finite and inside its declared range. Anything else is the
evaluation's own error (``evaluation_error``), never the candidate's failure.

    {"metrics": {NAME: NUMBER | {"value": N, "ci_low": N, "ci_high": N}}, "passed": BOOL?}
    {"to_candidate": STRING}
    {"restart_candidate": true}

Problem texts name the field and the value, but quote program-made text only in short
excerpts: a problem is shown more widely than the program's log is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

HIGHER = "higher"
LOWER = "lower"
EXCERPT_CHARS = 80  # program-made text quoted in a problem (names, values, lines)

FINAL = "final"
TO_CANDIDATE = "to_candidate"
RESTART_CANDIDATE = "restart_candidate"

Metrics = dict[str, dict[str, float | None]]


@dataclass(frozen=True)
class MetricDeclaration:
    """One metric of evaluation.yaml: its name, which way is better, its range."""

    name: str
    direction: str  # "higher" | "lower"
    minimum: float | None
    maximum: float | None
    primary: bool = False

    def as_input(self) -> dict[str, Any]:
        """The form input.json gives the program."""
        return {
            "name": self.name,
            "direction": self.direction,
            "range": [self.minimum, self.maximum],
            "primary": self.primary,
        }


@dataclass(frozen=True)
class Message:
    kind: str  # FINAL | TO_CANDIDATE | RESTART_CANDIDATE
    body: dict[str, Any]


@dataclass(frozen=True)
class FinalReport:
    metrics: Metrics
    passed: bool | None
    problem: str  # "" when the final message is valid


class _Duplicate(ValueError):
    pass


def excerpt(value: Any) -> str:
    """A short repr of program-made data for a problem text."""
    text = repr(value)
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key would make the message mean whichever copy a parser keeps.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Duplicate(key)
        result[key] = value
    return result


def parse_line(line: bytes, number: int) -> tuple[Message | None, str]:
    """(message, "") for a line of the channel, else (None, why not)."""
    where = f"stdout line {number}"
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, f"{where} is not UTF-8 text"
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except _Duplicate as exc:
        return None, f"{where} repeats the key {excerpt(str(exc))}"
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        return None, f"{where} is not JSON: {excerpt(text)}"
    if not isinstance(value, dict):
        return None, f"{where} is not a JSON object: {excerpt(text)}"
    kind = _kind(value)
    if kind is None:
        return None, f"{where} is not a message of the channel: {excerpt(text)}"
    return Message(kind, value), ""


def _kind(value: dict[str, Any]) -> str | None:
    keys = set(value)
    if "metrics" in keys and keys <= {"metrics", "passed"}:
        return FINAL
    if keys == {"to_candidate"} and isinstance(value["to_candidate"], str):
        return TO_CANDIDATE
    if keys == {"restart_candidate"} and value["restart_candidate"] is True:
        return RESTART_CANDIDATE
    return None


def validated_final(message: dict[str, Any], declared: Sequence[MetricDeclaration]) -> FinalReport:
    """The final message's metrics and ``passed``, or the first problem found in them."""
    metrics, problem = validated_metrics(message.get("metrics"), declared)
    passed = message.get("passed")
    if not problem and passed is not None and not isinstance(passed, bool):
        problem = f"passed must be true or false, not {excerpt(passed)}"
    if problem:
        return FinalReport({}, None, problem)
    return FinalReport(metrics, passed, "")


def validated_metrics(reported: Any, declared: Sequence[MetricDeclaration]) -> tuple[Metrics, str]:
    """({name: {"value", "ci_low", "ci_high"}}, "") or ({}, the problem naming what is wrong).

    Every name must be declared, the primary present, every number finite and inside the
    declared range (interval ends too), and ci_low <= value <= ci_high.
    """
    if not isinstance(reported, dict):
        return {}, f"metrics must be an object, not {excerpt(reported)}"
    by_name = {metric.name: metric for metric in declared}
    metrics: Metrics = {}
    for name, raw in reported.items():
        metric = by_name.get(name)
        if metric is None:
            return {}, f"metric {excerpt(name)} is not declared (declared: {', '.join(by_name)})"
        entry, problem = _metric_entry(metric, raw)
        if problem:
            return {}, problem
        metrics[name] = entry
    for metric in declared:
        if metric.primary and metric.name not in metrics:
            return {}, f"the primary metric {metric.name!r} is missing"
    return metrics, ""


def _metric_entry(metric: MetricDeclaration, raw: Any) -> tuple[dict[str, float | None], str]:
    if isinstance(raw, dict):
        keys = set(raw)
        if keys not in ({"value"}, {"value", "ci_low", "ci_high"}):
            wanted = '{"value": N} or {"value": N, "ci_low": N, "ci_high": N}'
            return {}, f"metric {metric.name!r} must be a number or {wanted}, not {excerpt(raw)}"
        parts = {key: raw.get(key) for key in ("value", "ci_low", "ci_high")}
    else:
        parts = {"value": raw, "ci_low": None, "ci_high": None}
    entry: dict[str, float | None] = {}
    for key, value in parts.items():
        if value is None and key != "value":
            entry[key] = None
            continue
        label = metric.name if key == "value" else f"{metric.name}.{key}"
        number, problem = _number(label, value)
        if not problem:
            problem = _outside_range(metric, label, number)
        if problem:
            return {}, problem
        entry[key] = number
    return entry, _interval_problem(metric.name, entry)


def _number(label: str, value: Any) -> tuple[float, str]:
    # bool is an int in Python, and JSON true is no score.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0, f"metric {label!r} must be a number, not {excerpt(value)}"
    try:
        number = float(value)
    except OverflowError:  # an integer literal too large for a float
        return 0.0, f"metric {label!r} is not a finite number: {excerpt(value)}"
    if not math.isfinite(number):
        return 0.0, f"metric {label!r} is not a finite number: {number}"
    return number, ""


def _outside_range(metric: MetricDeclaration, label: str, number: float) -> str:
    low, high = metric.minimum, metric.maximum
    if (low is not None and number < low) or (high is not None and number > high):
        return f"metric {label!r} is {number}, outside its declared range [{low}, {high}]"
    return ""


def _interval_problem(name: str, entry: dict[str, float | None]) -> str:
    value, low, high = entry.get("value"), entry.get("ci_low"), entry.get("ci_high")
    if value is None or low is None or high is None:
        return ""
    if not low <= value <= high:
        return f"metric {name!r} has value {value} outside its interval [{low}, {high}]"
    return ""
