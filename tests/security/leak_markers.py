"""Markers for the leak suites, and every form in which a response could carry one.

Each sealed value of the leak packs carries a marker: a fixed ASCII prefix, a label, and a
tail of characters that every encoding treats differently (a double and a single quote, an
ampersand, a slash, a plus, a space, a non-ASCII letter, an angle bracket). A response leaks
when it holds a marker literally, HTML-escaped, JSON-escaped, URL-encoded (quote and
quote_plus) or base64-encoded (standard or URL-safe alphabet, at any byte alignment).
"""

from __future__ import annotations

import base64
import html
import json
import re
from functools import cache
from urllib.parse import quote, quote_plus

from django.utils.html import escape as django_escape

MARK = "SEALEDMARK"
TAIL = "\"q'&a/é<+ z"
# Numbers cannot carry a text marker; these are odd enough never to appear by chance.
# Long enough that no id, count, size or random token on a page spells one by chance: a
# four-digit marker ("7319") did, twice, on PostgreSQL passes with the higher ids of a
# parallel run.
NUMERIC_MARKS = ("0.000731", "731904581")
LABELS: list[str] = []


def mark(label: str) -> str:
    """The marker of one sealed value (registered, so the suites know every label)."""
    if label not in LABELS:
        LABELS.append(label)
    return f"{MARK}-{label}-{TAIL}"


def plain_mark(label: str) -> str:
    """A marker for fields that must be a safe path or name: no special characters."""
    if label not in LABELS:
        LABELS.append(label)
    return f"{MARK}-{label}.txt"


def labels_in(text: str) -> set[str]:
    """Labels of the markers a (tag-stripped, unescaped) text shows."""
    return {found.rstrip("-") for found in re.findall(rf"{MARK}-([\w-]+)", text)}


def _json_forms(value: str) -> set[str]:
    ascii_form = json.dumps(value)[1:-1]
    utf8_form = json.dumps(value, ensure_ascii=False)[1:-1]
    # Django's json_script also escapes <, > and & for HTML.
    script_form = ascii_form.replace("<", "\\u003C").replace(">", "\\u003E")
    return {ascii_form, utf8_form, script_form.replace("&", "\\u0026")}


def _base64_cores(data: bytes) -> set[str]:
    """Base64 text that encodes ``data`` wherever it sits in a longer byte string: for each
    of the three alignments, the characters that depend on ``data``'s bits only."""
    cores = set()
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * offset + data).decode("ascii")
            start = -(-offset * 4 // 3)  # ceil(offset * 8 / 6)
            end = (offset + len(data)) * 4 // 3  # floor(... * 8 / 6)
            cores.add(encoded[start:end])
    return cores


@cache
def encoded_forms(value: str) -> dict[str, set[str]]:
    """Every encoded form of ``value`` a leak check looks for, by encoding."""
    json_forms = _json_forms(value)
    return {
        "literal": {value},
        "html-escaped": {html.escape(value), html.escape(value, quote=False), django_escape(value)},
        "json-escaped": json_forms,
        # JSON shown in a page: escaped for JSON, then for HTML.
        "json-escaped, then html-escaped": {django_escape(form) for form in json_forms},
        "url-encoded": {quote(value), quote(value, safe=""), quote_plus(value)},
        "base64": _base64_cores(value.encode("utf-8")),
    }


@cache
def _prefix_base64() -> tuple[str, ...]:
    return tuple(_base64_cores(f"{MARK}-".encode("ascii")))


def leaks_in(text: str) -> list[str]:
    """What ``text`` leaks: '<label> (<encoding>)' for each marker form found, or the bare
    prefix (a marker cut short), or a numeric marker. Empty when nothing leaks."""
    # Every encoding above but base64 keeps the ASCII prefix: only then (or when base64 of
    # the prefix is there) are the full forms worth searching.
    prefix = [
        name
        for name, present in (
            ("a marker prefix", MARK in text),
            ("a marker prefix (base64)", any(core in text for core in _prefix_base64())),
        )
        if present
    ]
    found: list[str] = []
    if prefix:
        found = [
            f"{label} ({encoding})"
            for label in LABELS
            for encoding, forms in encoded_forms(mark(label)).items()
            if any(form in text for form in forms)
        ]
        found += [
            f"{label} ({encoding})"
            for label in LABELS
            for encoding, forms in encoded_forms(plain_mark(label)).items()
            if any(form in text for form in forms)
        ]
        # A marker cut short, or inside an encoding of an encoding, still leaks.
        found = found or prefix
    for number in NUMERIC_MARKS:
        # Delimited, so a digest that happens to contain the digits is no match.
        if re.search(rf"(?<![\w.]){re.escape(number)}(?!\w)", text):
            found.append(number)
    return found
