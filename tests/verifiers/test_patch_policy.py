"""The candidate patch policy, decided on the host before any sandbox (spec §4.5, A01/A30/A31)."""

from __future__ import annotations

import pytest

from verifiers import patch_policy as pp
from verifiers.verdict import Reason


def section(path: str, old: str | None = None, body: str = "+x\n", new_file: bool = True) -> str:
    old = old or path
    header = f"diff --git a/{old} b/{path}\n"
    if new_file:
        return header + f"new file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n{body}"
    return header + f"--- a/{old}\n+++ b/{path}\n@@ -1 +1 @@\n-y\n{body}"


FIX = section("src/app.py", new_file=False)


def test_a_plain_source_fix_is_allowed_and_kept_verbatim() -> None:
    decision = pp.evaluate(FIX)
    assert decision.allowed
    assert decision.paths == ("src/app.py",)
    assert decision.patch == FIX


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_an_empty_patch_is_a_missing_candidate(text: str) -> None:
    decision = pp.evaluate(text)
    assert not decision.allowed
    assert decision.reason == Reason.MISSING_CANDIDATE
    assert decision.code == pp.EMPTY


@pytest.mark.parametrize(
    "text",
    [
        # a plain unified diff without the diff --git header
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-y\n+x\n",
        # an ed-style diff (GNU patch would pipe it to ed)
        "1c1\n< y\n---\n> x\n",
        # text (a mail header, a commit message) before the first header
        "Subject: fix\n\n" + FIX,
        # a hunk longer than its header says, then garbage
        FIX + "+extra line\n",
        # a header line that git does not know
        "diff --git a/x b/x\nsomething odd\n",
        # a gitlink / unknown mode
        "diff --git a/x b/x\nnew file mode 100600\n",
    ],
)
def test_noncanonical_patches_are_invalid(text: str) -> None:
    decision = pp.evaluate(text)
    assert not decision.allowed
    assert decision.reason == Reason.INVALID_CANDIDATE
    assert decision.code == pp.NONCANONICAL


@pytest.mark.parametrize(
    "path",
    [
        "../x",
        "src/../../x",
        "/etc/x",
        ".git/hooks/pre-commit",
        "sub/.git/config",
        ".GIT/config",
        "securebench/evaluator/x.py",
        "SecureBench/x",
        "a//b",
        "./a",
    ],
)
def test_hard_denied_paths_can_never_be_allowed(path: str) -> None:
    policy = pp.CandidatePolicy(allow_paths=("*",), allow_sensitive_paths=("*",))
    decision = pp.evaluate(f"diff --git a/{path} b/{path}\nnew file mode 100644\n", policy)
    assert not decision.allowed
    assert decision.reason in (Reason.POLICY_DENIED, Reason.INVALID_CANDIDATE)
    if decision.reason == Reason.POLICY_DENIED:
        assert "escapes repository" in decision.message


def test_an_absolute_path_in_the_plus_line_is_denied() -> None:
    text = "diff --git a/ok.py b/ok.py\n--- a/ok.py\n+++ b//etc/passwd\n@@ -1 +1 @@\n-y\n+x\n"
    decision = pp.evaluate(text)
    assert not decision.allowed
    assert "/etc/passwd" in decision.denied_paths


def test_a_rename_to_a_traversal_path_is_denied() -> None:
    text = "diff --git a/ok.py b/ok.py\nsimilarity index 100%\nrename from ok.py\nrename to ../x\n"
    decision = pp.evaluate(text)
    assert not decision.allowed
    assert "../x" in decision.denied_paths


@pytest.mark.parametrize(
    "path",
    [
        "conftest.py",
        "src/deep/conftest.py",
        "tests/test_x.py",
        "src/tests/helper.py",
        "test/data.txt",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "setup.py",
        "pyproject.toml",
        "requirements.txt",
        "noxfile.py",
        "Makefile",
        ".github/workflows/ci.yml",
        "ci/run.yml",
        "run_tests.sh",
        "src/evil.pth",
        "sitecustomize.py",
        "src/usercustomize.py",
        "pytest.py",
        "pluggy/__init__.py",
        "_pytest/runner.py",
        "src/test_helpers.py",
        "poetry.lock",
        ".gitignore",
        "src/__pycache__/app.cpython-311.pyc",
    ],
)
def test_sensitive_paths_are_denied_by_default(path: str) -> None:
    decision = pp.evaluate(section(path))
    assert not decision.allowed, path
    assert decision.reason == Reason.POLICY_DENIED
    assert decision.message == f"candidate patch touches denied path(s): {path}"
    assert decision.denied_paths == (path,)


def test_allow_sensitive_paths_overrides_the_default() -> None:
    policy = pp.CandidatePolicy(allow_sensitive_paths=("pyproject.toml", "tests/"))
    assert pp.evaluate(section("pyproject.toml"), policy).allowed
    assert pp.evaluate(section("tests/test_x.py"), policy).allowed
    assert not pp.evaluate(section("conftest.py"), policy).allowed


