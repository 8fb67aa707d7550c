"""Where the leak audit looks: short values everywhere public, containers inside containers,
other encodings, binary files, eval-root copies that differ only in spacing, names and keys.
Each leak has a clean twin that must stay clean (red-team findings, issue 14)."""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import sqlite3
import tarfile
import unicodedata
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard

from tests.verifiers.test_leak_audit import (
    ANSWER,
    _tar_gz,
    _zip,
    audit,
    public_file,
    serious,
    task,
)
from verifiers.leak_audit import containers
from verifiers.pack_findings import FAILING, WARNING

SHORT = "Treaty of Westphalia in 1648"
SHORT_TWIN = "Treaty of Westphalia in 1700"  # numbers count in a short value


def short_task(task_id: str = "qa/1") -> object:
    return task(
        task_id,
        "short_answer",
        public={"question": "Which peace ended the Thirty Years War, and when?"},
        hidden={"accepted_answers": [SHORT]},
    )


# --- short values -----------------------------------------------------------------------------


def test_a_short_answer_in_a_public_file_fails_and_its_twin_does_not(tmp_path):
    leaked = public_file(tmp_path, "assets/key.txt", f"qa/1: {SHORT}\n".encode())
    twin = public_file(tmp_path, "assets/other.txt", f"qa/1: {SHORT_TWIN}\n".encode())

    found = audit([short_task()], [leaked, twin])

    assert serious(found) == [(FAILING, "reference_in_public", "qa/1")]
    assert "public file assets/key.txt" in found[0].message
    assert "other.txt" not in found[0].message
    assert "Westphalia" not in found[0].message + json.dumps(found[0].evidence)
    assert found[0].sealed_evidence["value"] == SHORT


@pytest.mark.parametrize("order", ["leak_first", "leak_last"])
def test_a_short_answer_in_another_tasks_prompt_warns(order):
    # A name two questions share is common in trivia packs: a warning for the author, not a
    # failure (a file or the task's own prompt holding it is one).
    shower = task("qa/2", "short_answer", public={"question": f"After the {SHORT}, what?"})
    tasks = [shower, short_task()] if order == "leak_first" else [short_task(), shower]

    found = audit(tasks)

    assert serious(found) == [(WARNING, "value_in_other_tasks", "qa/1")]
    assert "task qa/2 (question)" in found[0].message


def test_a_short_answer_split_between_two_places_is_not_whole():
    first = task("qa/2", public={"question": "Treaty of Westphalia in"})
    second = task("qa/3", public={"question": "Westphalia in 1648 it was"})

    assert serious(audit([short_task(), first, second])) == []


def test_a_one_line_code_solution_in_a_public_file_fails(tmp_path):
    solution = "    return sorted(set(values), reverse=True)\n"  # 5 words: no passage
    owner = task(
        "code/1",
        "code_completion",
        public={"prompt": "def by_size(values):\n    '''Distinct values, largest first.'''\n"},
        hidden={"canonical_solution": solution},
    )
    leaked = public_file(tmp_path, "assets/solutions.py", f"# code/1\n{solution}".encode())
    twin = public_file(tmp_path, "assets/other.py", b"    return sorted(values)\n")

    assert serious(audit([owner], [twin])) == []
    assert serious(audit([owner], [leaked, twin])) == [(FAILING, "reference_in_public", "code/1")]


def test_a_short_answer_as_a_file_or_member_name_fails(tmp_path):
    named = public_file(tmp_path, "answers/treaty_of_westphalia_in_1648.txt", b"see name\n")
    member = public_file(tmp_path, "bundle.zip", _zip({"qa-1/Treaty-of-Westphalia-in-1648": b""}))
    twin = public_file(tmp_path, "answers/treaty_of_westphalia.txt", b"see name\n")

    assert serious(audit([short_task()], [twin])) == []
    for leak in (named, member):
        assert serious(audit([short_task()], [leak, twin])) == [
            (FAILING, "reference_in_public", "qa/1")
        ]


