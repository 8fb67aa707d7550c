"""The contract's surfaces: which paths an attempt may change (``allowed_to_modify``) and which
it must leave alone (``read_only``), checked on the paths a live workspace changed.

Globs follow gitignore's wildmatch rules (``pathspec``): ``src/`` is the folder and all below
it, ``*.md`` matches at any depth, ``/setup.py`` only at the root, ``tests/**`` everything
under ``tests``. An empty ``allowed_to_modify`` restricts nothing (the contract names no
surface); ``read_only`` always applies. Paths are relative to the workspace root (the
repository's root for a patch). Django-free: the episodes layer calls it at final_step.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

import pathspec
from pathspec.patterns.gitignore.base import GitIgnorePatternError

MAX_NAMED = 20  # violations listed one by one; more are counted


@dataclass(frozen=True)
class _Glob:
    pattern: str
    spec: pathspec.PathSpec | None  # None: not a valid glob, compared as a literal path

    def matches(self, path: str) -> bool:
        if self.spec is None:
            return path == self.pattern.strip("/")
        return self.spec.match_file(path)


def compile_globs(patterns: Iterable[object]) -> list[_Glob]:
    """The usable globs of a contract list (non-strings and blanks are skipped)."""
    globs: list[_Glob] = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip():
            continue
        try:
            spec: pathspec.PathSpec | None = pathspec.PathSpec.from_lines("gitignore", [pattern])
        except (GitIgnorePatternError, ValueError):
            # A glob the matcher cannot read still names a path: never let it match nothing
            # silently on the read-only side, nor widen the allowed side.
            spec = None
        globs.append(_Glob(pattern=pattern, spec=spec))
    return globs


def normalised_path(path: str) -> str:
    """A changed path as the globs see it: posix, relative, no ``./`` or trailing slash."""
    cleaned = posixpath.normpath(path.replace("\\", "/").lstrip("/"))
    return "" if cleaned == "." else cleaned


@dataclass(frozen=True)
class SurfaceHit:
    """One changed path the contract forbids: ``rule`` is ``read_only`` (``pattern`` is the
    glob it matched) or ``allowed_to_modify`` (it matched none of them; ``pattern`` None)."""

    path: str
    rule: str
    pattern: str | None = None


def surface_hits(
    changed_paths: Iterable[str],
    allowed_to_modify: Iterable[object] | None,
    read_only: Iterable[object] | None,
) -> list[SurfaceHit]:
    """Every changed path the contract forbids, sorted by path; read_only wins over allowed."""
    allowed = compile_globs(allowed_to_modify or [])
    frozen = compile_globs(read_only or [])
    hits: list[SurfaceHit] = []
    for path in sorted({normalised_path(raw) for raw in changed_paths}):
        if not path:
            continue
        hit = next((glob for glob in frozen if glob.matches(path)), None)
        if hit is not None:
            hits.append(SurfaceHit(path, "read_only", hit.pattern))
        elif allowed and not any(glob.matches(path) for glob in allowed):
            hits.append(SurfaceHit(path, "allowed_to_modify"))
    return hits


def more_note(hidden: int) -> str:
    """What stands for the paths past MAX_NAMED."""
    return f"… and {hidden} more path{'s' if hidden != 1 else ''}"


def surface_violations(
    changed_paths: Iterable[str],
    allowed_to_modify: Iterable[object] | None,
    read_only: Iterable[object] | None,
) -> list[str]:
    """One sentence per changed path the contract forbids, naming the path and the rule."""
    problems = [
        f"{hit.path}: read-only (matches {hit.pattern!r})"
        if hit.rule == "read_only"
        else f"{hit.path}: outside allowed_to_modify"
        for hit in surface_hits(changed_paths, allowed_to_modify, read_only)
    ]
    if len(problems) > MAX_NAMED:
        problems = [*problems[:MAX_NAMED], more_note(len(problems) - MAX_NAMED)]
    return problems
