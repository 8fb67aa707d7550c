"""How the leak audit reads text: passages, short windows, and the views of public text.

A passage is 8 word tokens (letters or identifiers, case aside) with everything between them
(numbers, punctuation: ``ord(ch) + 5`` is not ``ord(ch) - 5``). A value too short for one is
read as windows of 4 terms (words or numbers, with the punctuation between), so "Treaty of
Westphalia in 1648" is not "Treaty of Westphalia in 1700". Hashes are Python's tuple hashes:
compared within one audit, never stored.
"""

from __future__ import annotations

import codecs
import html
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

WORDS = 8  # words in a passage
TERMS = 4  # words or numbers in a short window
MIN_VALUE_WORDS = 4
MIN_VALUE_CHARS = 20
MAX_PASSAGE_CHARS = 400

_TOKEN = re.compile(r"[^\W\d]\w*|\d\w*|[^\w\s]")
_SPACE = re.compile(r"\s+")
_DIFF_START = re.compile(r"^(diff --git |--- \S)", re.MULTILINE)
# JSON and notebook escapes: a notebook stores its cells' lines as "...\n" strings.
_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[nrtbf\"\\/])")
_JSON_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": " ", "f": " ", '"': '"', "\\": "\\", "/": "/"}
_HTML_TAG = re.compile(r"<[A-Za-z/!?][^<>]{0,2000}>")
_HTML_ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[A-Za-z]{2,10});")
# Line decorations: comment markers, quotes and "+" of a string broken over lines.
# A line's leading decoration: a comment marker, a quote or "+" of a string broken over lines.
_LINE_START = re.compile(r"(?:#+|//+|/\*+|\*+/?|--+|;+|%+|>+|\+|[rbfu]?[\"'`])[ \t]*")
_QUOTES = "\"'`"
_EMPHASIS = re.compile(r"\*\*|__|~~|(?<=\w)\*|\*(?=\w)|`")
_HYPHEN_WRAP = re.compile(r"(\w)-[ \t]*\r?\n[ \t]*(\w)")
_NAME_SEPARATORS = re.compile(r"[_\-./\\!]+")


def _latin_fallback(error: UnicodeError) -> tuple[str, int]:
    """Bytes that are not UTF-8 read as Windows-1252 (Latin-1 where it has no character):
    an accented letter in a legacy export stays a letter instead of a break in the word."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    chunk = error.object[error.start : error.end]
    text = "".join(bytes([byte]).decode("cp1252", errors="ignore") or chr(byte) for byte in chunk)
    return text, error.end


LATIN_FALLBACK = "securebench-latin-fallback"
codecs.register_error(LATIN_FALLBACK, _latin_fallback)
# Characters that change how text looks to a tokenizer but not to a reader: zero-width
# spaces and joiners, soft hyphens, word joiners, byte-order marks.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"))


def canonical(text: str) -> str:
    """Text as a reader sees it: compatibility forms folded (full-width letters, ligatures,
    decomposed accents: NFKC) and invisible characters dropped. ASCII is returned as is."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text.translate(_INVISIBLE))


def normalise(text: str) -> str:
    """Case, compatibility forms and runs of whitespace aside."""
    return _SPACE.sub(" ", canonical(text).casefold()).strip()