def test_a_value_in_a_public_dict_key_fails():
    leaky = task("essay/2", public={"question": "Discuss.", "hints": {ANSWER: "yes"}})
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    twin = task("essay/2", public={"question": "Discuss.", "hints": {"think of treaties": "x"}})

    assert serious(audit([owner, twin])) == []
    assert serious(audit([owner, leaky])) == [(FAILING, "reference_in_public", "essay/1")]


# --- multiple-choice answers: stated in tasks, not in files -------------------------------------


def test_a_multiple_choice_answer_text_in_a_public_file_fails(tmp_path):
    answer = "the treaty signed at Osnabrueck"
    tasks = [
        task(
            "mc/1",
            "multiple_choice",
            public={"question": "Which?", "choices": [answer, "a treaty signed at Utrecht"]},
            hidden={"answer": answer},
        ),
        # Choices recur across tasks: another task offering the same text is no leak.
        task(
            "mc/2",
            "multiple_choice",
            public={"question": "And?", "choices": ["a treaty signed at Utrecht", answer]},
            hidden={"answer": "a treaty signed at Utrecht"},
        ),
    ]
    key = public_file(tmp_path, "answer_key.txt", f"mc/1 {answer}\n".encode())

    assert serious(audit(tasks)) == []
    assert serious(audit(tasks, [key])) == [(FAILING, "hidden_value_in_public", "mc/1")]


# --- containers and encodings -------------------------------------------------------------------


def _tar(members: dict[str, bytes]) -> bytes:
    return _tar_gz(members, mode="w")


def _sqlite(text: str, tmp_path: Path) -> bytes:
    path = tmp_path / "scratch.sqlite3"
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("create table notes (body text)")
        db.execute("insert into notes values (?)", (text,))
    data = path.read_bytes()
    path.unlink()
    return data


def _pdf(text: str) -> bytes:
    page = zlib.compress(f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode())
    head = f"1 0 obj\n<< /Length {len(page)} /Filter /FlateDecode >>\nstream\n".encode()
    return b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + head + page + b"\nendstream\nendobj\n%%EOF\n"


def _notebook(text: str) -> bytes:
    words = text.split(" ")
    lines = [" ".join(words[i : i + 3]) + "\n" for i in range(0, len(words), 3)]
    cells = [{"cell_type": "markdown", "metadata": {}, "source": lines}]
    return json.dumps({"cells": cells, "nbformat": 4}, indent=1).encode()


def _html(text: str) -> bytes:
    words = text.split(" ")
    marked = " ".join(f"<b>{w}</b>" if i % 4 == 1 else w for i, w in enumerate(words))
    return f"<html><body><p>{marked.replace(' of ', ' &#111;f ')}</p></body></html>".encode()


CONTAINERS = {
    "zip in tar": ("bundle.tar", lambda d, _: _tar({"inner.zip": _zip({"notes.txt": d})})),
    "gz in zip": ("bundle.zip", lambda d, _: _zip({"notes.txt.gz": gzip.compress(d)})),
    "gz in gz": ("notes.gz.gz", lambda d, _: gzip.compress(gzip.compress(d))),
    "tar.gz in zip": ("b.zip", lambda d, _: _zip({"in.tar.gz": _tar_gz({"notes.txt": d})})),
    "zstd": ("notes.txt.zst", lambda d, _: zstandard.ZstdCompressor().compress(d)),
    "lz4": ("notes.txt.lz4", lambda d, _: lz4.frame.compress(d)),
    "lzma": ("notes.txt.lzma", lambda d, _: lzma.compress(d, format=lzma.FORMAT_ALONE)),
    "zlib": ("notes.z", lambda d, _: zlib.compress(d)),
    "utf-16 with a mark": (
        "notes.txt",
        lambda d, _: codecs.BOM_UTF16_LE + d.decode().encode("utf-16-le"),
    ),
    "utf-16 without": ("notes.txt", lambda d, _: d.decode().encode("utf-16-be")),
    "utf-32": ("notes.txt", lambda d, _: d.decode().encode("utf-32")),
    "sqlite": ("notes.sqlite3", lambda d, tmp: _sqlite(d.decode(), tmp)),
    "pdf": ("notes.pdf", lambda d, _: _pdf(d.decode())),
    "notebook": ("notes.ipynb", lambda d, _: _notebook(d.decode())),
    "html": ("notes.html", lambda d, _: _html(d.decode())),
}


