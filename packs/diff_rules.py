"""The written rules that classify a change between two contract versions: breaking edits change
what a valid run may do or how it is scored; non-breaking edits clarify wording. Pure functions
over plain values, no database: packs.diff applies them to the rows of two versions, and the
diff page and API state them as written here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# Bump when a rule below changes: cached verdicts (packs.diff.versions_comparable) are keyed
# by it, so a new rule never answers from an old verdict.
RULES_VERSION = 1

# "Small" for a public edit (rule public-wording). A character-level measure: it cannot see
# meaning (inserting "not " is four characters), so the other conditions carry the weight
# that a measure cannot: same shape, same numbers, sealed lanes untouched.
MIN_SIMILARITY = 0.90
MAX_CHANGED_CHARS = 40
# Texts longer than this are compared line by line first, then character by character within
# the changed lines only, so a typo in a long prompt costs no quadratic character match.
DIRECT_COMPARE_CHARS = 4000
NUMBER = re.compile(r"\d+")


class Impact(StrEnum):
    BREAKING = "breaking"
    WORDING = "wording"  # non-breaking: clarifies text, a run may do the same things
    NEUTRAL = "neutral"  # non-breaking: listed for completeness, judged by its effect on tasks


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    text: str


RULES: tuple[Rule, ...] = (
    Rule(
        "evaluation-lanes",
        "Evaluation inputs and hidden lanes",
        "Any change in a task's evaluation-inputs or hidden lane is breaking: a value "
        "(compared by its sha256 digest only), a resource added or removed, or a resource "
        "moved between lanes. It changes how a run is scored.",
    ),
    Rule(
        "files",
        "Asset files",
        "Any change of a file under either asset root (its content by sha256, a file added "
        "or removed) is breaking: sealed files are what verifiers check against, and public "
        "asset files are what the agent works with.",
    ),
    Rule(
        "task-set",
        "Task set",
        "A task added or removed is breaking: scores over different task sets do not compare.",
    ),
    Rule(
        "task-setup",
        "Family, environment and metadata",
        "A change of a task's family (which verifier scores it), environment (the sandbox it "
        "runs in) or metadata (read by verifiers, e.g. entry_point) is breaking.",
    ),
    Rule(
        "contract",
        "Contract",
        "Any change of the contract is breaking: each budget, allowed_to_modify, read_only, "
        "required_outputs and compatible_evaluations (order included), and the manifest's "
        "asset_defaults.read_only. They define what a valid run may do and what may score it.",
    ),
    Rule(
        "public-wording",
        "Public lane",
        "An edit of a public value is wording (non-breaking) only when the task's "
        "evaluation-inputs and hidden lanes and its files are unchanged and the edit is "
        "small: the value keeps its JSON shape (same keys, same list lengths, same numbers, "
        "booleans and nulls; only strings differ), every number written in its text stays "
        f"the same, at most {MAX_CHANGED_CHARS} characters change (inserted, deleted or "
        "replaced, as difflib.SequenceMatcher aligns them) and the similarity is at least "
        f"{MIN_SIMILARITY:.2f} (2 × matching characters ÷ characters of both versions). "
        "Anything else in the public lane is breaking: a bigger rewrite, a public input "
        "added or removed, a changed asset descriptor.",
    ),
    Rule(
        "manifest-wording",
        "Title, description and layout",
        "Title and description edits are wording. Manifest defaults, asset folder names and "
        "the order of tasks are listed but not breaking by themselves: their effect on each "
        "task is judged by the rules above.",
    ),
)
RULE_IDS = frozenset(rule.id for rule in RULES)

# Manifest keys (outside `contract`) and how a change of each is classified.
MANIFEST_WORDING = frozenset({"title", "description"})
MANIFEST_NEUTRAL = frozenset({"defaults", "asset_roots"})
# Compared apart (id and version always name the version; contract has its own section).
MANIFEST_SKIPPED = frozenset({"id", "version", "contract"})
# Keys the compiler writes into every task's metadata: they name the version or repeat the
# manifest (compared there), so comparing them per task would mark every task changed.
RESERVED_METADATA = frozenset({"benchmark_pack", "environment", "asset_roots", "asset_defaults"})


def manifest_field_impact(field: str) -> tuple[Impact, str]:
    """Impact and rule id of a change of one flattened manifest field ("defaults.family")."""
    top = field.split(".", 1)[0]
    if top in MANIFEST_WORDING:
        return Impact.WORDING, "manifest-wording"
    if top in MANIFEST_NEUTRAL:
        return Impact.NEUTRAL, "manifest-wording"
    # asset_defaults and any key a later manifest format adds: what a run may do.
    return Impact.BREAKING, "contract"


def flatten(mapping: dict[str, Any] | None, *, skip: frozenset[str] = frozenset()) -> dict:
    """One level of nesting flattened ("budgets.tokens"), so each key is its own change."""
    flat: dict[str, Any] = {}
    for key, value in (mapping or {}).items():
        if key in skip:
            continue
        if isinstance(value, dict) and value:
            for sub, item in value.items():
                flat[f"{key}.{sub}"] = item
        else:
            flat[key] = value
    return flat


def author_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k not in RESERVED_METADATA}


# --- the edit measure ---------------------------------------------------------------------


@dataclass(frozen=True)
class EditMeasure:
    """How much a public value changed, in the terms rule public-wording states."""

    same_shape: bool
    numbers_kept: bool
    changed_chars: int
    similarity: float

    @property
    def small(self) -> bool:
        return (
            self.same_shape
            and self.numbers_kept
            and self.changed_chars <= MAX_CHANGED_CHARS
            and self.similarity >= MIN_SIMILARITY
        )

    def describe(self) -> str:
        if not self.same_shape:
            return "JSON shape, a number, a boolean or a key changed"
        text = f"{self.changed_chars} character{'' if self.changed_chars == 1 else 's'} changed, "
        text += f"similarity {self.similarity:.2f}"
        return text if self.numbers_kept else text + ", a number changed"


def measure_edit(before: Any, after: Any) -> EditMeasure:
    pairs = string_pairs(before, after)
    if pairs is None:
        return EditMeasure(False, False, 0, 0.0)
    matched = changed = total = 0
    numbers_kept = True
    for old, new in pairs:
        total += len(old) + len(new)
        if old == new:
            matched += len(old)
            continue
        found, lost = text_alignment(old, new)
        matched += found
        changed += lost
        numbers_kept = numbers_kept and NUMBER.findall(old) == NUMBER.findall(new)
    similarity = 1.0 if total == 0 else 2 * matched / total
    return EditMeasure(True, numbers_kept, changed, similarity)


def string_pairs(before: Any, after: Any) -> list[tuple[str, str]] | None:
    """Every (old, new) string of two values of the same JSON shape, in order; None when the
    shapes differ (a key, a list length, a number, a boolean, a null or a type)."""
    pairs: list[tuple[str, str]] = []
    stack = [(before, after)]
    while stack:
        old, new = stack.pop()
        if type(old) is not type(new):  # also tells True from 1 and 1 from 1.0
            return None
        if isinstance(old, str):
            pairs.append((old, new))
        elif isinstance(old, dict):
            keys = sorted(old)
            if keys != sorted(new):
                return None
            stack.extend((old[key], new[key]) for key in reversed(keys))
        elif isinstance(old, list):
            if len(old) != len(new):
                return None
            stack.extend(reversed(list(zip(old, new, strict=True))))
        elif old != new:
            return None
    return pairs


def text_alignment(old: str, new: str) -> tuple[int, int]:
    """(matching characters, changed characters) of two texts, as SequenceMatcher aligns
    them; a changed span counts its longer side (a replaced word of 5 by 3 is 5 changes)."""
    start = _common_prefix(old, new)
    end = _common_prefix(old[start:][::-1], new[start:][::-1])
    a, b = old[start : len(old) - end], new[start : len(new) - end]
    matched, changed = _align(a, b)
    return matched + start + end, changed


def _align(a: str, b: str) -> tuple[int, int]:
    if not a or not b:
        return 0, max(len(a), len(b))
    if len(a) + len(b) <= DIRECT_COMPARE_CHARS:
        return _char_alignment(a, b)
    lines_a, lines_b = a.splitlines(keepends=True), b.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, lines_a, lines_b, autojunk=False)
    matched = changed = 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        part_a, part_b = "".join(lines_a[i1:i2]), "".join(lines_b[j1:j2])
        if op == "equal":
            matched += len(part_a)
        elif len(part_a) + len(part_b) <= DIRECT_COMPARE_CHARS:
            found, lost = _char_alignment(part_a, part_b)
            matched, changed = matched + found, changed + lost
        else:
            changed += max(len(part_a), len(part_b))
    return matched, changed


def _char_alignment(a: str, b: str) -> tuple[int, int]:
    # autojunk off: on texts over 200 characters it would ignore every frequent character
    # (spaces, "e"), and a typo fix would look like a rewrite.
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    matched = changed = 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            matched += i2 - i1
        else:
            changed += max(i2 - i1, j2 - j1)
    return matched, changed


def _common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


# --- inline text diff (public values only) ---------------------------------------------------


@dataclass(frozen=True)
class Segment:
    op: str  # "equal", "delete" or "insert"
    text: str


def inline_segments(old: str, new: str, *, limit: int = 20_000) -> list[Segment] | None:
    """Word-level segments showing how a public text changed; None for texts too long to
    show inline (the page shows both versions instead)."""
    if len(old) + len(new) > limit:
        return None
    words_a, words_b = re.split(r"(\s+)", old), re.split(r"(\s+)", new)
    matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
    segments: list[Segment] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            segments.append(Segment("equal", "".join(words_a[i1:i2])))
            continue
        if i2 > i1:
            segments.append(Segment("delete", "".join(words_a[i1:i2])))
        if j2 > j1:
            segments.append(Segment("insert", "".join(words_b[j1:j2])))
    return segments
