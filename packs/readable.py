"""A task's public input as a person reads it: code highlighted, prose as text with its line
breaks, structured data as pretty-printed JSON; never one escaped JSON string (``\\n``,
``\\"\\"\\"``).

Only values a page may already show pass through here (the agent payload, an episode's
observation): this changes how they read, not what is shown. Every character reaches the page
escaped, by Pygments (which escapes what it is given) or by ``format_html``; nothing marks
unescaped input safe.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import JsonLexer, PythonLexer, get_lexer_by_name
from pygments.util import ClassNotFound

# Public fields whose text is source code whatever it looks like.
CODE_FIELDS = frozenset({"starter_code", "code", "signature", "stub", "function_signature"})
# A text whose first line opens like source code (a HumanEval prompt is a Python stub).
CODE_START = re.compile(r"^\s*(def |class |async def |import |from \S+ import |@\w|#!)")
# Longest value shown inline beside its name; longer or multi-line text gets a block.
INLINE_CHARS = 80

# The fields that say what the task asks, shown before the others.
ASKS_FIRST = ("question", "prompt", "instructions", "goal")

FieldKind = Literal["code", "text", "inline", "data"]


@dataclass(frozen=True)
class ReadableField:
    name: str
    kind: FieldKind
    html: SafeString


def highlighted(text: str, lexer: Lexer, *, line_numbers: bool = False) -> SafeString:
    """The site's one Pygments rendering (task input, candidates, sealed files)."""
    formatter = HtmlFormatter(
        cssclass="highlight", wrapcode=True, **({"linenos": "inline"} if line_numbers else {})
    )
    return mark_safe(highlight(text, lexer, formatter))  # noqa: S308 (escaped by Pygments)


def code_lexer(language: str | None) -> Lexer:
    try:
        return get_lexer_by_name(language or "python")
    except ClassNotFound:
        return PythonLexer()


def is_code(name: str, text: str) -> bool:
    return name in CODE_FIELDS or bool(CODE_START.match(text))


def readable_field(name: str, value: Any, *, language: str | None = None) -> ReadableField:
    """One field: code highlighted in the task's language, prose escaped (the page keeps its
    line breaks), short text inline, anything else as indented JSON."""
    if isinstance(value, str):
        if is_code(name, value):
            return ReadableField(name, "code", highlighted(value, code_lexer(language)))
        if "\n" not in value and len(value) <= INLINE_CHARS:
            return ReadableField(name, "inline", format_html("{}", value))
        return ReadableField(name, "text", format_html("{}", value))
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    return ReadableField(name, "data", highlighted(pretty, JsonLexer()))


def readable_fields(payload: Any) -> list[ReadableField]:
    """Every field of a task's public payload: what the task asks first (its question, prompt
    or instructions), then the rest in the payload's order (stored payloads sort their keys).
    A payload that is not an object is one data field."""
    if not isinstance(payload, dict):
        return [readable_field("value", payload)]
    language = payload.get("language") if isinstance(payload.get("language"), str) else None
    names = sorted(payload, key=lambda name: ASKS_FIRST.index(name) if name in ASKS_FIRST else 99)
    return [readable_field(str(name), payload[name], language=language) for name in names]
