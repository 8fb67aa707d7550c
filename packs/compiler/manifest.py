"""manifest.yaml: loading it safely and checking every key (spec §1.2, plus our contract)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from packs.compiler.digest import contains_nul, nesting_depth_exceeds
from packs.compiler.errors import PackError, Problem
from packs.compiler.limits import CompileLimits, human_bytes
from packs.compiler.outputs import required_outputs
from packs.compiler.paths import normalise, overlaps, unsafe_path_reason
from packs.compiler.yaml_safe import YamlRefused, compose_yaml, construct_yaml
from verifiers.families.base import (
    Field,
    FieldProblem,
    boolean,
    json_object,
    non_empty_string,
    non_negative_number,
    positive_integer,
    positive_number,
    strict_object,
    string,
    string_list,
)

MANIFEST_KEYS = (
    "id",
    "version",
    "title",
    "description",
    "defaults",
    "asset_roots",
    "asset_defaults",
    "contract",
    "canary",
)
DEFAULT_ROOTS = {"public": "assets/", "eval": "hidden/"}
# The id appears in URLs, so it is restricted to characters that never need escaping.
# \A and \Z, not ^ and $: `$` also matches before a final newline, and "pack\n" would pass
# for a second pack looking exactly like "pack" in every list.
ID_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
EVALUATION_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]*@[1-9][0-9]*\Z")
# The columns that hold them (packs.models): a value the database would refuse is the
# author's error, named here with its file and line, not a server error at storing time.
MAX_VERSION = 2_147_483_647
MAX_TITLE_CHARS = 200
# A canary shorter than this would turn up in public text by chance.
MIN_CANARY_CHARS = 8
MAX_CANARY_CHARS = 1000
MAX_CANARIES = 100


@dataclass(frozen=True)
class Manifest:
    id: str
    version: int
    title: str | None
    description: str | None
    default_family: str | None
    default_environment: dict[str, Any]
    public_root: str  # normalised, e.g. "assets"
    eval_root: str  # normalised, e.g. "hidden"
    read_only_default: bool
    contract: dict[str, Any] | None
    # The manifest as parsed, minus `canary` (sealed): stored and shown, so public.
    canonical: dict[str, Any]
    # The author's canary strings: sealed, kept apart from the public manifest so the leak
    # audit can look for them in everything public.
    canaries: tuple[str, ...] = ()

    @property
    def digest_source(self) -> dict[str, Any]:
        """What the pack digest covers: the canonical manifest plus the canaries, so two
        uploads that differ only in their canaries are different content."""
        if not self.canaries:
            return self.canonical  # the same digest as before canaries existed
        return {**self.canonical, "canary": list(self.canaries)}


@dataclass(frozen=True)
class ManifestReading:
    """A manifest read and checked: the Manifest when it has no problem, else its problems,
    plus what the rows may still rely on, so they can be checked in the same pass."""

    manifest: Manifest | None
    problems: list[Problem]
    # defaults.family when that key itself is fine (or absent: None). Not known when the
    # manifest cannot be read or the key is wrong; a row without a family of its own is then
    # not blamed for it, as the manifest's problem already says what to fix.
    default_family: str | None
    default_family_known: bool


def read_manifest(pack: Path, name: str, limits: CompileLimits) -> ManifestReading:
    try:
        text = _read_text(pack / name, name, limits)
        data, key_lines = _parse(text, name, limits)
    except PackError as exc:
        return _unreadable(exc.problems)
    if contains_nul(data):
        return _unreadable(
            [Problem(name, None, None, "contains a NUL character, which cannot be stored")]
        )
    problems = [
        located_problem(name, key_lines, field, message) for field, message in _check(data, pack)
    ]
    family, family_known = _default_family(data)
    return ManifestReading(
        manifest=None if problems else _build(data),
        problems=problems,
        default_family=family,
        default_family_known=family_known,
    )


def read_yaml_mapping(
    path: Path, name: str, limits: CompileLimits
) -> tuple[dict[str, Any], dict[str, int]]:
    """A YAML file of an upload read as the manifest is (bounded, strict, JSON-only), with
    the line of every key; raises PackError naming the file and line. Evaluations'
    ``evaluation.yaml`` is read by the same rules (evaluations.manifest)."""
    return _parse(_read_text(path, name, limits), name, limits)


def _unreadable(problems: list[Problem]) -> ManifestReading:
    return ManifestReading(
        manifest=None, problems=problems, default_family=None, default_family_known=False
    )


def _default_family(data: dict[str, Any]) -> tuple[str | None, bool]:
    """(defaults.family, whether it is known), read from a manifest that may have problems."""
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        return None, False
    if "family" not in defaults:
        return None, True
    family = defaults["family"]
    if non_empty_string(family, "defaults.family"):
        return None, False
    return family, True


# --- reading and parsing ---------------------------------------------------------------------


def _read_text(path: Path, name: str, limits: CompileLimits) -> str:
    def fail(message: str, line: int | None = None) -> PackError:
        return PackError([Problem(name, line, None, message)])

    if path.is_symlink():
        raise fail("may not be a symlink")
    if not path.exists():
        raise fail("is missing: a pack needs a manifest at its top level")
    if not path.is_file():
        raise fail("must be a regular file")
    with path.open("rb") as handle:
        # Bounded read: never trust the size reported before reading.
        data = handle.read(limits.max_manifest_bytes + 1)
    if len(data) > limits.max_manifest_bytes:
        raise fail(f"is larger than {human_bytes(limits.max_manifest_bytes)}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise fail(f"is not valid UTF-8 (byte {exc.start})", line) from None


def _parse(text: str, name: str, limits: CompileLimits) -> tuple[Any, dict[str, int]]:
    def fail(message: str, line: int | None = None) -> PackError:
        return PackError([Problem(name, line, None, message)])

    try:
        node = compose_yaml(text)
        data = construct_yaml(node)
    except YamlRefused as exc:
        raise fail(exc.message, exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = " ".join(part for part in (exc.context, exc.problem) if part)
        raise fail(f"invalid YAML: {detail}", mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise fail(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise fail(f"nests deeper than {limits.max_json_depth} levels") from None
    if nesting_depth_exceeds(data, limits.max_json_depth):
        raise fail(f"nests deeper than {limits.max_json_depth} levels")
    if not isinstance(data, dict):
        raise fail("the manifest root must be a mapping (key: value pairs)")
    return data, _key_lines(node)


def _key_lines(node: yaml.Node | None) -> dict[str, int]:
    """Dotted field path -> 1-based line of its key, so field errors can name a line."""
    lines: dict[str, int] = {}
    stack: list[tuple[yaml.Node, str]] = [(node, "")] if node is not None else []
    while stack:
        current, prefix = stack.pop()
        if isinstance(current, yaml.MappingNode):
            for key_node, value_node in current.value:
                path = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
                lines[path] = key_node.start_mark.line + 1
                stack.append((value_node, path))
        elif isinstance(current, yaml.SequenceNode):
            for index, item in enumerate(current.value):
                lines[f"{prefix}[{index}]"] = item.start_mark.line + 1
                stack.append((item, f"{prefix}[{index}]"))
    return lines


_LAST_STEP = re.compile(r"^(.*?)(\.[^.\[]+|\[\d+\])$")


def located_problem(name: str, key_lines: dict[str, int], field: str, message: str) -> Problem:
    # A missing key has no line of its own: use the nearest ancestor that has one.
    probe = field
    while probe and probe not in key_lines:
        match = _LAST_STEP.match(probe)
        probe = match.group(1) if match else ""
    return Problem(name, key_lines.get(probe), field, message)


# --- checking --------------------------------------------------------------------------------


def _check(data: dict[str, Any], pack: Path) -> list[FieldProblem]:
    problems: list[FieldProblem] = [
        (key, "is not a manifest key (allowed: " + ", ".join(MANIFEST_KEYS) + ")")
        for key in data
        if key not in MANIFEST_KEYS
    ]
    problems += _check_id(data)
    problems += _check_version(data)
    for key, spec in _PLAIN_FIELDS.items():
        if key in data:
            problems += spec.check(data[key], key)
    problems += _check_asset_roots(data, pack)
    if "canary" in data:
        problems += _check_canary(data["canary"])
    return problems


def _check_id(data: dict[str, Any]) -> list[FieldProblem]:
    if "id" not in data:
        return [("id", "is required")]
    value = data["id"]
    if not isinstance(value, str) or not value.strip():
        return [("id", "must be a non-empty string")]
    if not ID_PATTERN.match(value):
        return [
            (
                "id",
                "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or"
                " digit, because it appears in URLs",
            )
        ]
    return []


def _check_version(data: dict[str, Any]) -> list[FieldProblem]:
    if "version" not in data:
        return [("version", "is required")]
    value = data["version"]
    # bool is an int subclass and "1" is a string: both are refused, as upstream does.
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return [("version", "must be an integer of at least 1 (not a string or boolean)")]
    if value > MAX_VERSION:
        return [("version", f"must be at most {MAX_VERSION}")]
    return []


def _title(value: Any, path: str) -> list[FieldProblem]:
    if isinstance(value, str) and len(value) > MAX_TITLE_CHARS:
        return [(path, f"must be at most {MAX_TITLE_CHARS} characters")]
    return non_empty_string(value, path)


def _evaluation_names(value: Any, path: str) -> list[FieldProblem]:
    if not isinstance(value, list):
        return [(path, "must be an array of evaluator names like securebench@1")]
    return [
        (f"{path}[{index}]", "must be an evaluator name and version like securebench@1")
        for index, item in enumerate(value)
        if not isinstance(item, str) or not EVALUATION_NAME.match(item)
    ]


_BUDGETS = strict_object(
    {
        "wall_time_seconds": Field(positive_number),
        "tokens": Field(positive_integer),
        "usd": Field(non_negative_number),
        "attempts": Field(positive_integer),
        "steps": Field(positive_integer),
    }
)

_CONTRACT = strict_object(
    {
        "budgets": Field(_BUDGETS),
        "allowed_to_modify": Field(string_list),
        "read_only": Field(string_list),
        # Paths, or objects with a rule of their own (format, schema, max_bytes ...).
        "required_outputs": Field(required_outputs),
        "compatible_evaluations": Field(_evaluation_names),
    }
)

# Optional keys whose checks need nothing but the value; `id`, `version` and `asset_roots`
# have their own functions.
_PLAIN_FIELDS = {
    "title": Field(_title),
    "description": Field(string),
    "defaults": Field(
        strict_object(
            {
                "family": Field(non_empty_string),
                "environment": Field(json_object),
            }
        )
    ),
    "asset_defaults": Field(strict_object({"read_only": Field(boolean)})),
    "contract": Field(_CONTRACT),
}


def _check_canary(value: Any) -> list[FieldProblem]:
    """One string or a non-empty list of strings, each long enough not to occur by chance.
    Messages never repeat the value: canaries are sealed."""
    rule = (
        f"must be a string of {MIN_CANARY_CHARS} to {MAX_CANARY_CHARS} characters"
        " (surrounding spaces not counted)"
    )
    if isinstance(value, str):
        return [] if _canary_ok(value) else [("canary", rule)]
    if not isinstance(value, list) or not value:
        return [("canary", "must be a string or a non-empty list of strings")]
    if len(value) > MAX_CANARIES:
        return [("canary", f"may list at most {MAX_CANARIES} canary strings")]
    return [
        (f"canary[{index}]", rule)
        for index, item in enumerate(value)
        if not isinstance(item, str) or not _canary_ok(item)
    ]


def _canary_ok(text: str) -> bool:
    return MIN_CANARY_CHARS <= len(text.strip()) <= MAX_CANARY_CHARS


def _canaries(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value or [])
    # Stripped (the spaces around a YAML scalar are no part of the marker), first seen kept.
    return tuple(dict.fromkeys(item.strip() for item in items))


def _check_asset_roots(data: dict[str, Any], pack: Path) -> list[FieldProblem]:
    roots = data.get("asset_roots", {})
    if not isinstance(roots, dict):
        return [("asset_roots", "must be an object")]
    problems = [
        (f"asset_roots.{key}", "is not an asset root (allowed: public, eval)")
        for key in roots
        if key not in DEFAULT_ROOTS
    ]
    safe: dict[str, str] = {}
    for key, default in DEFAULT_ROOTS.items():
        value = roots.get(key, default)
        reason = unsafe_path_reason(value) or _root_on_disk_problem(pack, normalise(value))
        if reason:
            problems.append((f"asset_roots.{key}", reason))
        else:
            safe[key] = normalise(value)
    if len(safe) == 2 and overlaps(safe["public"], safe["eval"]):
        problems.append(
            (
                "asset_roots",
                f"public ({safe['public']}) and eval ({safe['eval']}) may not overlap:"
                " files under the eval root would be served publicly",
            )
        )
    return problems


def _root_on_disk_problem(pack: Path, rel: str) -> str | None:
    """An asset root may be absent, but if present it must be a real directory in the pack."""
    current = pack
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            if not current.resolve().is_relative_to(pack.resolve()):
                return "may not resolve outside the pack (it is a symlink)"
            # Even inside the pack a symlinked root could alias the other root.
            return "may not be or pass through a symlink"
        if not current.exists():
            return None
        if not current.is_dir():
            return "must be a directory"
    return None


def _build(data: dict[str, Any]) -> Manifest:
    defaults = data.get("defaults", {})
    roots = data.get("asset_roots", {})
    return Manifest(
        id=data["id"],
        version=data["version"],
        title=data.get("title"),
        description=data.get("description"),
        default_family=defaults.get("family"),
        default_environment=dict(defaults.get("environment", {})),
        public_root=normalise(roots.get("public", DEFAULT_ROOTS["public"])),
        eval_root=normalise(roots.get("eval", DEFAULT_ROOTS["eval"])),
        read_only_default=data.get("asset_defaults", {}).get("read_only", True),
        contract=data.get("contract"),
        canonical={key: value for key, value in data.items() if key != "canary"},
        canaries=_canaries(data.get("canary")),
    )
