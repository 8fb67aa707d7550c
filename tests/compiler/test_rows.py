"""tasks.jsonl: bounded line-by-line reading, strict JSON, and the row's top-level shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from packs.compiler import CompileLimits, PackError, compile_pack

MANIFEST = "id: demo\nversion: 1\ndefaults:\n  family: multiple_choice\n"
GOOD = {"id": "t1", "input": {"question": "2+2?", "choices": ["3", "4"]}, "eval": {"answer": "B"}}


def good(task_id: str) -> str:
    return json.dumps({**GOOD, "id": task_id})


def write_pack(root: Path, tasks: str | bytes, manifest: str = MANIFEST) -> Path:
    (root / "manifest.yaml").write_text(manifest, encoding="utf-8")
    data = tasks.encode("utf-8") if isinstance(tasks, str) else tasks
    (root / "tasks.jsonl").write_bytes(data)
    return root


def problems_of(root: Path, **kwargs) -> list:
    with pytest.raises(PackError) as caught:
        compile_pack(root, **kwargs)
    return caught.value.problems


def only_problem(root: Path, **kwargs):
    problems = problems_of(root, **kwargs)
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def test_lines_count_from_one_including_blank_lines_which_are_skipped(tmp_path):
    pack = compile_pack(write_pack(tmp_path, f"\n{good('a')}\n   \n\t\n{good('b')}\n"))

    assert [(t.task_id, t.line, t.position) for t in pack.tasks] == [("a", 2, 0), ("b", 5, 1)]


def test_a_last_line_without_newline_and_a_byte_order_mark_are_fine(tmp_path):
    pack = compile_pack(write_pack(tmp_path, "\ufeff" + good("a") + "\n" + good("b")))

    assert [t.task_id for t in pack.tasks] == ["a", "b"]


def test_it_reports_invalid_json_with_line_and_decoder_message(tmp_path):
    problem = only_problem(write_pack(tmp_path, good("a") + '\n{"id": "b",}\n'))

    assert (problem.file, problem.line, problem.field) == ("tasks.jsonl", 2, None)
    assert (
        problem.message
        == "invalid JSON: Expecting property name enclosed in double quotes (column 12)"
    )
    assert str(problem).startswith("tasks.jsonl, line 2: invalid JSON:")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NaN", "invalid JSON: NaN is not allowed; numbers must be finite"),
        ("Infinity", "invalid JSON: Infinity is not allowed; numbers must be finite"),
        ("-Infinity", "invalid JSON: -Infinity is not allowed; numbers must be finite"),
        ("1e400", "invalid JSON: 1e400 is too large; numbers must be finite"),
        ("1" * 5000, "invalid JSON: an integer has too many digits"),
    ],
)
def test_it_refuses_numbers_that_are_not_finite_or_too_long(tmp_path, value, message):
    row = '{"id": "a", "input": {"question": "q", "choices": ["x"]}, "eval": {"answer": VALUE}}'
    row = row.replace("VALUE", value)
    problem = only_problem(write_pack(tmp_path, row + "\n"))

    assert (problem.line, problem.message) == (1, message)


def test_it_refuses_nesting_deeper_than_the_limit(tmp_path):
    row = '{"id": "a", "metadata": {"x": ' + "[" * 63 + "]" * 63 + "}}"
    problem = only_problem(write_pack(tmp_path, row + "\n"))

    assert (problem.line, problem.message) == (1, "invalid JSON: nests deeper than 64 levels")


def test_nesting_at_the_limit_is_fine(tmp_path):
    deep = "[" * 62 + "]" * 62
    row = json.loads(good("a"))
    row["metadata"] = {"x": json.loads(deep)}

    pack = compile_pack(write_pack(tmp_path, json.dumps(row) + "\n"))

    assert pack.tasks[0].metadata["x"] == json.loads(deep)


def test_it_refuses_extreme_nesting_without_crashing(tmp_path):
    problem = only_problem(write_pack(tmp_path, "[" * 200_000 + "\n"))

    assert problem.message == "invalid JSON: nests deeper than 64 levels"


def test_it_refuses_a_line_that_is_not_an_object(tmp_path):
    problem = only_problem(write_pack(tmp_path, good("a") + '\n["id", "b"]\n'))

    assert (problem.line, problem.message) == (2, "a task row must be a JSON object")


def test_it_refuses_a_line_that_is_not_utf8(tmp_path):
    problem = only_problem(write_pack(tmp_path, good("a").encode() + b'\n{"id": "\xff"}\n'))

    assert (problem.line, problem.message) == (2, "is not valid UTF-8 (byte 8 of the line)")


def test_it_refuses_a_lone_surrogate_escape(tmp_path):
    row = good("a").replace('"2+2?"', '"\\ud800"')
    problem = only_problem(write_pack(tmp_path, row + "\n"))

    assert problem.message == "invalid JSON: contains an unpaired surrogate escape such as \\ud800"


def test_it_refuses_duplicate_keys_in_a_row(tmp_path):
    problem = only_problem(write_pack(tmp_path, '{"id": "a", "id": "b"}\n'))

    assert problem.message == "invalid JSON: duplicate key 'id'"


def test_a_line_over_one_mib_stops_reading(tmp_path):
    huge = '{"id": "' + "x" * (1024 * 1024) + '"}'
    problem = only_problem(write_pack(tmp_path, good("a") + "\n" + huge + "\n" + "not json\n"))

    assert (problem.line, problem.message) == (2, "line 2 is longer than 1 MiB")


def test_a_line_exactly_at_the_limit_is_read(tmp_path):
    line = good("a")
    pack = write_pack(tmp_path, line + "\n")

    compiled = compile_pack(pack, limits=CompileLimits(max_line_bytes=len(line.encode())))

    assert len(compiled.tasks) == 1


def test_the_line_limit_can_be_overridden(tmp_path):
    problem = only_problem(
        write_pack(tmp_path, good("a") + "\n"), limits=CompileLimits(max_line_bytes=20)
    )

    assert problem.message == "line 1 is longer than 20 bytes"


def test_it_refuses_more_rows_than_the_limit(tmp_path):
    pack = write_pack(tmp_path, "\n".join(good(f"t{i}") for i in range(3)) + "\n")

    problem = only_problem(pack, limits=CompileLimits(max_rows=2))

    assert (problem.line, problem.message) == (3, "has more than 2 rows")


def test_it_refuses_a_tasks_file_over_the_size_limit(tmp_path):
    pack = write_pack(tmp_path, "\n".join(good(f"t{i}") for i in range(5)) + "\n")

    problem = only_problem(pack, limits=CompileLimits(max_tasks_file_bytes=100))

    assert (problem.file, problem.line, problem.message) == (
        "tasks.jsonl",
        None,
        "is larger than 100 bytes",
    )


@pytest.mark.parametrize("tasks", ["", "\n\n  \n"])
def test_it_refuses_a_pack_without_rows(tmp_path, tasks):
    problem = only_problem(write_pack(tmp_path, tasks))

    assert problem.message == "has no task rows; a pack needs at least one"


def test_it_reports_a_missing_tasks_file(tmp_path):
    pack = write_pack(tmp_path, "")
    (pack / "tasks.jsonl").unlink()

    problem = only_problem(pack)

    assert problem.file == "tasks.jsonl" and problem.message.startswith("is missing")


ROW_ERRORS = [
    ({"id": "a", "verification": {}}, "verification", "is not a task row key"),
    ({"input": {}}, "id", "is required"),
    ({"id": ""}, "id", "must be a non-empty string"),
    ({"id": "   "}, "id", "must be a non-empty string"),
    ({"id": 7}, "id", "must be a non-empty string"),
    ({"id": None}, "id", "must be a non-empty string"),
    ({"id": "x" * 201}, "id", "must be at most 200 characters"),
    ({"id": "a\nb"}, "id", "may not contain control characters"),
    ({"id": "a\u0085b"}, "id", "may not contain control characters"),
    # ids that would print like another: zero-width, bidi override, spaces at the ends
    ({"id": "q1\u200b"}, "id", "may not contain invisible or format characters (U+200B)"),
    ({"id": "\u202e1q"}, "id", "may not contain invisible or format characters (U+202E)"),
    ({"id": "q1 "}, "id", "may not start or end with whitespace"),
    ({"id": "a", "family": "f" * 65}, "family", "must be at most 64 characters"),
    ({"id": "a", "family": ""}, "family", "must be a non-empty string"),
    ({"id": "a", "family": ["x"]}, "family", "must be a non-empty string"),
    ({"id": "a", "input": "q"}, "input", "must be an object"),
    ({"id": "a", "eval": []}, "eval", "must be an object"),
    ({"id": "a", "environment": "python"}, "environment", "must be an object"),
    ({"id": "a", "metadata": 1}, "metadata", "must be an object"),
    ({"id": "a", "assets": {"path": "x"}}, "assets", "must be a list"),
]


@pytest.mark.parametrize(("row", "field", "message"), ROW_ERRORS)
def test_it_rejects_a_bad_row(tmp_path, row, field, message):
    problem = only_problem(write_pack(tmp_path, good("ok") + "\n" + json.dumps(row) + "\n"))

    assert (problem.file, problem.line, problem.field) == ("tasks.jsonl", 2, field)
    assert message in problem.message


def test_family_is_required_without_a_manifest_default(tmp_path):
    pack = write_pack(tmp_path, good("a") + "\n", manifest="id: demo\nversion: 1\n")

    problem = only_problem(pack)

    assert problem.field == "family"
    assert problem.message == "is required when manifest defaults.family is not set (task 'a')"


def test_the_row_family_overrides_the_manifest_default(tmp_path):
    row = {
        "id": "a",
        "family": "short_answer",
        "input": {"question": "q"},
        "eval": {"accepted_answers": ["x"]},
    }

    pack = compile_pack(write_pack(tmp_path, json.dumps(row) + "\n"))

    assert pack.tasks[0].family == "short_answer"


def test_duplicate_ids_name_both_lines(tmp_path):
    problem = only_problem(write_pack(tmp_path, f"{good('a')}\n{good('b')}\n\n{good('a')}\n"))

    assert (problem.line, problem.field) == (4, "id")
    assert (
        problem.message
        == "duplicate task id 'a': already used on line 1 (task 'a', multiple_choice)"
    )


def test_it_reports_problems_of_many_rows_at_once(tmp_path):
    tasks = "\n".join([good("a"), "{oops", json.dumps({"id": "c", "extra": 1}), "[]"]) + "\n"

    problems = problems_of(write_pack(tmp_path, tasks))

    assert [(p.line, p.field) for p in problems] == [(2, None), (3, "extra"), (4, None)]


def test_past_the_problem_limit_it_lists_none_but_counts_the_rest(tmp_path):
    pack = write_pack(tmp_path, "{bad\n" * 10)

    with pytest.raises(PackError) as caught:
        compile_pack(pack, limits=CompileLimits(max_problems=3))

    assert [p.line for p in caught.value.problems] == [1, 2, 3]
    assert caught.value.unlisted == 7 and caught.value.total == 10
    assert str(caught.value).splitlines()[-1] == "and 7 more problems"


def test_a_problem_that_stops_reading_is_listed_even_past_the_limit(tmp_path):
    pack = write_pack(tmp_path, "{bad\n" * 5 + "x" * 200 + "\n")

    with pytest.raises(PackError) as caught:
        compile_pack(pack, limits=CompileLimits(max_problems=3, max_line_bytes=100))

    assert [p.line for p in caught.value.problems] == [1, 2, 3, 6]
    assert caught.value.problems[-1].message == "line 6 is longer than 100 bytes"
    assert caught.value.unlisted == 2


def test_pack_error_text_joins_every_problem(tmp_path):
    with pytest.raises(PackError) as caught:
        compile_pack(write_pack(tmp_path, "{bad\n[]\n"))

    assert str(caught.value).splitlines() == [str(p) for p in caught.value.problems]
    assert len(caught.value.problems) == 2


def test_a_nul_character_in_a_value_is_refused_because_postgresql_cannot_store_it(tmp_path):
    row = {**GOOD, "id": "a", "input": {"question": "x\u0000y", "choices": ["3", "4"]}}

    problem = only_problem(write_pack(tmp_path, json.dumps(row) + "\n"))

    assert (problem.file, problem.line) == ("tasks.jsonl", 1)
    assert "NUL character" in problem.message


def test_an_escaped_backslash_u0000_in_text_is_just_text(tmp_path):
    row = {**GOOD, "id": "a", "input": {"question": "print('\\u0000')", "choices": ["3", "4"]}}

    pack = compile_pack(write_pack(tmp_path, json.dumps(row) + "\n"))

    assert pack.tasks[0].agent_payload()["question"] == "print('\\u0000')"


def test_an_id_that_prints_like_an_earlier_one_is_refused(tmp_path):
    full_width = good("\uff41")  # "ａ", FULLWIDTH LATIN SMALL LETTER A

    problem = only_problem(write_pack(tmp_path, f"{good('a')}\n{full_width}\n"))

    assert (problem.line, problem.field) == (2, "id")
    assert problem.message.startswith("task id '\uff41' looks the same as 'a' on line 1")