def test_allow_paths_narrows_what_may_change() -> None:
    policy = pp.CandidatePolicy(allow_paths=("src/",))
    assert pp.evaluate(section("src/app.py"), policy).allowed
    decision = pp.evaluate(section("src/app.py") + section("docs/x.md"), policy)
    assert not decision.allowed
    assert decision.denied_paths == ("docs/x.md",)
    # allow_paths never re-opens a sensitive path
    assert not pp.evaluate(section("src/conftest.py"), policy).allowed


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src/", "src/app.py", True),
        ("src", "src/app.py", True),
        ("./src/", "src/app.py", True),
        ("src", "srcfoo/app.py", False),
        ("*.md", "docs/deep/x.md", True),
        ("docs/*.md", "docs/deep/x.md", True),
        ("src/app.py", "src/app.py", True),
        ("SRC/", "src/app.py", False),
    ],
)
def test_pattern_matching(pattern: str, path: str, expected: bool) -> None:
    assert pp.matches(path, pattern) is expected


def test_preserved_paths_strip_whole_sections() -> None:
    policy = pp.CandidatePolicy(patch_preserved_paths=("docs/",))
    decision = pp.evaluate(FIX + section("docs/x.md"), policy)
    assert decision.allowed
    assert decision.stripped_paths == ("docs/x.md",)
    assert decision.patch == FIX
    only = pp.evaluate(section("docs/x.md"), policy)
    assert not only.allowed
    assert only.code == pp.EMPTY_FILTERED


def test_symlinks_are_denied_unless_allowed() -> None:
    link = (
        "diff --git a/lib b/lib\nnew file mode 120000\nindex 0000000..1234567\n"
        "--- /dev/null\n+++ b/lib\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n"
    )
    through = section("lib/passwd")
    decision = pp.evaluate(link + through)
    assert not decision.allowed
    assert "symlink" in decision.message
    assert pp.evaluate(link, pp.CandidatePolicy(allow_symlinks=True)).allowed


def test_a_gitlink_is_always_denied() -> None:
    text = "diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..1234567\n"
    policy = pp.CandidatePolicy(allow_symlinks=True, allow_sensitive_paths=("*",))
    assert not pp.evaluate(text, policy).allowed


def test_quoted_paths_with_c_escapes_are_decoded_and_checked() -> None:
    text = (
        'diff --git "a/\\303\\251t\\303\\251.py" "b/\\303\\251t\\303\\251.py"\n'
        "new file mode 100644\n--- /dev/null\n"
        '+++ "b/\\303\\251t\\303\\251.py"\n@@ -0,0 +1 @@\n+x\n'
    )
    assert pp.evaluate(text).paths == ("été.py",)
    sneaky = 'diff --git "a/\\056\\056/x" "b/\\056\\056/x"\nnew file mode 100644\n'
    decision = pp.evaluate(sneaky)
    assert not decision.allowed
    assert decision.denied_paths == ("../x",)


def test_unquoted_names_with_spaces() -> None:
    text = (
        "diff --git a/sp ace/f i.txt b/sp ace/f i.txt\n--- a/sp ace/f i.txt\t\n"
        "+++ b/sp ace/f i.txt\t\n@@ -1 +1 @@\n-y\n+x\n"
    )
    assert pp.evaluate(text).paths == ("sp ace/f i.txt",)


def test_binary_patches_are_parsed_as_one_section() -> None:
    text = (
        "diff --git a/img.png b/img.png\nnew file mode 100644\nindex 0000000..e69de29\n"
        "GIT binary patch\nliteral 3\nKcmZ?wWME_Z0RR91\n\nliteral 0\nHcmV?d00001\n\n"
    )
    decision = pp.evaluate(text)
    assert decision.allowed
    assert decision.paths == ("img.png",)


def test_protected_paths_from_the_test_patch_are_sensitive() -> None:
    policy = pp.CandidatePolicy(protected_paths=("checks/extra_check.py",))
    assert not pp.evaluate(section("checks/extra_check.py"), policy).allowed


def test_check_paths_applies_the_same_rules_to_actual_paths() -> None:
    assert pp.check_paths(["src/app.py"], pp.CandidatePolicy()).allowed
    assert not pp.check_paths(["src/app.py", "conftest.py"], pp.CandidatePolicy()).allowed
    assert not pp.check_paths(["../x"], pp.CandidatePolicy()).allowed


def test_test_paths_are_the_ones_restored() -> None:
    assert pp.is_test_path("tests/test_x.py")
    assert pp.is_test_path("src/conftest.py")
    assert pp.is_test_path("pytest.ini")
    assert pp.is_test_path("src/pkg/test_unit.py")
    assert not pp.is_test_path("src/app.py")
    assert not pp.is_test_path("pyproject.toml")
