"""A candidate against its contract, before any verifier: required outputs, read-only and
allowed surfaces on patch and workspace candidates, and the family's candidate kind."""

from __future__ import annotations

import pytest

from verifiers.contract_check import ContractViolation, candidate_violations
from verifiers.contract_surfaces import MAX_NAMED
from verifiers.task import Candidate

pytestmark = pytest.mark.database_independent

# --- git diffs, section by section, as `git diff -M` writes them ------------------------------

EDIT_SOURCE = """\
diff --git a/src/calc/stats.py b/src/calc/stats.py
index 4985df6..cc132ab 100644
--- a/src/calc/stats.py
+++ b/src/calc/stats.py
@@ -1,4 +1,4 @@
 def median(items):
     items = sorted(items)
     middle = len(items) // 2
-    return items[middle]
+    return (items[middle - 1] + items[middle]) / 2 if len(items) % 2 == 0 else items[middle]
"""

EDIT_TEST = """\
diff --git a/tests/test_stats.py b/tests/test_stats.py
index c8c1b8f..81ba762 100644
--- a/tests/test_stats.py
+++ b/tests/test_stats.py
@@ -4,2 +4,3 @@ from calc.stats import median
 def test_odd():
     assert median([3, 1, 2]) == 2
+def test_nothing(): pass
"""

NEW_PREDICTIONS = """\
diff --git a/predictions.jsonl b/predictions.jsonl
new file mode 100644
index 0000000..0e7e32f
--- /dev/null
+++ b/predictions.jsonl
@@ -0,0 +1 @@
+{"task": 1}
"""

NEW_REPORT = """\
diff --git a/out/report.json b/out/report.json
new file mode 100644
index 0000000..3f1d2a7
--- /dev/null
+++ b/out/report.json
@@ -0,0 +1 @@
+{"passed": 3}
"""

DELETE_NOTES = """\
diff --git a/docs/old.md b/docs/old.md
deleted file mode 100644
index c642f2d..0000000
--- a/docs/old.md
+++ /dev/null
@@ -1,2 +0,0 @@
-# Old notes
-Nothing here.
"""

RENAME_UTIL = """\
diff --git a/src/calc/util.py b/lib/helpers.py
similarity index 100%
rename from src/calc/util.py
rename to lib/helpers.py
"""

COPY_FIXTURES = """\
diff --git a/tests/fixtures.py b/src/calc/fixtures.py
similarity index 100%
copy from tests/fixtures.py
copy to src/calc/fixtures.py
"""


def patch(*sections: str) -> Candidate:
    return Candidate.of_patch("".join(sections))


def check_patch(contract: dict | None, *sections: str) -> list[ContractViolation]:
    return candidate_violations(contract, "repo_patch", patch(*sections))


def rules(found: list[ContractViolation]) -> dict[str, list[str]]:
    return {violation.rule: violation.paths for violation in found}


# --- patch candidates ------------------------------------------------------------------------


def test_a_patch_inside_its_surfaces_that_produces_its_outputs_keeps_the_contract():
    contract = {
        "allowed_to_modify": ["src/", "predictions.jsonl"],
        "read_only": ["tests/**"],
        "required_outputs": ["predictions.jsonl"],
    }
    assert check_patch(contract, EDIT_SOURCE, NEW_PREDICTIONS) == []


def test_no_contract_or_empty_lists_bind_nothing():
    assert check_patch(None, EDIT_TEST, DELETE_NOTES) == []
    empty = {"allowed_to_modify": [], "read_only": [], "required_outputs": []}
    assert check_patch(empty, EDIT_TEST, DELETE_NOTES) == []


def test_a_required_file_the_patch_does_not_produce_is_named():
    contract = {"required_outputs": ["predictions.jsonl", "run_manifest.json"]}
    (violation,) = check_patch(contract, EDIT_SOURCE, NEW_PREDICTIONS)
    assert violation == ContractViolation(
        "required_outputs",
        ["run_manifest.json"],
        "required_outputs: the patch does not produce run_manifest.json",
    )
    assert violation.as_dict() == {
        "rule": "required_outputs",
        "paths": ["run_manifest.json"],
        "message": "required_outputs: the patch does not produce run_manifest.json",
    }


def test_a_required_folder_is_produced_by_any_file_under_it():
    assert check_patch({"required_outputs": ["out/"]}, NEW_REPORT) == []
    assert rules(check_patch({"required_outputs": ["out/"]}, NEW_PREDICTIONS)) == {
        "required_outputs": ["out/"]
    }
    # A folder named by a file that merely shares its prefix does not count.
    assert rules(check_patch({"required_outputs": ["ou/"]}, NEW_REPORT)) == {
        "required_outputs": ["ou/"]
    }


