"""Workspace candidates in run bundles: what a hostile bundle may not carry into a sandbox.

A workspace names files by path, or refers to an archive or a folder inside a bundle archive.
None of it may reach outside the bundle, carry setuid bits, or exceed the file-count and size
caps — each refused while parsing, before anything is stored or materialised.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runs.bundle import MAX_WORKSPACE_FILES, BundleLimits, BundleRejected, parse_bundle_file

TASK = "terminal-files/version-file"
LIMITS = BundleLimits(max_bundle_bytes=1 << 20, max_candidate_bytes=4096, max_line_bytes=16384)


def workspace_line(candidate: dict[str, Any]) -> str:
    return json.dumps({"task_id": TASK, "candidate": {"kind": "workspace", **candidate}}) + "\n"


def problems_of(path: Path, limits: BundleLimits = LIMITS) -> list[str]:
    with pytest.raises(BundleRejected) as excinfo:
        parse_bundle_file(path, display_name=path.name, limits=limits)
    return [str(problem) for problem in excinfo.value.problems]


def test_a_folder_reference_cannot_climb_out_of_the_bundle(tmp_path: Path) -> None:
    # A folder the attacker knows on the server (here: one we plant) must stay unreachable,
    # however many ../ it takes to get there from the bundle's extraction folder.
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "server-secret.txt").write_text("SERVER-SECRET\n")
    climb = "../" * 40 + str(planted).lstrip("/")
    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("candidates.jsonl", workspace_line({"directory": climb}))

    problems = problems_of(bundle)

    assert len(problems) == 1 and "escapes the workspace" in problems[0], problems
    assert "SERVER-SECRET" not in problems[0]


@pytest.mark.parametrize("mode", ["4755", "2755", "1777", "7777"])
def test_a_workspace_file_cannot_be_setuid_setgid_or_sticky(tmp_path: Path, mode: str) -> None:
    line = workspace_line({"files": {"run.sh": {"content": "id\n", "mode": mode}}})
    bundle = tmp_path / "c.jsonl"
    bundle.write_text(line)

    problems = problems_of(bundle)

    assert any("run.sh.mode" in problem and "octal mode" in problem for problem in problems)


def test_a_workspace_holds_at_most_the_file_cap(tmp_path: Path) -> None:
    files = {f"f{index}.txt": "" for index in range(MAX_WORKSPACE_FILES + 1)}
    bundle = tmp_path / "c.jsonl"
    bundle.write_text(workspace_line({"files": files}))
    roomy = BundleLimits(
        max_bundle_bytes=1 << 22, max_candidate_bytes=1 << 20, max_line_bytes=1 << 21
    )

    problems = problems_of(bundle, roomy)

    assert any(f"holds more than {MAX_WORKSPACE_FILES} files" in p for p in problems), problems


def test_a_workspace_over_the_candidate_size_is_refused(tmp_path: Path) -> None:
    # Two files of 3 KiB each: every file fits, the line fits, the workspace (6 KiB) does not.
    files = {"a.txt": "a" * 3072, "b.txt": "b" * 3072}
    bundle = tmp_path / "c.jsonl"
    bundle.write_text(workspace_line({"files": files}))

    problems = problems_of(bundle)

    assert any("add up to more than" in problem for problem in problems), problems