@pytest.mark.parametrize("kind", list(CONTAINERS))
def test_an_answer_inside_nested_containers_and_other_encodings_fails(tmp_path, kind):
    name, pack = CONTAINERS[kind]
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    leaked = public_file(tmp_path, f"data/{name}", pack(ANSWER.encode(), tmp_path))
    twin = public_file(tmp_path, f"clean/{name}", pack(b"notes about something else", tmp_path))

    assert serious(audit([owner], [twin])) == []
    found = audit([owner], [leaked, twin])
    assert serious(found) == [(FAILING, "reference_in_public", "essay/1")]
    assert f"public file data/{name}" in found[0].message


@pytest.mark.parametrize("kind", ["zstd", "utf-16 without", "sqlite", "pdf"])
def test_a_short_answer_and_a_canary_are_found_there_too(tmp_path, kind):
    name, pack = CONTAINERS[kind]
    leaked = public_file(tmp_path, f"data/{name}", pack(f"key: {SHORT}".encode(), tmp_path))
    marked = public_file(tmp_path, f"mark/{name}", pack(b"SB-CANARY 41d8 inside", tmp_path))

    assert serious(audit([short_task()], [leaked])) == [(FAILING, "reference_in_public", "qa/1")]
    found = audit([task("t/1")], [marked], canaries=("SB-CANARY 41d8",))
    assert serious(found) == [(FAILING, "canary_in_public", None)]


def test_text_that_starts_like_a_zlib_header_is_read_as_text(tmp_path):
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    leaked = public_file(tmp_path, "formula.txt", f"x^2 is the key. {ANSWER}".encode())

    assert serious(audit([owner], [leaked])) == [(FAILING, "reference_in_public", "essay/1")]