def test_a_required_glob_is_produced_by_any_matching_file():
    assert check_patch({"required_outputs": ["*.jsonl"]}, NEW_PREDICTIONS) == []
    assert check_patch({"required_outputs": ["out/*.json"]}, NEW_REPORT) == []
    assert rules(check_patch({"required_outputs": ["*.jsonl"]}, EDIT_SOURCE, NEW_REPORT)) == {
        "required_outputs": ["*.jsonl"]
    }


def test_a_file_the_patch_deletes_is_not_produced():
    # The deleted path is named in the patch (diff --git, ---), yet it will not exist.
    found = check_patch({"required_outputs": ["docs/old.md"]}, DELETE_NOTES)
    assert rules(found) == {"required_outputs": ["docs/old.md"]}
    assert check_patch({"required_outputs": ["docs/"]}, DELETE_NOTES) != []


def test_a_patch_touching_a_read_only_path_is_named_with_its_glob():
    contract = {"allowed_to_modify": ["src/", "tests/"], "read_only": ["tests/**"]}
    (violation,) = check_patch(contract, EDIT_SOURCE, EDIT_TEST)
    assert violation.rule == "read_only"
    assert violation.paths == ["tests/test_stats.py"]
    assert violation.message == "read_only: tests/test_stats.py matches 'tests/**'"


def test_deleting_a_read_only_file_is_a_change_to_it():
    found = check_patch({"read_only": ["docs/"]}, DELETE_NOTES)
    assert rules(found) == {"read_only": ["docs/old.md"]}


def test_a_patch_outside_allowed_to_modify_is_named():
    (violation,) = check_patch({"allowed_to_modify": ["src/"]}, EDIT_SOURCE, NEW_PREDICTIONS)
    assert violation.rule == "allowed_to_modify"
    assert violation.paths == ["predictions.jsonl"]
    assert violation.message == "allowed_to_modify: predictions.jsonl outside 'src/'"


def test_an_empty_allowed_list_restricts_nothing_while_read_only_still_applies():
    contract = {"allowed_to_modify": [], "read_only": ["tests/"]}
    assert rules(check_patch(contract, EDIT_SOURCE, NEW_PREDICTIONS, EDIT_TEST)) == {
        "read_only": ["tests/test_stats.py"]
    }


def test_a_rename_is_checked_on_both_its_old_and_new_path():
    # Renaming a read-only file away is a change to it…
    assert rules(check_patch({"read_only": ["src/calc/util.py"]}, RENAME_UTIL)) == {
        "read_only": ["src/calc/util.py"]
    }
    # …and its new path must lie inside the allowed surface.
    assert rules(check_patch({"allowed_to_modify": ["src/"]}, RENAME_UTIL)) == {
        "allowed_to_modify": ["lib/helpers.py"]
    }
    # The new path is produced, the old one is gone.
    assert check_patch({"required_outputs": ["lib/helpers.py"]}, RENAME_UTIL) == []
    assert rules(check_patch({"required_outputs": ["src/calc/util.py"]}, RENAME_UTIL)) == {
        "required_outputs": ["src/calc/util.py"]
    }


def test_a_copy_reads_its_source_without_changing_it():
    contract = {"allowed_to_modify": ["src/"], "read_only": ["tests/"]}
    assert check_patch(contract, COPY_FIXTURES) == []
    assert check_patch({"required_outputs": ["src/calc/fixtures.py"]}, COPY_FIXTURES) == []


def test_every_broken_rule_is_reported_once_in_a_fixed_order():
    contract = {
        "allowed_to_modify": ["src/"],
        "read_only": ["tests/"],
        "required_outputs": ["run_manifest.json"],
    }
    found = check_patch(contract, EDIT_TEST, NEW_PREDICTIONS, NEW_REPORT)
    assert [(v.rule, v.paths) for v in found] == [
        ("read_only", ["tests/test_stats.py"]),
        ("allowed_to_modify", ["out/report.json", "predictions.jsonl"]),
        ("required_outputs", ["run_manifest.json"]),
    ]


def test_a_patch_that_cannot_be_parsed_is_left_to_the_verifiers_policy():
    # Its own policy refuses it (noncanonical); the contract names no path it cannot read…
    contract = {"read_only": ["tests/"], "required_outputs": ["predictions.jsonl"]}
    plain = "--- a/tests/test_stats.py\n+++ b/tests/test_stats.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert check_patch(contract, plain) == []
    # …but the paths a live repository says changed are still checked.
    found = candidate_violations(
        contract, "repo_patch", Candidate.of_patch(plain), changed_paths=["tests/test_stats.py"]
    )
    assert rules(found) == {"read_only": ["tests/test_stats.py"]}


def test_a_flood_of_paths_is_named_up_to_a_limit_then_counted():
    sections = [
        NEW_PREDICTIONS.replace("predictions.jsonl", f"extra/f{index:03}.txt")
        for index in range(MAX_NAMED + 3)
    ]
    (violation,) = check_patch({"allowed_to_modify": ["src/"]}, *sections)
    assert len(violation.paths) == MAX_NAMED
    assert violation.paths[0] == "extra/f000.txt"
    assert violation.message.endswith("… and 3 more paths")


