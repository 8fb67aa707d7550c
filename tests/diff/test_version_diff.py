"""Every classification rule of the version diff (packs.diff, rules in packs.diff_rules),
on versions imported the way an author uploads them."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from packs.diff import version_diff, versions_comparable
from packs.diff_model import TaskChange, VersionDiff
from packs.diff_rules import (
    MAX_CHANGED_CHARS,
    RULE_IDS,
    Impact,
    measure_edit,
    text_alignment,
)
from packs.models import SealedValue
from tests.diff.support import (
    CONTRACT,
    NEW_SECRET,
    NEW_TESTS,
    OLD_SECRET,
    PROMPT,
    answer_row,
    base_rows,
    choice_row,
    code_row,
    import_pack,
    two_versions,
)

pytestmark = pytest.mark.django_db


def task(diff: VersionDiff, task_id: str) -> TaskChange:
    found = [t for t in diff.tasks_changed if t.task_id == task_id]
    assert found, f"{task_id} not among changed tasks {[t.task_id for t in diff.tasks_changed]}"
    return found[0]


def resource(diff: VersionDiff, task_id: str, name: str):
    return next(r for r in task(diff, task_id).resources if r.name == name)


def rows_with(**replacements) -> list[dict]:
    """The base rows with some replaced by id."""
    rows = {row["id"]: row for row in base_rows()}
    rows.update(replacements)
    return list(rows.values())


def assert_no_sealed_value(diff: VersionDiff) -> None:
    text = repr(dataclasses.asdict(diff))
    assert OLD_SECRET not in text and NEW_SECRET not in text


# --- sealed lanes -------------------------------------------------------------------------------


def test_an_answer_changed_in_the_hidden_lane_is_breaking_and_shown_by_digest_only(make_pack):
    old, new = two_versions(make_pack, rows_with(q1=answer_row(answers=[f"Lyon {NEW_SECRET}"])))

    diff = version_diff(old, new)

    change = resource(diff, "q1", "accepted_answers")
    assert change.lanes == ["hidden"] and change.status == "changed"
    assert change.impact == Impact.BREAKING and change.rule == "evaluation-lanes"
    assert change.sha_before != change.sha_after
    assert change.public_before is None and change.public_after is None
    assert task(diff, "q1").parts == ["hidden"]
    assert not diff.comparable
    assert_no_sealed_value(diff)


def test_a_test_changed_in_the_evaluation_inputs_lane_is_breaking(make_pack):
    old, new = two_versions(make_pack, rows_with(add=code_row(tests=NEW_TESTS)))

    diff = version_diff(old, new)

    change = resource(diff, "add", "tests")
    assert change.lanes == ["evaluation_inputs"] and change.impact == Impact.BREAKING
    assert [t.task_id for t in diff.tasks_changed] == ["add"]
    assert not diff.comparable
    assert_no_sealed_value(diff)


def test_the_diff_never_reads_the_sealed_value_table(make_pack):
    old, new = two_versions(make_pack, rows_with(add=code_row(tests=NEW_TESTS)))
    table = SealedValue._meta.db_table

    with CaptureQueriesContext(connection) as queries:
        version_diff(old, new)

    assert not [q["sql"] for q in queries.captured_queries if table in q["sql"]]


def test_a_value_moved_from_the_public_lane_to_the_hidden_lane_is_breaking(make_pack):
    # A deferred family takes any keys; an eval key it does not list is hidden.
    public_hint = {"id": "mm", "family": "multimodal_qa", "input": {"q": "Which?", "hint": "one"},
                   "eval": {"answer": "A"}}  # fmt: skip
    hidden_hint = {"id": "mm", "family": "multimodal_qa", "input": {"q": "Which?"},
                   "eval": {"answer": "A", "hint": "one"}}  # fmt: skip
    old, new = two_versions(make_pack, [hidden_hint], old_rows=[public_hint])

    diff = version_diff(old, new)

    change = resource(diff, "mm", "hint")
    assert change.lanes == ["public", "hidden"] and change.note == "moved between lanes"
    assert change.impact == Impact.BREAKING
    assert change.public_before == "one" and change.public_after is None


def test_a_hidden_file_changed_is_breaking_and_its_path_stays_sealed(make_pack):
    row = {
        "id": "art",
        "family": "artifact_task",
        "input": {"instructions": "Write the report."},
        "eval": {"reference_artifact": {"path": "refs/report.txt"}},
    }
    old, new = two_versions(
        make_pack,
        [row],
        old_rows=[row],
        old_files={"hidden/refs/report.txt": f"{OLD_SECRET}\n"},
        new_files={"hidden/refs/report.txt": f"{NEW_SECRET}\n"},
    )

    diff = version_diff(old, new)

    change = resource(diff, "art", "reference_artifact")
    assert change.lanes == ["hidden"] and change.files is not None and change.files.sealed
    assert (change.files.changed, change.files.added, change.files.removed) == (1, 0, 0)
    assert change.files.entries == () and change.impact == Impact.BREAKING
    assert "files changed" in change.note
    assert [f.root for f in diff.files] == ["eval"] and diff.files[0].entries == ()
    assert "report.txt" not in repr(dataclasses.asdict(diff))
    assert not diff.comparable


def test_a_public_asset_file_changed_is_breaking_with_its_path_listed(make_pack):
    def with_asset() -> dict:
        row = answer_row()
        row["assets"] = [{"path": "maps/france.txt"}]
        return row

    old, new = two_versions(
        make_pack,
        rows_with(q1=with_asset()),
        old_rows=rows_with(q1=with_asset()),
        old_files={"assets/maps/france.txt": "Paris is north.\n"},
        new_files={"assets/maps/france.txt": "Paris is in the north.\n"},
    )

    diff = version_diff(old, new)

    change = resource(diff, "q1", "assets")
    assert change.impact == Impact.BREAKING and change.rule == "files"
    assert [e.path for e in change.files.entries] == ["maps/france.txt"]
    assert [e.path for e in diff.files[0].entries] == ["maps/france.txt"]
    assert not diff.comparable


# --- public lane: wording or breaking -----------------------------------------------------------


def test_a_typo_fix_in_a_public_prompt_is_wording_and_scores_stay_comparable(make_pack):
    typo = PROMPT.replace("arguments", "argumnets", 1)
    old, new = two_versions(make_pack, rows_with(add=code_row(prompt=PROMPT)),
                            old_rows=rows_with(add=code_row(prompt=typo)))  # fmt: skip

    diff = version_diff(old, new)

    change = resource(diff, "add", "prompt")
    assert change.impact == Impact.WORDING and change.rule == "public-wording"
    assert change.public_before == typo and change.public_after == PROMPT
    assert "similarity" in change.note
    assert any(s.op == "insert" and "arguments" in s.text for s in change.segments)
    assert task(diff, "add").impact == Impact.WORDING
    assert diff.comparable


def test_a_rewritten_public_prompt_is_breaking(make_pack):
    rewrite = (
        "Write a Python function `add(a, b)` that returns the sum of its arguments, which may "
        "be lists: concatenate them instead. Put the function in candidate.py."
    )
    old, new = two_versions(make_pack, rows_with(add=code_row(prompt=rewrite)))

    diff = version_diff(old, new)

    change = resource(diff, "add", "prompt")
    assert change.impact == Impact.BREAKING and change.rule == "public-wording"
    assert not diff.comparable


def test_a_small_public_edit_is_breaking_when_the_tasks_sealed_lanes_changed_too(make_pack):
    typo_fix = PROMPT.replace("integers", "integer numbers")
    old, new = two_versions(make_pack, rows_with(add=code_row(prompt=typo_fix, tests=NEW_TESTS)))

    diff = version_diff(old, new)

    change = resource(diff, "add", "prompt")
    assert change.impact == Impact.BREAKING
    assert change.note == "the task's evaluation lanes changed too"


def test_a_changed_number_in_public_text_is_breaking_however_small(make_pack):
    old, new = two_versions(
        make_pack,
        rows_with(q1=answer_row(question="What is 2 + 3?")),
        old_rows=rows_with(q1=answer_row(question="What is 2 + 2?")),
    )

    change = resource(version_diff(old, new), "q1", "question")

    assert change.impact == Impact.BREAKING and "a number changed" in change.note


def test_a_typo_in_one_choice_is_wording_but_a_choice_added_is_breaking(make_pack):
    old, new = two_versions(
        make_pack,
        rows_with(mc1=choice_row(choices=["Paris", "Rome", "London", "Madrid"])),
        old_rows=rows_with(mc1=choice_row(choices=["Paris", "Rome", "Londn", "Madrid"])),
    )
    assert resource(version_diff(old, new), "mc1", "choices").impact == Impact.WORDING

    more = choice_row(choices=["Paris", "Rome", "London", "Madrid", "Berlin"])
    newer = import_pack(make_pack, 3, rows_with(mc1=more))
    change = resource(version_diff(new, newer), "mc1", "choices")
    assert change.impact == Impact.BREAKING and "shape" in change.note


def test_a_public_input_added_is_breaking(make_pack):
    with_format = answer_row()
    with_format["input"]["answer_format"] = "one word"
    old, new = two_versions(make_pack, rows_with(q1=with_format))

    change = resource(version_diff(old, new), "q1", "answer_format")

    assert change.status == "added" and change.impact == Impact.BREAKING


# --- task set, task setup ---------------------------------------------------------------------


def test_a_task_added_or_removed_is_breaking(make_pack):
    old, new = two_versions(make_pack, [*base_rows()[1:], answer_row("q2")])

    diff = version_diff(old, new)

    assert [t.task_id for t in diff.tasks_added] == ["q2"]
    assert [t.task_id for t in diff.tasks_removed] == ["add"]
    assert diff.tasks_changed == [] and not diff.comparable


@pytest.mark.parametrize(
    ("part", "change"),
    [
        ("environment", lambda row: row.update(environment={"timeout_seconds": 30})),
        ("metadata", lambda row: row["metadata"].update(entry_point="plus")),
    ],
)
def test_a_tasks_environment_or_metadata_changed_is_breaking(make_pack, part, change):
    row = code_row()
    change(row)
    old, new = two_versions(make_pack, rows_with(add=row))

    diff = version_diff(old, new)

    assert task(diff, "add").parts == [part]
    assert task(diff, "add").impact == Impact.BREAKING and not diff.comparable


def test_a_tasks_family_changed_is_breaking(make_pack):
    deferred = answer_row()
    deferred["family"] = "multimodal_qa"  # same keys; accepted_answers stays hidden
    old, new = two_versions(make_pack, rows_with(q1=deferred))

    change = task(version_diff(old, new), "q1")

    assert change.parts == ["family"] and change.impact == Impact.BREAKING
    assert (change.family_before, change.family_after) == ("short_answer", "multimodal_qa")


# --- contract and manifest -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("budgets.tokens", 100000),
        ("budgets.usd", 1.5),
        ("allowed_to_modify", ["candidate.py", "helpers.py"]),
        ("read_only", []),
        ("required_outputs", ["candidate.py", "NOTES.md"]),
        ("compatible_evaluations", ["securebench@1", "securebench-pass-at-k@1"]),
    ],
)
def test_a_contract_change_is_breaking(make_pack, field, value):
    contract = {**CONTRACT, "budgets": dict(CONTRACT["budgets"])}
    if field.startswith("budgets."):
        contract["budgets"][field.split(".")[1]] = value
    else:
        contract[field] = value
    old, new = two_versions(make_pack, new={"contract": contract})

    diff = version_diff(old, new)

    assert [c.field for c in diff.contract] == [field]
    assert diff.contract[0].after == value and diff.contract[0].impact == Impact.BREAKING
    assert diff.tasks_changed == [] and not diff.comparable
    assert versions_comparable(old, new) is False


def test_a_description_or_title_edit_is_wording_and_scores_stay_comparable(make_pack):
    old, new = two_versions(
        make_pack, new={"title": "Demo pack, revised", "description": "Compare versions here."}
    )

    diff = version_diff(old, new)

    assert {c.field: c.impact for c in diff.manifest} == {
        "title": Impact.WORDING,
        "description": Impact.WORDING,
    }
    assert diff.tasks_changed == [] and diff.comparable and not diff.empty
    assert versions_comparable(old, new) is True


def test_defaults_are_listed_and_their_effect_is_judged_on_each_task(make_pack):
    rows = [code_row()]
    del rows[0]["metadata"]
    old, new = two_versions(
        make_pack, rows, old_rows=rows,
        old={"defaults": {"environment": {"timeout_seconds": 60}}},
        new={"defaults": {"environment": {"timeout_seconds": 30}}},
    )  # fmt: skip

    diff = version_diff(old, new)

    assert [(c.field, c.impact) for c in diff.manifest] == [("defaults.environment", "neutral")]
    assert task(diff, "add").parts == ["environment"] and not diff.comparable


def test_the_same_content_under_a_new_number_has_no_changes(make_pack):
    old, new = two_versions(make_pack)

    diff = version_diff(old, new)

    assert diff.empty and diff.comparable
    assert old.digest != new.digest  # the version number is part of the digest


# --- scale and the measure ---------------------------------------------------------------------


def test_the_query_count_does_not_grow_with_the_number_of_tasks(make_pack):
    def count(tasks: int, pack_id: str) -> int:
        rows = [answer_row(f"q{i}", question=f"Question {i}?") for i in range(tasks)]
        edited = [answer_row(f"q{i}", question=f"Question {i} ?") for i in range(tasks)]
        old = import_pack(make_pack, 1, rows, id=pack_id)
        new = import_pack(make_pack, 2, edited, id=pack_id)
        with CaptureQueriesContext(connection) as queries:
            diff = version_diff(old, new)
        assert len(diff.tasks_changed) == tasks
        return len(queries.captured_queries)

    assert count(3, "small") == count(120, "larger")


def test_every_change_names_a_written_rule(make_pack):
    old, new = two_versions(
        make_pack, [code_row(tests=NEW_TESTS), answer_row("q9")], new={"title": "New"}
    )

    diff = version_diff(old, new)

    rules = {c.rule for c in diff.manifest + diff.contract}
    rules |= {r.rule for t in diff.tasks_changed for r in t.resources}
    assert rules <= RULE_IDS


def test_a_typo_in_a_long_text_is_small_and_a_paragraph_rewrite_is_not():
    paragraph = "The function must handle empty input, unicode and very long lines. " * 120
    middle = paragraph.index("unicode", 4000)
    typo = paragraph[:middle] + "unicdoe" + paragraph[middle + 7 :]  # two letters swapped

    assert measure_edit(paragraph, typo).small
    assert text_alignment(paragraph, typo) == (len(paragraph) - 1, 2)  # "o" kept, "d" moved
    rewrite = paragraph[:5000] + "x" * (MAX_CHANGED_CHARS + 1) + paragraph[5000:]
    assert not measure_edit(paragraph, rewrite).small


def test_the_measure_tells_booleans_from_numbers_and_keys_from_values():
    assert not measure_edit({"strict": True}, {"strict": 1}).same_shape
    assert not measure_edit({"a": "x"}, {"b": "x"}).same_shape
    assert measure_edit({"a": ["Londn"]}, {"a": ["London"]}).small
