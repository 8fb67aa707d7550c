"""Which candidate patches may be applied at all (spec §4.5 policy; security.md A01, A02, A30-A32).

Pure and host-side: it parses the patch text and decides before any sandbox starts. Only
canonical ``diff --git`` sections are accepted (never GNU patch, ed scripts or plain unified
diffs); every path a section names is collected (``diff --git``, rename/copy from/to, ---/+++)
and checked:

1. hard deny, never overridable: absolute paths, ``..``/``.``/empty components, control
   characters or backslashes, first component ``securebench`` (any case), any ``.git``
   component, gitlinks (mode 160000) and symlinks (mode 120000) unless explicitly allowed;
2. ``patch_preserved_paths``: whole sections touching them are dropped (reported as stripped);
3. ``allow_paths`` (if any): every remaining path must match one pattern;
4. sensitive defaults (tests, conftest.py, CI, build and dependency files, shell runners,
   interpreter start-up hooks): denied unless ``allow_sensitive_paths`` matches.

Patterns: normalised (``./`` and a trailing ``/`` dropped); a path matches when the glob
matches (``fnmatchcase``, ``*`` crosses ``/``), or it equals the pattern or lies below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from verifiers.verdict import Reason

# Decision codes (stored in verdict details; the verdict reason comes from Reason).
EMPTY = "empty_candidate_patch"
NONCANONICAL = "noncanonical_candidate_patch"
VIOLATION = "candidate_patch_policy_violation"
EMPTY_FILTERED = "empty_filtered_candidate_patch"
PATH_MISMATCH = "candidate_patch_path_mismatch"

SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"
FILE_MODES = frozenset({"100644", "100755", "100664", SYMLINK_MODE, GITLINK_MODE})

SENSITIVE_FIRST = frozenset({".github", ".gitlab", ".circleci", ".buildkite", "ci", "securebench"})
# Top-level modules the test runner imports: a repo-root pytest.py or pluggy/ would shadow them.
SENSITIVE_TOP_MODULES = frozenset({"pytest", "_pytest", "pluggy", "iniconfig", "py"})
SENSITIVE_ANY = frozenset(
    {"__pycache__", "test", "tests", ".pytest_cache", ".tox", ".nox", "site-packages"}
)
SENSITIVE_NAMES = frozenset(
    {
        ".env",
        ".envrc",
        ".gitattributes",
        ".gitignore",
        ".gitmodules",
        ".pre-commit-config.yaml",
        "cargo.lock",
        "cargo.toml",
        "conftest.py",
        "gnumakefile",
        "go.mod",
        "go.sum",
        "makefile",
        "package-lock.json",
        "package.json",
        "pipfile",
        "pipfile.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "pyproject.toml",
        "requirements-dev.txt",
        "requirements-test.txt",
        "requirements.txt",
        "setup.cfg",
        "setup.py",
        "tox.ini",
        "yarn.lock",
    }
)
# Any component whose stem is one of these (conftest.py, sitecustomize.py, sitecustomize/...).
SENSITIVE_STEMS = frozenset({"conftest", "sitecustomize", "usercustomize"})
SENSITIVE_PREFIXES = ("pytest.", "noxfile.")
SENSITIVE_SUFFIXES = (".sh", ".bash", ".zsh", ".lock", ".pth")
# The part of the sensitive set whose edits are undone from the trusted copy before tests run.
TEST_COMPONENTS = frozenset({"test", "tests"})

_MODE_HEADERS = ("old mode ", "new mode ", "deleted file mode ", "new file mode ")
_SIMILARITY_HEADERS = ("similarity index ", "dissimilarity index ")
_PATH_HEADERS = ("rename from ", "rename to ", "copy from ", "copy to ")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class PatchFormatError(ValueError):
    """The text is not a sequence of canonical ``diff --git`` sections."""


@dataclass(frozen=True)
class FileSection:
    text: str
    paths: tuple[str, ...]  # every path named, in order, a/ and b/ stripped, deduplicated
    modes: tuple[str, ...]  # every file mode named (old/new/deleted/new file/index)

    @property
    def is_symlink(self) -> bool:
        return SYMLINK_MODE in self.modes

    @property
    def is_gitlink(self) -> bool:
        return GITLINK_MODE in self.modes


@dataclass(frozen=True)
class CandidatePolicy:
    allow_paths: tuple[str, ...] = ()
    allow_sensitive_paths: tuple[str, ...] = ()
    patch_preserved_paths: tuple[str, ...] = ()
    allow_symlinks: bool = False
    # Paths the task's own test patch names: as protected as tests/ (and restored likewise).
    protected_paths: tuple[str, ...] = ()

    @classmethod
    def from_value(
        cls, value: Any, *, allow_symlinks: bool = False, protected_paths: Iterable[str] = ()
    ) -> CandidatePolicy:
        """From a validated ``eval.candidate_policy`` value (absent → the strict default)."""
        value = value if isinstance(value, dict) else {}

        def strings(key: str) -> tuple[str, ...]:
            items = value.get(key) or []
            return tuple(str(item) for item in items if isinstance(item, str) and item.strip())

        return cls(
            allow_paths=strings("allow_paths"),
            allow_sensitive_paths=strings("allow_sensitive_paths"),
            patch_preserved_paths=strings("patch_preserved_paths"),
            allow_symlinks=allow_symlinks,
            protected_paths=tuple(protected_paths),
        )


@dataclass(frozen=True)
class PolicyDecision:
    allowed: bool
    reason: str | None = None  # a verdict Reason when not allowed
    code: str | None = None  # one of the decision codes above
    message: str = ""
    paths: tuple[str, ...] = ()  # every path the patch names
    applied_paths: tuple[str, ...] = ()  # paths of the sections that will be applied
    denied_paths: tuple[str, ...] = ()
    stripped_paths: tuple[str, ...] = ()
    patch: str = ""  # the filtered patch text to apply

    def details(self) -> dict[str, Any]:
        return {
            "policy_code": self.code,
            "candidate_patch_paths": list(self.paths),
            "applied_candidate_patch_paths": list(self.applied_paths),
            "denied_candidate_patch_paths": list(self.denied_paths),
            "stripped_candidate_patch_paths": list(self.stripped_paths),
        }


# --- parsing ---------------------------------------------------------------------------------


def unquote_c(token: str) -> str:
    """Decode a git C-quoted name (without its surrounding quotes)."""
    out = bytearray()
    index = 0
    while index < len(token):
        char = token[index]
        if char != "\\":
            out += char.encode("utf-8", "surrogateescape")
            index += 1
            continue
        if index + 1 >= len(token):
            raise PatchFormatError("dangling backslash in a quoted path")
        nxt = token[index + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            index += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", token[index + 1 : index + 4]):
            out.append(int(token[index + 1 : index + 4], 8))
            index += 4
        else:
            raise PatchFormatError(f"unknown escape \\{nxt} in a quoted path")
    return out.decode("utf-8", "surrogateescape")


def _take_quoted(text: str) -> tuple[str, str]:
    """Parse a leading "…" token; return (decoded, rest after it)."""
    index = 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == '"':
            return unquote_c(text[1:index]), text[index + 1 :]
        index += 1
    raise PatchFormatError("unterminated quoted path")


def _strip_prefix(name: str, prefix: str) -> str:
    if not name.startswith(prefix) or len(name) == len(prefix):
        raise PatchFormatError(f"path {name!r} lacks the {prefix!r} prefix")
    return name[len(prefix) :]


def parse_git_header(rest: str) -> tuple[str, str]:
    """The two names of ``diff --git <rest>``, prefixes stripped; ambiguous → error."""
    if rest.startswith('"'):
        old, tail = _take_quoted(rest)
        if not tail.startswith(" "):
            raise PatchFormatError("expected a space between the two paths")
        tail = tail[1:]
        new = _take_quoted(tail)[0] if tail.startswith('"') else tail
        if tail.startswith('"') and _take_quoted(tail)[1]:
            raise PatchFormatError("text after the second path")
        return _strip_prefix(old, "a/"), _strip_prefix(new, "b/")
    if '"' in rest:
        old, _, new = rest.partition(' "')
        decoded, tail = _take_quoted('"' + new)
        if tail:
            raise PatchFormatError("text after the second path")
        return _strip_prefix(old, "a/"), _strip_prefix(decoded, "b/")
    if rest.count(" b/") == 1:
        old, _, new = rest.partition(" b/")
        return _strip_prefix(old, "a/"), new
    # Unquoted names with spaces: only unambiguous when both names are equal.
    half = (len(rest) - 1) // 2
    old, sep, new = rest[:half], rest[half : half + 1], rest[half + 1 :]
    if sep == " " and old[2:] == new[2:]:
        return _strip_prefix(old, "a/"), _strip_prefix(new, "b/")
    raise PatchFormatError("ambiguous 'diff --git' paths")


def _marker_path(rest: str, prefix: str) -> str | None:
    """The path of a ---/+++ line (None for /dev/null)."""
    if rest.endswith("\t"):  # git adds a tab after names that contain spaces
        rest = rest[:-1]
    if rest == "/dev/null":
        return None
    name = _take_quoted(rest)[0] if rest.startswith('"') else rest
    if rest.startswith('"') and _take_quoted(rest)[1]:
        raise PatchFormatError("text after a quoted path")
    return _strip_prefix(name, prefix)


def _header_path(line: str) -> str:
    for prefix in _PATH_HEADERS:
        if line.startswith(prefix):
            rest = line[len(prefix) :]
            return _take_quoted(rest)[0] if rest.startswith('"') else rest
    raise AssertionError(line)


def _hunk_length(lines: Sequence[str], start: int) -> int:
    """Number of lines of the hunk starting at lines[start] (its @@ line included)."""
    match = _HUNK.match(lines[start])
    if match is None:
        raise PatchFormatError("malformed hunk header")
    old_left = int(match.group(2) if match.group(2) is not None else 1)
    new_left = int(match.group(4) if match.group(4) is not None else 1)
    index = start + 1
    while old_left > 0 or new_left > 0:
        if index >= len(lines):
            raise PatchFormatError("hunk ends early")
        line = lines[index].rstrip("\n")
        tag = line[:1]
        if tag == " " or line == "":  # some tools drop the space of an empty context line
            old_left, new_left = old_left - 1, new_left - 1
        elif tag == "-":
            old_left -= 1
        elif tag == "+":
            new_left -= 1
        elif tag != "\\":
            raise PatchFormatError("unexpected line inside a hunk")
        if old_left < 0 or new_left < 0:
            raise PatchFormatError("hunk longer than its header says")
        index += 1
    while index < len(lines) and lines[index].startswith("\\"):
        index += 1
    return index - start


def _parse_section(lines: Sequence[str], start: int) -> tuple[FileSection, int]:
    old, new = parse_git_header(lines[start].rstrip("\n")[len("diff --git ") :])
    paths = [old, new]
    modes: list[str] = []
    index = start + 1
    while index < len(lines) and not lines[index].startswith("diff --git "):
        line = lines[index].rstrip("\n")
        if line.startswith(_PATH_HEADERS):
            paths.append(_header_path(line))
        elif line.startswith("index "):
            parts = line.split()
            if len(parts) == 3:
                modes.append(parts[2])
        elif line.startswith(_MODE_HEADERS):
            modes.append(line.rsplit(" ", 1)[-1])
        elif line.startswith(_SIMILARITY_HEADERS):
            pass
        elif line.startswith("--- "):
            if index + 1 >= len(lines) or not lines[index + 1].startswith("+++ "):
                raise PatchFormatError("'---' line without '+++'")
            for marker, prefix in ((line, "a/"), (lines[index + 1].rstrip("\n"), "b/")):
                found = _marker_path(marker[4:], prefix)
                if found is not None:
                    paths.append(found)
            index += 2
            while index < len(lines) and lines[index].startswith("@@"):
                index += _hunk_length(lines, index)
            if index < len(lines) and not lines[index].startswith("diff --git "):
                raise PatchFormatError("unexpected text after a hunk")
            continue
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            # Binary payload lines never start with "diff --git ".
            while index + 1 < len(lines) and not lines[index + 1].startswith("diff --git "):
                index += 1
        else:
            raise PatchFormatError("unexpected line in a file header")
        index += 1
    for mode in modes:
        if mode not in FILE_MODES:
            raise PatchFormatError(f"unsupported file mode {mode}")
    unique = tuple(dict.fromkeys(paths))
    return FileSection("".join(lines[start:index]), unique, tuple(modes)), index


def parse_patch(text: str) -> list[FileSection]:
    """Split a patch into canonical sections; anything else raises PatchFormatError."""
    lines = text.splitlines(keepends=True)
    if not lines or not lines[0].startswith("diff --git "):
        raise PatchFormatError("text before the first 'diff --git' header")
    if any("\r" in line.rstrip("\r\n") for line in lines):
        raise PatchFormatError("carriage return inside a line")
    sections: list[FileSection] = []
    index = 0
    while index < len(lines):
        section, index = _parse_section(lines, index)
        sections.append(section)
    return sections


# --- path rules ------------------------------------------------------------------------------


def normalise_pattern(pattern: str) -> str:
    pattern = pattern.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern.rstrip("/")


def matches(path: str, pattern: str) -> bool:
    pattern = normalise_pattern(pattern)
    if not pattern:
        return False
    return fnmatchcase(path, pattern) or path == pattern or path.startswith(pattern + "/")


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    return any(matches(path, pattern) for pattern in patterns)


def hard_deny_reason(path: str) -> str | None:
    """Why a path may never be touched (None when it may, subject to the policy)."""
    if path.startswith("/"):
        return "absolute path"
    if "\\" in path or any(ord(char) < 32 or ord(char) == 127 for char in path):
        return "backslash or control character in path"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "path escapes repository"
    lowered = [part.lower() for part in parts]
    if lowered[0] == "securebench":
        return "reserved securebench/ path"
    if any(part == ".git" or part.rstrip(". ") == ".git" for part in lowered):
        return "git metadata path"
    return None


def _is_test_module(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def is_sensitive(path: str, protected: Iterable[str] = ()) -> bool:
    if path in protected or is_test_path(path):
        return True
    parts = [part.lower() for part in path.split("/")]
    name = parts[-1]
    if parts[0] in SENSITIVE_FIRST or any(part in SENSITIVE_ANY for part in parts):
        return True
    if parts[0].split(".", 1)[0] in SENSITIVE_TOP_MODULES:
        return True
    if any(part.split(".", 1)[0] in SENSITIVE_STEMS for part in parts):
        return True
    return (
        name in SENSITIVE_NAMES
        or name.startswith(SENSITIVE_PREFIXES)
        or name.endswith(SENSITIVE_SUFFIXES)
    )


def is_test_path(path: str) -> bool:
    """Files restored from the trusted copy after the candidate patch (if it touched them)."""
    parts = [part.lower() for part in path.split("/")]
    return (
        any(part in TEST_COMPONENTS for part in parts[:-1])
        or parts[-1].split(".", 1)[0] == "conftest"
        or parts[-1].startswith("pytest.")
        or parts[-1] == "tox.ini"
        or _is_test_module(parts[-1])
    )


def denied_paths(paths: Iterable[str], policy: CandidatePolicy) -> list[str]:
    """Paths that allow_paths or the sensitive defaults refuse (hard denies checked apart)."""
    denied: list[str] = []
    for path in paths:
        outside = bool(policy.allow_paths) and not matches_any(path, policy.allow_paths)
        sensitive = is_sensitive(path, policy.protected_paths) and not matches_any(
            path, policy.allow_sensitive_paths
        )
        if outside or sensitive:
            denied.append(path)
    return denied


def check_paths(paths: Iterable[str], policy: CandidatePolicy) -> PolicyDecision:
    """The policy on a bare path list (e.g. what actually changed in the sandbox)."""
    unique = tuple(dict.fromkeys(paths))
    hard = [path for path in unique if hard_deny_reason(path)]
    if hard:
        return _denied(VIOLATION, escape_message(hard), unique, hard)
    soft = denied_paths(unique, policy)
    if soft:
        return _denied(VIOLATION, denied_message(soft), unique, soft)
    return PolicyDecision(allowed=True, paths=unique, applied_paths=unique)


def escape_message(paths: Sequence[str]) -> str:
    reasons = sorted({hard_deny_reason(path) or "" for path in paths})
    return f"candidate patch path escapes repository: {', '.join(paths)} ({'; '.join(reasons)})"


def denied_message(paths: Sequence[str]) -> str:
    return "candidate patch touches denied path(s): " + ", ".join(paths)


def _denied(
    code: str,
    message: str,
    paths: tuple[str, ...],
    denied: Sequence[str] = (),
    stripped: Sequence[str] = (),
    reason: str = Reason.POLICY_DENIED,
) -> PolicyDecision:
    return PolicyDecision(
        allowed=False,
        reason=reason,
        code=code,
        message=message,
        paths=paths,
        denied_paths=tuple(dict.fromkeys(denied)),
        stripped_paths=tuple(dict.fromkeys(stripped)),
    )


# --- the decision ----------------------------------------------------------------------------


def evaluate(text: str, policy: CandidatePolicy | None = None) -> PolicyDecision:
    """Decide whether (and which part of) a candidate patch may be applied."""
    policy = policy or CandidatePolicy()
    if not text.strip():
        return _denied(EMPTY, "candidate patch is empty", (), reason=Reason.MISSING_CANDIDATE)
    try:
        sections = parse_patch(text)
    except PatchFormatError as exc:
        return _denied(
            NONCANONICAL,
            "candidate patch must contain unambiguous canonical 'diff --git' file sections"
            f" ({exc})",
            (),
            reason=Reason.INVALID_CANDIDATE,
        )
    paths = tuple(dict.fromkeys(path for section in sections for path in section.paths))
    hard = [path for path in paths if hard_deny_reason(path)]
    if hard:
        return _denied(VIOLATION, escape_message(hard), paths, hard)
    links = [
        path
        for section in sections
        if section.is_gitlink or (section.is_symlink and not policy.allow_symlinks)
        for path in section.paths
    ]
    if links:
        return _denied(
            VIOLATION,
            "candidate patch creates or changes a symlink or gitlink: "
            + ", ".join(dict.fromkeys(links)),
            paths,
            links,
        )
    kept = [
        s
        for s in sections
        if not any(matches_any(p, policy.patch_preserved_paths) for p in s.paths)
    ]
    stripped = [path for s in sections if s not in kept for path in s.paths]
    applied = tuple(dict.fromkeys(path for section in kept for path in section.paths))
    if not kept:
        return _denied(
            EMPTY_FILTERED,
            "candidate patch only touches preserved paths: " + ", ".join(stripped),
            paths,
            stripped=stripped,
        )
    soft = denied_paths(applied, policy)
    if soft:
        return _denied(VIOLATION, denied_message(soft), paths, soft, stripped)
    return PolicyDecision(
        allowed=True,
        paths=paths,
        applied_paths=applied,
        stripped_paths=tuple(dict.fromkeys(stripped)),
        patch="".join(section.text for section in kept),
    )


def trusted_patch_paths(text: str) -> list[str]:
    """Paths a task's own (trusted) setup/test patch names; [] if it cannot be parsed."""
    try:
        return [path for section in parse_patch(text) for path in section.paths]
    except PatchFormatError:
        return []