# --- workspace candidates --------------------------------------------------------------------

SEEDED = {
    "tests/test_app.py": "def test_app(): assert True\n",
    "app/main.py": "print('hello')\n",
}


def workspace(**extra: str) -> Candidate:
    files = dict(SEEDED)
    files.update({path.replace("__", "/"): text for path, text in extra.items()})
    return Candidate.of_workspace(files)


def check_workspace(contract, candidate, changed=None) -> list[ContractViolation]:
    return candidate_violations(contract, "terminal_task", candidate, changed_paths=changed)


def test_a_workspace_holding_its_required_outputs_keeps_the_contract():
    contract = {"required_outputs": ["predictions.jsonl", "out/", "logs/*.log"]}
    candidate = workspace(
        **{"predictions.jsonl": "{}\n", "out__model.bin": "w", "logs__train.log": "ok\n"}
    )
    assert check_workspace(contract, candidate) == []


def test_a_workspace_missing_a_required_file_folder_or_glob_names_each():
    contract = {"required_outputs": ["predictions.jsonl", "out/", "logs/*.log"]}
    (violation,) = check_workspace(contract, workspace(**{"logs__train.txt": "no\n"}))
    assert violation.rule == "required_outputs"
    assert violation.paths == ["predictions.jsonl", "out/", "logs/*.log"]
    assert violation.message == (
        "required_outputs: not in the workspace predictions.jsonl, out/, logs/*.log"
    )


def test_a_required_path_naming_a_folder_is_met_by_a_file_under_it():
    # Seed 004's "final_checkpoint" is a folder of files in a workspace.
    contract = {"required_outputs": ["final_checkpoint"]}
    assert check_workspace(contract, workspace(**{"final_checkpoint__w.pt": "w"})) == []
    assert check_workspace(contract, workspace(**{"final_checkpoints__w.pt": "w"})) != []
    # With a trailing slash the entry is a folder: a plain file of that name is not it.
    assert check_workspace({"required_outputs": ["out/"]}, workspace(out="not a folder")) != []


def test_a_live_workspace_is_checked_on_the_paths_it_changed_not_its_seed():
    contract = {"allowed_to_modify": ["app/"], "read_only": ["tests/"]}
    candidate = workspace()
    # Seeded tests/ and untouched files: only app/main.py changed.
    assert check_workspace(contract, candidate, changed=["app/main.py"]) == []
    found = check_workspace(contract, candidate, changed=["app/main.py", "tests/test_app.py"])
    assert rules(found) == {"read_only": ["tests/test_app.py"]}
    # A bundle's workspace (no changed list): every file it holds is a change.
    assert rules(check_workspace(contract, candidate)) == {"read_only": ["tests/test_app.py"]}


def test_deleting_a_read_only_file_from_a_workspace_is_named():
    # The deleted file is no longer among the candidate's files; the live list still has it.
    candidate = Candidate.of_workspace({"app/main.py": "x\n"})
    found = check_workspace({"read_only": ["tests/"]}, candidate, changed=["tests/test_app.py"])
    assert rules(found) == {"read_only": ["tests/test_app.py"]}


def test_a_workspace_change_outside_allowed_to_modify_is_named():
    candidate = workspace(**{"setup.py": "x\n"})
    found = check_workspace({"allowed_to_modify": ["app/"]}, candidate, changed=["setup.py"])
    assert [v.as_dict() for v in found] == [
        {
            "rule": "allowed_to_modify",
            "paths": ["setup.py"],
            "message": "allowed_to_modify: setup.py outside 'app/'",
        }
    ]
    assert check_workspace({"allowed_to_modify": []}, candidate, changed=["setup.py"]) == []


# --- the candidate's kind and text candidates ------------------------------------------------


def test_a_candidate_of_the_wrong_kind_breaks_the_kind_rule_alone():
    found = candidate_violations(
        {"required_outputs": ["x.txt"]}, "repo_patch", Candidate.of_workspace({"a.py": "x"})
    )
    assert [v.as_dict() for v in found] == [
        {
            "rule": "candidate_kind",
            "paths": [],
            "message": "candidate_kind: a repo_patch task takes a patch candidate, not workspace",
        }
    ]
    found = candidate_violations(None, "terminal_task", Candidate.of_patch(EDIT_SOURCE))
    assert rules(found) == {"candidate_kind": []}


def test_text_candidates_name_no_paths_so_required_outputs_cannot_bind_them():
    contract = {"required_outputs": ["answer.txt"], "read_only": ["**"]}
    assert candidate_violations(contract, "short_answer", Candidate.of_text("42")) == []
    # An unknown family takes any kind.
    assert candidate_violations(None, "some_future_family", Candidate.of_text("42")) == []
