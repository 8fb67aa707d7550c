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


def _globs(patterns: Iterable[object]) -> list[_Glob]:
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


def surface_violations(
    changed_paths: Iterable[str],
    allowed_to_modify: Iterable[object] | None,
    read_only: Iterable[object] | None,
) -> list[str]:
    """One sentence per changed path the contract forbids, naming the path and the rule."""
    allowed = _globs(allowed_to_modify or [])
    frozen = _globs(read_only or [])
    problems: list[str] = []
    for raw in sorted(set(changed_paths)):
        path = normalised_path(raw)
        if not path:
            continue
        hit = next((glob for glob in frozen if glob.matches(path)), None)
        if hit is not None:
            problems.append(f"{path}: read-only (matches {hit.pattern!r})")
        elif allowed and not any(glob.matches(path) for glob in allowed):
            problems.append(f"{path}: outside allowed_to_modify")
    if len(problems) > MAX_NAMED:
        hidden = len(problems) - MAX_NAMED
        problems = [*problems[:MAX_NAMED], f"… and {hidden} more path{'s' if hidden != 1 else ''}"]
    return problems
