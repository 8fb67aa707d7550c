"""Packs the live-workspace suites build in a temporary folder, with sealed markers planted.

``build_repo_pack``: a ``repo_patch`` pack around a real git repository (``.git`` shipped in
the public asset, so ``base_commit`` is a real commit): a word counter whose own test fails
at the base commit, a hidden test patch that adds more failing tests, and the gold patch that
fixes both. Its contract lets an agent change the package only (``allowed_to_modify``), never
the tests (``read_only``); its ``candidate_policy`` says the same to the patch verifier.

``build_terminal_pack``: a ``terminal_task`` pack with a read-only and a writable public
asset, a trusted pytest checker, ``run_tests`` / ``test_files`` evaluation files and a
hidden ``expected_state``.

Every evaluation-input and hidden value and file of both packs carries a unique marker
(``SealedMarkers``): an episode's sandbox must never hold any of them. Each pack also has a
public marker in an asset — the control that shows a search inside the sandbox works.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_TEST_COMMAND = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
REPO_WORKDIR = "/workspace/repo"
REPO_MOUNT = "repo"  # the repository's folder in the episode's workspace
IMAGE = "python:3.12-slim"
# Fixed identity and dates: the base commit is the same on every build of the same content.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "SecureBench Tests",
    "GIT_AUTHOR_EMAIL": "tests@securebench.invalid",
    "GIT_COMMITTER_NAME": "SecureBench Tests",
    "GIT_COMMITTER_EMAIL": "tests@securebench.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false"]

# --- the repository --------------------------------------------------------------------------

PACKAGE = "wordcount"
SOURCE_PATH = f"{PACKAGE}/core.py"
INIT_PATH = f"{PACKAGE}/__init__.py"
TEST_PATH = "tests/test_core.py"
BUGGY_SOURCE = (
    "def count_words(text: str) -> int:\n"
    '    """The number of whitespace-separated words in ``text``."""\n'
    '    return len(text.split(" "))\n'
)
FIXED_SOURCE = (
    "def count_words(text: str) -> int:\n"
    '    """The number of whitespace-separated words in ``text``."""\n'
    "    # FIXED_MARKER\n"
    "    return len(text.split())\n"
)
REPO_FILES = {
    INIT_PATH: "from wordcount.core import count_words\n",
    SOURCE_PATH: BUGGY_SOURCE,
    TEST_PATH: (
        "from wordcount import count_words\n\n\n"
        "def test_single_spaces():\n"
        '    assert count_words("one two three") == 3\n\n\n'
        "def test_runs_of_whitespace():  # fails at the base commit\n"
        '    assert count_words("one  two\\nthree ") == 3\n'
    ),
    "README.md": "# wordcount\n\nCounts words. PUBLIC_MARKER\n",
}
HIDDEN_TEST_PATH = "tests/test_more_words.py"
HIDDEN_TEST = (
    "# HIDDEN_TEST_MARKER\n"
    "from wordcount import count_words\n\n\n"
    "def test_empty_text_has_no_words():\n"
    '    assert count_words("") == 0\n\n\n'
    "def test_tabs_separate_words():\n"
    '    assert count_words("a\\tb") == 2\n'
)
# Tests-only edit an agent might try: make the failing test pass by weakening it.
WEAKENED_TEST = REPO_FILES[TEST_PATH].replace('"one  two\\nthree ") == 3', '"one two") == 2')
REPO_INSTRUCTIONS = (
    "The repository in repo/ is a tiny Python package. count_words() in wordcount/core.py "
    "miscounts text with runs of whitespace, newlines or tabs, and empty text; its test "
    "tests/test_core.py::test_runs_of_whitespace fails. Fix count_words() so that it counts "
    "whitespace-separated words. Change only files under wordcount/; the tests and "
    "wordcount/__init__.py are read-only."
)


@dataclass(frozen=True)
class SealedMarkers:
    """Markers planted in a pack's non-public lanes, by where they were planted."""

    by_place: dict[str, str]  # e.g. {"tests.test_patch": "sealed-…"}

    def values(self) -> list[str]:
        return list(self.by_place.values())


