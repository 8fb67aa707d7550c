"""The contract's surfaces on the paths a live workspace changed: a change outside
``allowed_to_modify``, or to a ``read_only`` path, is named; gitignore's wildmatch rules."""

from __future__ import annotations

import pytest

from verifiers.contract_surfaces import MAX_NAMED, surface_violations

pytestmark = pytest.mark.database_independent


def test_changes_inside_the_allowed_surface_pass():
    assert surface_violations(["src/calc/stats.py", "src/new.py"], ["src/"], []) == []


def test_a_change_outside_allowed_to_modify_is_named():
    found = surface_violations(["src/calc/stats.py", "setup.py"], ["src/"], [])
    assert found == ["setup.py: outside allowed_to_modify"]


def test_a_read_only_path_is_named_with_its_glob_even_inside_the_allowed_surface():
    changed = ["tests/test_stats.py", "src/a.py"]
    found = surface_violations(changed, ["src/", "tests/"], ["tests/**"])
    assert found == ["tests/test_stats.py: read-only (matches 'tests/**')"]


def test_no_allowed_surface_restricts_nothing_but_read_only_still_applies():
    assert surface_violations(["anything/at/all.txt"], [], []) == []
    assert surface_violations(["docs/guide.md"], None, ["*.md"]) == [
        "docs/guide.md: read-only (matches '*.md')"
    ]


def test_wildmatch_rules_anchor_and_depth():
    # A leading slash anchors at the root; a bare name matches at any depth.
    assert surface_violations(["pkg/setup.py"], [], ["/setup.py"]) == []
    assert surface_violations(["setup.py"], [], ["/setup.py"]) == [
        "setup.py: read-only (matches '/setup.py')"
    ]
    assert surface_violations(["a/b/candidate.py"], ["candidate.py"], []) == []


def test_path_spellings_cannot_slip_past_a_glob():
    # ./, doubled slashes and a trailing slash name the same path as the glob sees it.
    found = surface_violations(["./tests//test_x.py", "/tests/test_y.py"], ["src/"], ["tests/"])
    assert found == [
        "tests/test_x.py: read-only (matches 'tests/')",
        "tests/test_y.py: read-only (matches 'tests/')",
    ]


def test_a_flood_of_violations_is_named_up_to_a_limit_then_counted():
    paths = [f"other/f{index:03}.txt" for index in range(MAX_NAMED + 5)]
    found = surface_violations(paths, ["src/"], [])
    assert len(found) == MAX_NAMED + 1
    assert found[-1] == "… and 5 more paths"
