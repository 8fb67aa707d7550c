"""Canonical JSON and the content digest of a pack.

The digest is sha256 over a domain-separation prefix and length-framed records: the canonical
manifest, each row in order, then the sorted (root, path, sha256) of every file under both
asset roots. Framing every record with its length makes the byte stream unambiguous, so no
two different packs can be concatenated into the same input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

DIGEST_DOMAIN = b"securebench/pack-digest/v1\x00"


# One shared encoder: json.dumps with options builds a new encoder on every call, which is
# most of the cost for the millions of small values a large pack has.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """Key order and whitespace never matter; the same value always gives the same bytes."""
    # Raises UnicodeEncodeError for a lone surrogate ("\ud800"); callers report it.
    return _CANONICAL.encode(value).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def nesting_depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when containers nest deeper than max_depth (iterative: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class PackDigest:
    """Fed as the compiler goes (rows stream in), so rows need not be kept as bytes."""

    def __init__(self, manifest: Any) -> None:
        self._hash = hashlib.sha256(DIGEST_DOMAIN)
        self._record(b"manifest", canonical_json(manifest))

    def add_row(self, row_json: bytes) -> None:
        self._record(b"row", row_json)

    def finish(self, files: Iterable[tuple[str, str, str]]) -> str:
        for root, path, sha in sorted(files):
            self._record(b"file", canonical_json([root, path, sha]))
        return self._hash.hexdigest()

    def _record(self, kind: bytes, data: bytes) -> None:
        self._hash.update(kind + b"\x00" + len(data).to_bytes(8, "big"))
        self._hash.update(data)


def contains_nul(value: Any) -> bool:
    """True when a string or key holds U+0000, which PostgreSQL's jsonb cannot store."""
    return any("\x00" in text for text in _strings(value))


def contains_lone_surrogate(value: Any) -> bool:
    """True when a string or key holds an unpaired UTF-16 surrogate (JSON lets "\\ud800"
    through): it is not text, and no database, page or log can hold it."""
    return any(not _encodable(text) for text in _strings(value))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _strings(value: Any) -> Iterator[str]:
    """Every string of a parsed JSON value, keys included."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