def _is_word(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def _is_term(token: str) -> bool:
    return token[0].isalnum() or token[0] == "_"


def passage_hashes(text: str) -> list[int]:
    """The hash of every passage of ``text``, in order (index = passage number)."""
    if len(text) < 2 * WORDS - 1:  # too short to hold 8 words and the spaces between
        return []
    tokens = _TOKEN.findall(canonical(text).lower())
    # Inlined _is_word: this runs for every token of the pack.
    words = [i for i, token in enumerate(tokens) if token[0].isalpha() or token[0] == "_"]
    last = WORDS - 1
    return [hash(tuple(tokens[words[k] : words[k + last] + 1])) for k in range(len(words) - last)]


def window_hashes(text: str) -> list[int]:
    """The hash of every short window of ``text`` (4 terms and what is between them). The
    tuple starts with a marker, so a window never equals a passage."""
    tokens = _TOKEN.findall(canonical(text).lower())
    terms = [i for i, token in enumerate(tokens) if token[0].isalnum() or token[0] == "_"]
    last = TERMS - 1
    return [
        hash(("\0w", *tokens[terms[k] : terms[k + last] + 1])) for k in range(len(terms) - last)
    ]


def word_count(text: str) -> int:
    return sum(1 for token in _TOKEN.findall(text) if _is_word(token))


def passage_text(text: str, number: int, size: int = WORDS, terms: bool = False) -> str:
    """The text of passage (or window) ``number``, for sealed evidence."""
    text = canonical(text)
    lowered = text.lower()
    keep = _is_term if terms else _is_word
    spans = [match.span() for match in _TOKEN.finditer(lowered) if keep(match.group())]
    start, end = spans[number][0], spans[number + size - 1][1]
    source = text if len(lowered) == len(text) else lowered
    return source[start:end][:MAX_PASSAGE_CHARS]


def leaves(value: Any, *, keys: bool = False, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """Every string inside a JSON value; with ``keys``, dict keys too (public data shows its
    keys; a sealed value's keys are names, not content); nothing under a key in ``skip``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            if keys:
                stack.extend(key for key in item if isinstance(key, str))
            stack.extend(reversed([v for k, v in item.items() if k not in skip]))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))


def patch_sides(patch: str) -> tuple[str, str] | None:
    """A unified diff's (added lines, context and removed lines), or None for other text.
    The second side is the repository before the patch: public by definition."""
    if not _DIFF_START.search(patch) or "\n@@" not in patch:
        return None
    added, base = [], []
    for line in patch.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
        elif line[:1] in (" ", "-") and not line.startswith("---"):
            base.append(line[1:])
    return "\n".join(added), "\n".join(base)


def unmarked(text: str) -> str:
    """Public text as a diff's lines read without their ``+``/``-`` markers (empty for text
    with none): a gold patch shipped as a ``.patch`` file puts a marker token between every
    two lines, so no passage of its sealed side (read unmarked) spanned a line break."""
    lines = text.splitlines()
    if not any(line[:1] in ("+", "-") for line in lines):
        return ""
    return "\n".join(line[1:] if line[:1] in ("+", "-") else line for line in lines)


def decoded(text: str) -> str:
    """Text as a reader sees it once JSON escapes are undone and HTML tags and entities are
    read (empty when there are none): in a notebook every line ends in ``\\n`` glued to the
    next word, and a tag between two words breaks a passage just as well."""
    result = text
    if "\\" in result:
        result = _JSON_ESCAPE.sub(_json_char, result)
    if "<" in result:
        result = _HTML_TAG.sub(" ", result)
    if "&" in result:
        result = _HTML_ENTITY.sub(lambda match: html.unescape(match.group()), result)
    return "" if result == text else result


def _json_char(match: re.Match[str]) -> str:
    escape = match.group(1)
    if escape[0] == "u":
        return chr(int(escape[1:], 16))
    return _JSON_SIMPLE[escape]


def prose(text: str) -> str:
    """Text as prose, once the marks that wrap it are gone (empty when there are none): a
    comment marker or the quotes and ``+`` of a string broken over lines, Markdown emphasis,
    a word hyphenated at a line break, TeX's ``~``. Each would otherwise put a token between
    two words of every line, and no passage of the text would span a line."""
    if "\n" not in text and not _EMPHASIS.search(text) and "~" not in text:
        return ""
    result = _HYPHEN_WRAP.sub(r"\1\2", text)
    result = "\n".join(_bare_line(line) for line in result.split("\n"))
    result = _EMPHASIS.sub("", result).replace("~", " ")
    return "" if result == text else result


def _bare_line(line: str) -> str:
    """A line without its decorations, in linear time (string methods and an anchored
    match: a regex searching for them backtracked on long runs of blanks)."""
    body = line.strip(" \t\r")
    start = _LINE_START.match(body)
    if start:
        body = body[start.end() :]
    for end in ("*/", "\\", "+"):
        if body.endswith(end):
            body = body[: -len(end)].rstrip(" \t")
            break
    if body[-1:] in (",", ";") and body[:-1].rstrip(" \t")[-1:] in tuple(_QUOTES):
        body = body[:-1].rstrip(" \t")
    if body[-1:] in tuple(_QUOTES):
        body = body[:-1]
    return body


def public_views(text: str) -> list[str]:
    """The ways an agent can read public text: as it is, without diff markers, decoded, as
    prose."""
    views = [text]
    for view in (unmarked(text), decoded(text), prose(text)):
        if view:
            views.append(view)
    return views


def name_views(name: str) -> list[str]:
    """A file or member name as text, also with its separators read as spaces (a name like
    ``treaty_of_westphalia.txt`` is one identifier token otherwise)."""
    spaced = _NAME_SEPARATORS.sub(" ", name)
    return [name, spaced] if spaced != name else [name]


def numbered(hashes: list[int], known: Iterable[int] = ()) -> dict[int, int]:
    """Each distinct hash → its first number, less the ``known`` ones."""
    first: dict[int, int] = {}
    for number, digest in enumerate(hashes):
        first.setdefault(digest, number)
    for digest in known:
        first.pop(digest, None)
    return first


def lines(text: str) -> set[str]:
    return {line for line in (normalise(raw) for raw in text.splitlines()) if line}


def matters(text: str) -> bool:
    """Long enough that finding it whole in public text is no coincidence."""
    return len(normalise(text)) >= MIN_VALUE_CHARS and word_count(text) >= MIN_VALUE_WORDS