@dataclass(frozen=True)
class BuiltPack:
    root: Path  # the pack folder (manifest.yaml, tasks.jsonl, assets/, hidden/)
    pack_id: str
    task_ids: tuple[str, ...]
    sealed: SealedMarkers  # must never be found in an episode's sandbox
    public_marker: str  # in a public asset: must be found (the search's control)


@dataclass(frozen=True)
class RepoPack(BuiltPack):
    base_commit: str
    gold_patch: str  # the reference fix (hidden lane): it carries a sealed marker
    test_patch: str  # the hidden tests (evaluation_inputs lane)
    weakened_tests_patch: str  # an edit of the read-only tests only (a cheat)


def marker(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


def git(root: Path, *args: str) -> str:
    result = subprocess.run(
        [*GIT, *args],
        cwd=root,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def write_files(root: Path, files: dict[str, str]) -> None:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def diff_against(repo: Path, changes: dict[str, str]) -> str:
    """``git diff`` (binary, full index) of ``changes`` on top of ``repo``'s HEAD, made in a
    scratch clone so that the repository itself stays at its base commit."""
    scratch = repo.parent / f".{repo.name}-diff-{uuid.uuid4().hex[:8]}"
    shutil.copytree(repo, scratch, symlinks=True)
    try:
        write_files(scratch, changes)
        git(scratch, "add", "-A")
        return git(scratch, "diff", "--cached", "--binary", "--full-index")
    finally:
        shutil.rmtree(scratch)


def init_repo(repo: Path, files: dict[str, str]) -> str:
    """A git repository of ``files`` with one commit; its HEAD."""
    write_files(repo, files)
    # No template: no sample hooks shipped in the pack.
    git(repo, "init", "-q", "--template=", "-b", "main", ".")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "wordcount: count words")
    return git(repo, "rev-parse", "HEAD").strip()


def write_manifest(root: Path, manifest: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    (root / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (root / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def build_repo_pack(folder: Path, pack_id: str = "wordcount-repo") -> RepoPack:
    """The repository pack, in ``folder/pack_id``, with fresh markers."""
    root = folder / pack_id
    public_marker = marker("public")
    sealed = SealedMarkers(
        {
            "tests.test_patch": marker("sealed-test-patch"),
            "candidate_policy": marker("sealed-policy"),
            "gold_patch": marker("sealed-gold"),
        }
    )
    repo = root / "assets" / "wordcount-repo"
    files = dict(REPO_FILES)
    files["README.md"] = files["README.md"].replace("PUBLIC_MARKER", public_marker)
    base_commit = init_repo(repo, files)
    hidden_test = HIDDEN_TEST.replace("HIDDEN_TEST_MARKER", sealed.by_place["tests.test_patch"])
    test_patch = diff_against(repo, {HIDDEN_TEST_PATH: hidden_test})
    fixed = FIXED_SOURCE.replace("FIXED_MARKER", sealed.by_place["gold_patch"])
    gold_patch = diff_against(repo, {SOURCE_PATH: fixed})
    weakened = diff_against(repo, {TEST_PATH: WEAKENED_TEST})
    task_id = f"{pack_id}/count-words"
    row = {
        "id": task_id,
        "input": {"repo": PACKAGE, "base_commit": base_commit, "instructions": REPO_INSTRUCTIONS},
        "assets": [{"path": "wordcount-repo", "mount": REPO_MOUNT}],
        "eval": {
            "tests": {
                "source": "command",
                "command": REPO_TEST_COMMAND,
                "workdir": REPO_WORKDIR,
                "timeout_seconds": 60,
                "test_patch": {"source": "inline", "patch": test_patch},
            },
            "candidate_policy": {
                "allow_paths": [f"{PACKAGE}/", f"docs/{sealed.by_place['candidate_policy']}.md"]
            },
            "gold_patch": gold_patch,
        },
        "metadata": {"fail_to_pass": [f"{TEST_PATH}::test_runs_of_whitespace"]},
    }
    manifest = {
        "id": pack_id,
        "version": 1,
        "title": "A tiny git repository to fix",
        "defaults": {
            "family": "repo_patch",
            "environment": {"image": IMAGE, "workdir": REPO_WORKDIR, "timeout_seconds": 120},
        },
        "asset_defaults": {"read_only": False},
        # The package's __init__ is read-only by the contract alone (the patch policy allows
        # all of wordcount/): an edit of it fails on the contract's word only.
        "contract": {"allowed_to_modify": [f"{PACKAGE}/"], "read_only": ["tests/", INIT_PATH]},
    }
    write_manifest(root, manifest, [row])
    return RepoPack(
        root=root,
        pack_id=pack_id,
        task_ids=(task_id,),
        sealed=sealed,
        public_marker=public_marker,
        base_commit=base_commit,
        gold_patch=gold_patch,
        test_patch=test_patch,
        weakened_tests_patch=weakened,
    )


# --- a terminal pack -------------------------------------------------------------------------

TERMINAL_ANSWER = ("answer.txt", "done\n")
TERMINAL_INSTRUCTIONS = (
    "Write the text done followed by a newline to answer.txt in the workspace. notes/ is "
    "read-only reference material; scratch/ is yours to change."
)
CHECKER = (
    "# CHECKER_MARKER\n"
    "from pathlib import Path\n\n\n"
    "def test_answer():\n"
    "    assert Path('answer.txt').read_text() == 'done\\n'\n"
)


def build_terminal_pack(folder: Path, pack_id: str = "marked-terminal") -> BuiltPack:
    """A one-task terminal pack whose every sealed value and file carries a marker."""
    root = folder / pack_id
    public_marker = marker("public")
    sealed = SealedMarkers(
        {
            "checker file": marker("sealed-checker"),
            "run_tests file": marker("sealed-run-tests"),
            "test_files file": marker("sealed-test-files"),
            "expected_state": marker("sealed-expected"),
        }
    )
    task = "write-answer"
    write_files(
        root / "assets",
        {
            f"{task}/notes/readme.txt": f"Reference notes. {public_marker}\n",
            f"{task}/scratch/todo.txt": "nothing yet\n",
        },
    )
    write_files(
        root / "hidden",
        {
            f"{task}/tests/test_answer.py": CHECKER.replace(
                "CHECKER_MARKER", sealed.by_place["checker file"]
            ),
            f"{task}/run-tests.sh": f"#!/bin/sh\n# {sealed.by_place['run_tests file']}\nexit 0\n",
            f"{task}/data/expected.txt": f"{sealed.by_place['test_files file']}\n",
        },
    )
    path, content = TERMINAL_ANSWER
    task_id = f"{pack_id}/{task}"
    row = {
        "id": task_id,
        "input": {"instructions": TERMINAL_INSTRUCTIONS},
        "assets": [
            {"path": f"{task}/notes", "mount": "notes"},
            {"path": f"{task}/scratch", "mount": "scratch", "read_only": False},
        ],
        "eval": {
            "checker": {"source": "pytest", "path": f"{task}/tests", "timeout_seconds": 30},
            "run_tests": {"path": f"{task}/run-tests.sh"},
            "test_files": {"path": f"{task}/data"},
            "expected_state": {
                "path": path,
                "content": content,
                "why": sealed.by_place["expected_state"],
            },
        },
    }
    manifest = {
        "id": pack_id,
        "version": 1,
        "defaults": {
            "family": "terminal_task",
            "environment": {"image": IMAGE, "timeout_seconds": 120},
        },
        "asset_roots": {"public": "assets/", "eval": "hidden/"},
        "asset_defaults": {"read_only": True},
    }
    write_manifest(root, manifest, [row])
    return BuiltPack(
        root=root,
        pack_id=pack_id,
        task_ids=(task_id,),
        sealed=sealed,
        public_marker=public_marker,
    )