def test_what_cannot_be_read_is_listed_as_a_warning(tmp_path):
    locked = bytearray(_zip({"locked/answers.txt": b"sealed " * 8, "readme.txt": b"plain"}))
    for header, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the first member's
        locked[locked.index(header) + flags_at] |= 0x1  # "encrypted" bit: unreadable without key
    many = _zip({f"m/{n:04}.txt": b"x" for n in range(2003)})
    files = [
        public_file(tmp_path, "locked.zip", bytes(locked)),
        public_file(tmp_path, "many.zip", many),
    ]

    found = audit([task("t/1")], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "locked.zip!locked/answers.txt (encrypted" in found[0].message
    assert "many.zip (3 members past 2000)" in found[0].message


def test_a_name_past_the_member_cap_is_still_read(tmp_path):
    members = {f"m/{n:04}.txt": b"x" for n in range(2000)}
    members["late/treaty-of-westphalia-in-1648.txt"] = b"x"
    files = [public_file(tmp_path, "many.zip", _zip(members))]

    assert ("failing", "reference_in_public", "qa/1") in serious(audit([short_task()], files))


def test_containers_nested_past_the_depth_cap_are_listed(tmp_path):
    data = ANSWER.encode()
    for _ in range(6):
        data = gzip.compress(data)
    files = [public_file(tmp_path, "deep.gz", data)]

    found = audit([task("essay/1", hidden={"reference_answer": ANSWER})], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "deep.gz (containers nested deeper than 4" in found[0].message


# --- eval-root files ------------------------------------------------------------------------------


def test_a_small_eval_file_copied_with_other_line_endings_fails(tmp_path):
    sealed = public_file(tmp_path, "t1/expected.txt", b"forty two apples\nand a pear\n", "eval")
    crlf = public_file(tmp_path, "copy/expected.txt", b"forty two apples\r\nand a pear")
    other = public_file(tmp_path, "copy/other.txt", b"forty two apples\nand a plum\n")

    found = audit([task("t/1")], [sealed, crlf, other])

    same = [f.evidence["public_path"] for f in found if f.code == "hidden_file_is_public"]
    assert same == ["copy/expected.txt"]


def test_an_eval_archive_member_published_as_a_plain_file_fails(tmp_path):
    checker = b"def test_output():\n    assert open('out.txt').read() == 'done'\n"
    sealed = public_file(tmp_path, "t1/tests.tar.gz", _tar_gz({"test_out.py": checker}), "eval")
    copy = public_file(tmp_path, "copy/test_out.py", checker)

    found = audit([task("t/1")], [sealed, copy])

    same = [f.evidence["public_path"] for f in found if f.code == "hidden_file_is_public"]
    assert same == ["copy/test_out.py"]


def test_a_short_eval_file_quoted_in_a_public_file_fails(tmp_path):
    sealed = public_file(tmp_path, "t1/flag.txt", b"the vault code is amber falcon 7731\n", "eval")
    quoted = public_file(
        tmp_path, "notes.md", b"# Notes\nReminder: The vault code is Amber Falcon 7731."
    )
    twin = public_file(
        tmp_path, "other.md", b"# Notes\nReminder: the vault code is amber falcon 1234."
    )

    assert serious(audit([task("t/1")], [sealed, twin])) == []
    assert serious(audit([task("t/1")], [sealed, quoted])) == [
        (FAILING, "hidden_value_in_public", None)
    ]


# --- boilerplate shared by many sealed values ---------------------------------------------------

BOILERPLATE = (
    "import pytest\nfrom solution import run\n\n"
    "def helper_compare(left, right):\n    assert left == right, f'expected {right} got {left}'\n\n"
    "def helper_load(path):\n    with open(path) as handle:\n        return handle.read().strip()\n"
)


@pytest.mark.parametrize("leaked_index", [0, 69])
def test_a_leaked_value_is_judged_on_its_own_text_not_shared_boilerplate(tmp_path, leaked_index):
    def own(n: int) -> str:
        words = " ".join(f"w{n}x{k}" for k in range(12))
        return f"def test_case_{n}():\n    helper_compare(run('{words}'), {n})\n"

    tasks = [task(f"c/{n}", inputs={"tests": {"code": BOILERPLATE + own(n)}}) for n in range(70)]
    leaked = public_file(tmp_path, "leak.py", own(leaked_index).encode())

    assert serious(audit(tasks, [leaked])) == [
        (FAILING, "hidden_tokens_in_public", f"c/{leaked_index}")
    ]


def test_a_compressed_tar_stops_after_a_member_read_in_part(tmp_path):
    # Reading on would decompress the rest of the big member only to skip it: the archive is
    # listed as read in part instead (a warning), whatever follows.
    big = b"word " * (2 * 1024 * 1024)  # 10 MB of text: read to the 8 MB cap
    archive = _tar_gz({"big.txt": big, "after/notes.txt": ANSWER.encode()})
    files = [public_file(tmp_path, "data/big.tar.gz", archive)]

    found = audit([task("essay/1", hidden={"reference_answer": ANSWER})], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "data/big.tar.gz (stopped after a member read in part)" in found[0].message


def test_an_eval_file_past_the_read_cap_is_still_matched_by_its_digest(tmp_path):
    content = b"".join(b"row %d of the sealed table\n" % n for n in range(400_000))
    assert len(content) > 8 * 1024 * 1024
    sealed = public_file(tmp_path, "t1/table.txt", content, "eval")
    copy = public_file(tmp_path, "copy/table.txt", content)

    found = audit([task("t/1")], [sealed, copy])

    same = [f.evidence["public_path"] for f in found if f.code == "hidden_file_is_public"]
    assert same == ["copy/table.txt"]


# --- hostile files: bounded, never a crash ------------------------------------------------------


def test_json_nested_past_what_python_parses_is_no_crash(tmp_path):
    deep = public_file(tmp_path, "deep.json", b"[" * 5000 + b"]" * 5000)
    leaked = public_file(tmp_path, "notes.txt", ANSWER.encode())

    found = audit([task("essay/1", hidden={"reference_answer": ANSWER})], [deep, leaked])

    assert serious(found) == [(FAILING, "reference_in_public", "essay/1")]


def test_a_bomb_of_empty_gzip_members_is_stopped_by_its_cpu_budget(tmp_path, monkeypatch):
    # Empty members decompress to nothing, so no byte cap ever sees them: the CPU one does.
    monkeypatch.setattr(containers, "BASE_FILE_CPU_SECONDS", 0.3)
    bomb = bz2.compress(gzip.compress(b"", mtime=0) * 400_000)
    files = [public_file(tmp_path, "empty.gz.bz2", bomb)]

    found = audit([task("t/1")], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "empty.gz.bz2 (not read to the end: 0 s of CPU for 0 MB of content)" in found[0].message


def test_a_tar_entry_skipped_by_decompressing_through_it_is_charged(tmp_path, monkeypatch):
    monkeypatch.setattr(containers, "MAX_INFLATED_BYTES", 16 * 1024 * 1024)
    gap = tarfile.TarInfo("gap")
    gap.type, gap.size = b"Z", 64 * 1024 * 1024  # a type tarfile skips over, not a file
    body = gap.tobuf(format=tarfile.GNU_FORMAT) + bytes(gap.size)
    answer = tarfile.TarInfo("after.txt")
    answer.size = len(ANSWER)
    body += answer.tobuf(format=tarfile.GNU_FORMAT) + ANSWER.encode().ljust(512, b"\0")
    files = [public_file(tmp_path, "gap.tar.gz", gzip.compress(body + bytes(1024), 1))]

    found = audit([task("essay/1", hidden={"reference_answer": ANSWER})], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "more than 16777216 bytes decompressed" in found[0].message


def test_entries_past_the_caps_stop_the_walk(tmp_path, monkeypatch):
    monkeypatch.setattr(containers, "MAX_ARCHIVE_MEMBERS", 10)
    monkeypatch.setattr(containers, "MAX_NAMES_PAST_CAP", 20)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for n in range(100):
            entry = tarfile.TarInfo(f"d{n}")
            entry.type = tarfile.DIRTYPE
            archive.addfile(entry)
        info = tarfile.TarInfo("late.txt")
        info.size = len(ANSWER)
        archive.addfile(info, io.BytesIO(ANSWER.encode()))
    files = [public_file(tmp_path, "dirs.tar.gz", buffer.getvalue())]

    found = audit([task("essay/1", hidden={"reference_answer": ANSWER})], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "dirs.tar.gz (more than 30 entries)" in found[0].message


# --- text as a reader sees it ---------------------------------------------------------------------

FRENCH = (
    "Le traité qui mit fin à la guerre fut signé à Osnabrück par les envoyés des deux "
    "couronnes après quatre années de négociations difficiles"
)


@pytest.mark.parametrize(
    "encode",
    [
        pytest.param(lambda t: t.encode("cp1252"), id="windows-1252"),
        pytest.param(lambda t: unicodedata.normalize("NFD", t).encode(), id="decomposed"),
        pytest.param(
            lambda t: t.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}).encode(),
            id="full-width",
        ),
        pytest.param(lambda t: t.replace(" ", " \u200b").encode(), id="zero-width"),
        pytest.param(lambda t: ("id;answer\nessay/fr;" + t).encode("cp1252"), id="csv-export"),
    ],
)
def test_an_answer_in_another_encoding_or_form_fails(tmp_path, encode):
    owner = task("essay/fr", hidden={"reference_answer": FRENCH})
    leaked = public_file(tmp_path, "corrige.txt", encode(FRENCH))
    twin = public_file(tmp_path, "autre.txt", encode("Un texte sans rapport avec la question"))

    assert serious(audit([owner], [twin])) == []
    assert serious(audit([owner], [leaked])) == [(FAILING, "reference_in_public", "essay/fr")]


def test_numbers_that_start_like_an_lzma_header_are_read_as_data(tmp_path):
    numbers = (93).to_bytes(4, "little") + bytes(range(1, 200)) * 4
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    leaked = public_file(tmp_path, "table.bin", numbers + ANSWER.encode() + numbers)

    assert serious(audit([owner], [leaked])) == [(FAILING, "reference_in_public", "essay/1")]


def test_a_big_binary_file_is_read_to_its_end_without_a_warning(tmp_path):
    noise = os.urandom(12 * 1024 * 1024)
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    clean = public_file(tmp_path, "weights.bin", noise)
    leaked = public_file(tmp_path, "model.bin", noise + ANSWER.encode() + b"\0" + noise[:999])

    assert serious(audit([owner], [clean])) == []
    assert serious(audit([owner], [leaked])) == [(FAILING, "reference_in_public", "essay/1")]


def test_a_compressed_page_behind_a_big_image_is_read(tmp_path):
    image = os.urandom(6 * 1024 * 1024)  # a zlib-like byte pair every 16 KB
    page = zlib.compress(f"BT ({ANSWER}) Tj ET".encode())
    pdf = b"%PDF-1.4\nstream\n" + image + b"\nendstream\nstream\n" + page + b"\nendstream\n"
    owner = task("essay/1", hidden={"reference_answer": ANSWER})

    found = audit([owner], [public_file(tmp_path, "paper.pdf", pdf)])

    assert serious(found) == [(FAILING, "reference_in_public", "essay/1")]


# --- by design: wrong answers, expected outputs -------------------------------------------------


def test_a_rejected_answer_quoted_in_the_prompt_is_no_leak():
    misconception = "the Earth is closer to the sun in summer"
    question = f"Many people believe {misconception}. What really causes the seasons?"
    rubric = {"accepted_answers": ["the tilt of the axis of the Earth"]}
    tasks = [
        task(
            "facts/seasons",
            public={"prompt": question},
            hidden={"rubric": rubric | {"rejected_answers": [misconception]}},
        )
    ]
    leaky = [task("facts/seasons", public={"prompt": question}, hidden={"rubric": rubric})]
    leaky[0].public["prompt"] += " Hint: the tilt of the axis of the Earth."

    assert serious(audit(tasks)) == []
    assert serious(audit(leaky)) == [(FAILING, "hidden_tokens_in_public", "facts/seasons")]


def _terminal(task_id: str) -> object:
    checker = {"path": f"{task_id}/tests", "source": "pytest", "timeout_seconds": 30}
    return task(
        task_id,
        "terminal_task",
        public={"instructions": "Write the ERROR lines of logs/app.log to errors.log."},
        inputs={"checker": checker},
    )


def test_a_terminal_tasks_expected_output_derived_from_public_input_warns(tmp_path):
    lines = [
        f"2026-11-0{n} ERROR payment gateway timed out for order {n} while the card was"
        " charged by the billing service of the shop\n"
        for n in range(1, 6)
    ]
    log = "".join(
        f"2026-11-0{n} INFO user signed in from the usual place\n{lines[n - 1]}"
        for n in range(1, 6)
    )
    expected = public_file(tmp_path, "grep/tests/expected.log", "".join(lines).encode(), "eval")
    checker = (
        b"def test_errors():\n    got = open('/app/errors.log').read()\n"
        b"    assert got == open('/tests/expected.log').read(), 'the ERROR lines differ'\n"
    )
    tests = public_file(tmp_path, "grep/tests/test_outputs.py", checker, "eval")
    public_log = public_file(tmp_path, "logs/app.log", log.encode())
    copied = public_file(tmp_path, "leak/test_outputs.py", checker)

    found = audit([_terminal("grep")], [expected, tests, public_log])
    assert serious(found) == [(WARNING, "hidden_tokens_in_public", None)]
    assert "expected output" in found[0].message

    found = audit([_terminal("grep")], [expected, tests, public_log, copied])
    assert (FAILING, "hidden_file_is_public", None) in serious(found)


def test_the_same_data_file_of_a_task_of_another_family_still_fails(tmp_path):
    lines = "".join(
        f"2026-11-0{n} ERROR payment gateway timed out for order {n}\n" for n in range(5)
    )
    expected = public_file(tmp_path, "grep/tests/expected.log", lines.encode(), "eval")
    public_log = public_file(tmp_path, "logs/app.log", lines.encode())
    other = task("grep", inputs={"checker": {"path": "grep/tests"}})

    found = audit([other], [expected, public_log])

    assert (FAILING, "hidden_file_is_public", None) in serious(found)


def _wrapped(text: str, width: int, start: str, end: str = "") -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + len(word) > width:
            lines.append(f"{start}{line}{end}")
            line = ""
        line = f"{line}{word} "
    return "\n".join([*lines, f"{start}{line}{end}"])


WRAPPINGS = {
    "comment": lambda t: _wrapped(t, 30, "# "),
    "string concatenation": lambda t: "NOTE = (\n" + _wrapped(t, 40, '    "', '"') + "\n)\n",
    "javascript concatenation": lambda t: _wrapped(t, 40, "  '", "' +") + " '';",
    "markdown emphasis": lambda t: " ".join(
        f"**{w}**" if i % 4 == 1 else w for i, w in enumerate(t.split())
    ),
    "hyphenated line breaks": lambda t: t.replace("Osnabrueck", "Osna-\nbrueck").replace(
        "envoys", "en-\nvoys"
    ),
}


@pytest.mark.parametrize("wrapping", list(WRAPPINGS))
def test_an_answer_wrapped_in_comments_strings_or_markup_fails(tmp_path, wrapping):
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    leaked = public_file(tmp_path, "notes/src.txt", WRAPPINGS[wrapping](ANSWER).encode())
    twin = public_file(tmp_path, "notes/other.txt", WRAPPINGS[wrapping](SHORT * 3).encode())

    assert serious(audit([owner], [twin])) == []
    assert serious(audit([owner], [leaked])) == [(FAILING, "reference_in_public", "essay/1")]


def test_a_spent_budget_never_means_an_unbounded_read(tmp_path, monkeypatch):
    # zlib's max_length=0 and read(-1) both mean "no limit": a budget spent to zero must stop.
    monkeypatch.setattr(containers, "MAX_ARCHIVE_BYTES", 256 * 1024)
    monkeypatch.setattr(containers, "MAX_INFLATED_BYTES", 16 * 1024 * 1024)
    bomb = zlib.compress(bytes(64 * 1024 * 1024), 9)  # never inflated: nothing is left
    blob = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) + bomb + os.urandom(2 * 1024 * 1024)
    files = [public_file(tmp_path, "blob.bin", blob)]

    found = audit([task("t/1")], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "blob.bin (read budget spent on embedded streams)" in found[0].message
    assert "decompressed" not in found[0].message


def test_a_long_run_of_blanks_mid_line_is_read_in_linear_time(tmp_path):
    # The prose view's line-end pattern once backtracked over such runs (cubic time): the
    # file's CPU budget, checked between chunks, came too late and the file went unread.
    blanks = b"notes\ny" + b" " * 3000 + b"x\n"
    files = [public_file(tmp_path, "notes.txt", blanks + ANSWER.encode())]

    found = audit([task("essay/1", hidden={"reference_answer": ANSWER})], files)

    assert serious(found) == [(FAILING, "reference_in_public", "essay/1")]


def test_a_truncated_zstandard_file_is_listed_as_damaged(tmp_path):
    whole = zstandard.ZstdCompressor().compress(f"notes {ANSWER}".encode())
    files = [public_file(tmp_path, "notes.txt.zst", whole[:-4])]

    found = audit([task("t/1")], files)

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "notes.txt.zst (damaged" in found[0].message


def test_an_evaluation_input_equal_to_a_public_key_is_no_leak():
    field = "total sales in euros for the year"
    form = task(
        "forms/1",
        public={"question": "Fill in the form.", "form": {field: ""}},
        inputs={"expected_field": field},
    )

    assert serious(audit([form])) == []


def test_a_copy_in_other_case_is_not_the_same_file(tmp_path):
    sealed = public_file(tmp_path, "t1/expected.txt", b"ALICE SMITH JOINED ON MONDAY\n", "eval")
    lower = public_file(tmp_path, "copy/names.txt", b"alice smith joined on monday\n")

    found = audit([task("t/1")], [sealed, lower])

    assert "hidden_file_is_public" not in {f.code for f in found}
