"""The patch policy against disguised input: control characters hidden in a quoted name, .git
spelled with the trailing dots or spaces some filesystems drop (hard denies no task can lift),
and a plain diff dressed up behind a line that only looks like a header."""

from __future__ import annotations

import pytest

from verifiers import patch_policy as pp
from verifiers.verdict import Reason

ALLOW_EVERYTHING = pp.CandidatePolicy(allow_paths=("*",), allow_sensitive_paths=("*",))


def new_file(quoted_path: str) -> str:
    """A canonical section adding one file; the path as git writes it (C-quoted if needed)."""
    if quoted_path.startswith('"'):
        inner = quoted_path[1:-1]
        return f'diff --git "a/{inner}" "b/{inner}"\nnew file mode 100644\n'
    return f"diff --git a/{quoted_path} b/{quoted_path}\nnew file mode 100644\n"


@pytest.mark.parametrize(
    "quoted",
    ['"src/app\\tpy"', '"src/line\\nbreak.py"', '"src/bell\\a.py"', '"src/del\\177.py"'],
)
def test_control_characters_in_a_path_are_never_allowed(quoted: str) -> None:
    decision = pp.evaluate(new_file(quoted), ALLOW_EVERYTHING)

    assert not decision.allowed
    assert decision.reason == Reason.POLICY_DENIED
    assert "backslash or control character" in decision.message


@pytest.mark.parametrize("path", [".git./config", "sub/.git../hooks/post-checkout"])
def test_git_metadata_with_trailing_dots_is_never_allowed(path: str) -> None:
    decision = pp.evaluate(new_file(path), ALLOW_EVERYTHING)

    assert not decision.allowed
    assert "git metadata path" in decision.message


def test_git_metadata_with_a_trailing_space_is_never_allowed() -> None:
    decision = pp.evaluate(new_file('".git /config"'), ALLOW_EVERYTHING)

    assert not decision.allowed
    assert "git metadata path" in decision.message


def test_paths_that_changed_in_the_sandbox_get_the_hard_denies_too() -> None:
    # check_paths judges what actually changed (e.g. a terminal task's workspace diff).
    decision = pp.check_paths(["src/app.py", ".git/hooks/pre-commit"], ALLOW_EVERYTHING)

    assert not decision.allowed
    assert decision.denied_paths == (".git/hooks/pre-commit",)
    assert "git metadata path" in decision.message


def test_a_plain_diff_behind_a_look_alike_first_line_is_noncanonical() -> None:
    # git apply skips a first line that is not "diff --git" and applies the plain diff after
    # it; the policy accepts canonical git sections only, from the very first line.
    text = "From agent a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"

    decision = pp.evaluate(text, ALLOW_EVERYTHING)

    assert not decision.allowed
    assert decision.code == pp.NONCANONICAL
    assert "text before the first 'diff --git' header" in decision.message
