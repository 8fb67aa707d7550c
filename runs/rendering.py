"""Readable renderings of privileged values: code highlighted, patches as per-file diffs,
JSON pretty-printed. Pygments escapes every character it is given; nothing here marks
unescaped input safe."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.utils.safestring import SafeString
from pygments.lexer import Lexer
from pygments.lexers import (
    BashLexer,
    DiffLexer,
    JsonLexer,
    PythonLexer,
    TextLexer,
    get_lexer_for_filename,
)
from pygments.util import ClassNotFound

from packs.readable import highlighted

# Resource names whose text value is source code (python in every family we know).
CODE_NAMES = frozenset(
    {"canonical_solution", "reference_solution", "solution", "code", "tests", "checker"}
)
PATCH_NAMES = frozenset({"gold_patch", "test_patch", "patch"})


@dataclass(frozen=True)
class Block:
    """One rendered piece of a value: a title (a file path, a nested field) and its HTML."""

    title: str
    html: SafeString


def _highlight(text: str, lexer: Lexer) -> SafeString:
    return highlighted(text, lexer, line_numbers=True)


def is_patch(name: str, text: str) -> bool:
    head = text.lstrip()[:200]
    return (
        name in PATCH_NAMES
        or name.endswith("_patch")
        or head.startswith(("diff --git ", "--- a/", "--- "))
        and "\n+++ " in text
    )


def patch_blocks(title: str, text: str) -> list[Block]:
    """A unified diff cut into one block per file, each headed by the file's path."""
    chunks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git ") or (
            line.startswith("--- ") and (not chunks or _has_hunk(chunks[-1]))
        ):
            chunks.append([line])
        elif chunks:
            chunks[-1].append(line)
        else:
            chunks.append([line])
    blocks = []
    for chunk in chunks:
        body = "".join(chunk)
        blocks.append(Block(f"{title} · {_diff_path(chunk)}", _highlight(body, DiffLexer())))
    return blocks or [Block(title, _highlight(text, DiffLexer()))]


def _has_hunk(lines: list[str]) -> bool:
    return any(line.startswith("@@") for line in lines)


def _diff_path(lines: list[str]) -> str:
    for line in lines:
        if line.startswith("+++ "):
            path = line[4:].strip()
            return path[2:] if path.startswith("b/") else path
    first = lines[0].strip() if lines else ""
    if first.startswith("diff --git "):
        return first.rsplit(" b/", 1)[-1]
    return "patch"


def text_blocks(name: str, text: str) -> list[Block]:
    if is_patch(name, text):
        return patch_blocks(name, text)
    lexer: Lexer = PythonLexer() if name in CODE_NAMES else TextLexer()
    return [Block(name, _highlight(text, lexer))]


def value_blocks(name: str, value: Any) -> list[Block]:
    """Blocks for a resource value: text as code/diff/plain, structures as JSON followed by
    their nested code and patch strings highlighted on their own."""
    if isinstance(value, str):
        return text_blocks(name, value)
    pretty = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    blocks = [Block(name, _highlight(pretty, JsonLexer()))]
    for path, text in _nested_texts(value, name):
        leaf = path.rsplit(".", 1)[-1]
        if is_patch(leaf, text):
            blocks.extend(patch_blocks(path, text))
        elif leaf in CODE_NAMES:
            blocks.append(Block(path, _highlight(text, PythonLexer())))
    return blocks


def _nested_texts(value: Any, path: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and ("\n" in item or key in CODE_NAMES | PATCH_NAMES):
                found.append((f"{path}.{key}", item))
            else:
                found.extend(_nested_texts(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_nested_texts(item, f"{path}[{index}]"))
    return found


def file_html(path: str, data: bytes) -> SafeString | None:
    """A sealed file highlighted by its name; None when it is not text."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if path.endswith(".sh"):
        lexer: Lexer = BashLexer()
    else:
        try:
            lexer = get_lexer_for_filename(path, text)
        except ClassNotFound:
            lexer = TextLexer()
    if is_patch(path, text):
        lexer = DiffLexer()
    return _highlight(text, lexer)


def log_html(text: str) -> SafeString:
    return _highlight(text, TextLexer())
