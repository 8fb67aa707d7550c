"""The static leak audit: for each rule, a pack that trips it and a clean twin that does not;
the real packs (reference packs, our examples, HumanEval) come out clean."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from packs.compiler import compile_pack, compiled_task_lanes
from packs.management.commands.import_humaneval import write_humaneval_pack
from tests.components import REFERENCE_PACK_NAMES
from tests.conftest import EXAMPLES, TEST_PACKS, mc_row
from verifiers.leak_audit import AuditFile, leak_findings
from verifiers.pack_findings import FAILING, INFO, LEAK, WARNING, Finding
from verifiers.task import TaskLanes

ANSWER = (
    "The treaty that ended the war was signed in the city of Osnabrueck by envoys of both"
    " crowns after four years of talks"
)
TESTS_CODE = (
    "def check(candidate):\n"
    "    assert candidate('quiet rivers carry heavy stones toward the grey sea') == 9\n"
    "    assert candidate('seven silver swans swim slowly under the old bridge') == 9\n"
)


def task(
    task_id: str,
    family: str = "free_response",
    *,
    public: dict[str, Any] | None = None,
    inputs: dict[str, Any] | None = None,
    hidden: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> TaskLanes:
    return TaskLanes(
        task_id=task_id,
        family=family,
        public=public or {"question": f"Question {task_id}?"},
        evaluation_inputs=inputs or {},
        hidden=hidden or {},
        metadata=metadata or {},
    )


def audit(
    tasks: list[TaskLanes],
    files: list[AuditFile] | None = None,
    *,
    description: str = "",
    canaries: tuple[str, ...] = (),
    title: str = "",
) -> list[Finding]:
    found = leak_findings(
        iter(tasks), iter(files or []), description=description, canaries=canaries, pack_title=title
    )
    assert all(f.check == LEAK for f in found)
    return found


def serious(found: list[Finding]) -> list[tuple[str, str, str | None]]:
    return [(f.severity, f.code, f.task_id) for f in found if f.severity in (FAILING, WARNING)]


def public_file(tmp_path: Path, path: str, content: bytes, root: str = "public") -> AuditFile:
    source = tmp_path / root / path
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(content)
    return AuditFile(root, path, hashlib.sha256(content).hexdigest(), source)  # type: ignore[arg-type]


def assert_sealed_text_kept_apart(finding: Finding, sealed_text: str) -> None:
    """The leaked text is in sealed_evidence only: never in the message or the evidence."""
    probe = sealed_text.split()[2:6]
    shown = json.dumps([finding.message, finding.evidence]).lower()
    assert " ".join(probe).lower() not in shown
    assert " ".join(probe).lower() in json.dumps(finding.sealed_evidence).lower()


# --- passages across the pack -----------------------------------------------------------------


@pytest.mark.parametrize("order", ["leak_first", "leak_last"])
def test_a_reference_answer_pasted_into_another_tasks_prompt_fails(order):
    owner = task("essay/1", hidden={"reference_answer": ANSWER, "rubric": {"type": "x"}})
    shower = task("essay/2", public={"question": f"Background: {ANSWER}. Now discuss."})
    tasks = [shower, owner] if order == "leak_first" else [owner, shower]

    found = audit(tasks)

    assert serious(found) == [(FAILING, "reference_in_public", "essay/1")]
    assert "essay/2" in found[0].message and "reference_answer" in found[0].message
    assert_sealed_text_kept_apart(found[0], ANSWER)


def test_the_clean_twin_with_its_own_words_passes():
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    other = task("essay/2", public={"question": "Which treaty ended the war, and where?"})

    assert audit([owner, other]) == []


def test_hidden_tests_copied_into_the_prompt_fail_and_name_the_lane():
    leaky = task(
        "code/1",
        "code_completion",
        public={"prompt": f"def count(s):\n    '''Tests:\n{TESTS_CODE}'''\n"},
        inputs={"tests": {"source": "inline", "code": TESTS_CODE}},
    )
    clean = task(
        "code/2",
        "code_completion",
        public={"prompt": "def count(s):\n    '''Count the letters of s.'''\n"},
        inputs={"tests": {"source": "inline", "code": TESTS_CODE.replace("candidate", "f")}},
    )

    found = audit([leaky, clean])

    assert serious(found) == [(FAILING, "hidden_tokens_in_public", "code/1")]
    assert "evaluation input `tests`" in found[0].message


def test_a_docstring_example_repeated_in_the_tests_is_info_only():
    example = "count('quiet rivers carry heavy stones toward the grey sea') == 9"
    prompt = f"def count(s):\n    '''Count the letters.\n    >>> {example}\n    '''\n"
    tests = TESTS_CODE + "".join(
        f"    assert candidate('word{n} alpha beta gamma delta epsilon zeta eta') == {n}\n"
        for n in range(6)
    )
    found = audit(
        [
            task(
                "code/1",
                "code_completion",
                public={"prompt": prompt},
                inputs={"tests": {"source": "inline", "code": tests}},
            )
        ]
    )

    assert serious(found) == []
    assert [(f.severity, f.code) for f in found] == [(INFO, "hidden_tokens_overlap")]


def test_a_solution_differing_only_in_operators_and_numbers_is_not_a_copy():
    # HumanEval/50: the prompt's encode function is the decode solution with + for -.
    prompt = (
        "def encode_shift(s):\n"
        '    return "".join([chr(((ord(ch) + 5 - ord("a")) % 26) + ord("a")) for ch in s])\n'
        "def decode_shift(s):\n    '''Decode what encode_shift made.'''\n"
    )
    solution = '    return "".join([chr(((ord(ch) - 5 - ord("a")) % 26) + ord("a")) for ch in s])\n'
    found = audit(
        [
            task(
                "code/50",
                "code_completion",
                public={"prompt": prompt},
                hidden={"canonical_solution": solution},
            )
        ]
    )

    assert serious(found) == []


# --- whole values ------------------------------------------------------------------------------


def test_a_short_hidden_answer_inside_its_own_question_fails():
    leaky = task(
        "qa/1",
        "short_answer",
        public={"question": "Where was it signed (hint: the city of Osnabrueck in Lower Saxony)?"},
        hidden={"accepted_answers": ["the city of Osnabrueck in Lower Saxony"]},
    )
    clean = task(
        "qa/2",
        "short_answer",
        public={"question": "Where was it signed?"},
        hidden={"accepted_answers": ["the old town hall of Muenster in Westphalia"]},
    )

    found = audit([leaky, clean])

    assert serious(found) == [(FAILING, "reference_in_public", "qa/1")]
    assert "question" in found[0].message
    assert found[0].sealed_evidence["value"] == "the city of Osnabrueck in Lower Saxony"
    assert "Osnabrueck" not in found[0].message + json.dumps(found[0].evidence)


def test_a_hidden_value_in_the_pack_description_or_title_fails():
    owner = task("x/1", "custom_family", hidden={"secret_note": "alpha bravo charlie delta echo"})

    assert serious(audit([owner], description="Notes: Alpha  Bravo charlie delta echo.")) == [
        (FAILING, "hidden_value_in_public", "x/1")
    ]
    assert serious(audit([owner], title="alpha bravo charlie delta echo")) == [
        (FAILING, "hidden_value_in_public", "x/1")
    ]
    assert serious(audit([owner], description="Notes about the pack.")) == []


def test_values_too_short_to_matter_are_not_matched_whole():
    # A one-word answer and a multiple-choice answer naming its choice are no leak.
    found = audit(
        [
            task(
                "qa/1",
                "short_answer",
                public={"question": "Is Paris the capital of France?"},
                hidden={"accepted_answers": ["Paris"]},
            ),
            task(
                "mc/1",
                "multiple_choice",
                public={"question": "Pick one", "choices": ["a long choice text here", "no"]},
                hidden={"answer": "a long choice text here"},
            ),
        ]
    )

    assert found == []


def test_an_evaluation_input_naming_a_public_test_path_is_no_leak():
    found = audit(
        [
            task(
                "repo/1",
                "repo_patch",
                public={"instructions": "Make tests/unit/test_stats_module.py pass."},
                inputs={
                    "tests": {
                        "source": "command",
                        "command": ["pytest", "tests/unit/test_stats_module.py"],
                    },
                    "candidate_policy": {"allow_paths": ["src/"]},
                },
            )
        ]
    )

    assert found == []


def test_a_reference_solution_already_in_the_prompt_fails():
    body = "    total = 0\n    for item in items:\n        total += item * item\n    return total\n"
    signature = "def sum_squares(items):\n    '''Sum of the squares of items.'''\n"
    leaky = task(
        "code/1",
        "code_completion",
        public={"prompt": signature + "# Example solution:\n" + body},
        hidden={"canonical_solution": body},
    )
    # The twin: a full-function solution repeats the prompt's signature and docstring.
    other_body = "    squares = [item * item for item in items]\n    return sum(squares)\n"
    clean = task(
        "code/2",
        "code_completion",
        public={"prompt": signature.replace("sum_squares", "sum_of_squares")},
        hidden={
            "reference_solution": signature.replace("sum_squares", "sum_of_squares") + other_body
        },
    )

    found = audit([leaky, clean])

    assert serious(found) == [(FAILING, "reference_in_public", "code/1")]
    assert "total += item" in found[0].sealed_evidence["solution"]


# --- files -------------------------------------------------------------------------------------

BASE_FILE = (
    b"def variance(values):\n"
    b"    items = list(values)\n"
    b"    centre = sum(items) / len(items)\n"
    b"    return sum((x - centre) ** 2 for x in items) / len(items)\n"
)
GOLD_PATCH = """diff --git a/src/stats.py b/src/stats.py
--- a/src/stats.py
+++ b/src/stats.py
@@ -1,4 +1,6 @@
 def variance(values):
     items = list(values)
+    if len(items) < 2:
+        raise ValueError("variance needs at least two values from the caller")
     centre = sum(items) / len(items)
-    return sum((x - centre) ** 2 for x in items) / len(items)
+    return sum((x - centre) ** 2 for x in items) / (len(items) - 1)
"""
FIXED_FILE = (
    b"def variance(values):\n"
    b"    items = list(values)\n"
    b"    if len(items) < 2:\n"
    b'        raise ValueError("variance needs at least two values from the caller")\n'
    b"    centre = sum(items) / len(items)\n"
    b"    return sum((x - centre) ** 2 for x in items) / (len(items) - 1)\n"
)


def repo_task() -> TaskLanes:
    return task(
        "repo/1",
        "repo_patch",
        public={"repo": "repo", "base_commit": "abc", "instructions": "Fix variance."},
        inputs={
            "tests": {"source": "command", "command": ["pytest"]},
            "candidate_policy": {"allow_paths": ["src/"]},
        },
        hidden={"gold_patch": GOLD_PATCH},
    )


def test_a_gold_patch_shipped_in_the_public_repository_fails(tmp_path):
    found = audit([repo_task()], [public_file(tmp_path, "repo/src/stats.py", FIXED_FILE)])

    assert serious(found) == [(FAILING, "reference_in_public", "repo/1")]
    assert "public file repo/src/stats.py" in found[0].message


def test_the_base_repository_shares_the_patch_context_and_is_clean(tmp_path):
    # Context and removed lines are in the base repository by definition; a changed line
    # keeps most of the line it replaces, and that is no leak either.
    found = audit([repo_task()], [public_file(tmp_path, "repo/src/stats.py", BASE_FILE)])

    assert serious(found) == []


@pytest.mark.parametrize("name", ["assets/docs/fix.patch", "assets/fixes.diff", "notes.txt"])
def test_a_gold_patch_shipped_as_a_diff_file_fails(tmp_path, name):
    # The upstream tool's own SWE-bench pack shipped its gold patches in its public assets.
    found = audit([repo_task()], [public_file(tmp_path, name, GOLD_PATCH.encode())])

    assert serious(found) == [(FAILING, "reference_in_public", "repo/1")]
    assert f"public file {name}" in found[0].message


def test_a_public_diff_of_other_changes_is_clean(tmp_path):
    other = GOLD_PATCH.replace(
        'raise ValueError("variance needs at least two values from the caller")',
        "return 0.0",
    ).replace("/ (len(items) - 1)", "/ len(items)")

    found = audit([repo_task()], [public_file(tmp_path, "assets/other.patch", other.encode())])

    assert serious(found) == []


def test_a_one_word_fix_of_a_long_line_is_no_leak(tmp_path):
    line = '    message = "the variance of a sample needs at least two values from the caller" + '
    patch = (
        "diff --git a/src/stats.py b/src/stats.py\n--- a/src/stats.py\n+++ b/src/stats.py\n"
        f"@@ -1,1 +1,1 @@\n-{line}str(count)\n+{line}repr(count)\n"
    )
    fix = task(
        "repo/1",
        "repo_patch",
        inputs={"candidate_policy": {"allow_paths": ["src/"]}},
        hidden={"gold_patch": patch},
    )
    base = public_file(tmp_path, "repo/src/stats.py", f"{line}str(count)\n".encode())
    fixed = public_file(tmp_path, "leak/stats.py", f"{line}repr(count)\n".encode())

    assert serious(audit([fix], [base])) == []
    assert serious(audit([fix], [base, fixed])) == [(FAILING, "reference_in_public", "repo/1")]


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _tar_gz(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


ARCHIVES = {
    "notes.txt": (lambda data: data, "public file data/notes.txt"),
    "notes.zip": (lambda data: _zip({"inner/notes.txt": data}), "data/notes.zip!inner/notes.txt"),
    "notes.tar.gz": (
        lambda data: _tar_gz({"inner/notes.txt": data}),
        "data/notes.tar.gz!inner/notes.txt",
    ),
    "notes.txt.gz": (gzip.compress, "data/notes.txt.gz!(decompressed)"),
    "notes.txt.bz2": (bz2.compress, "data/notes.txt.bz2!(decompressed)"),
}


@pytest.mark.parametrize("name", list(ARCHIVES))
def test_a_hidden_answer_inside_a_public_file_or_archive_fails(tmp_path, name):
    pack, where = ARCHIVES[name]
    owner = task("essay/1", hidden={"reference_answer": ANSWER})
    leaked = public_file(tmp_path, f"data/{name}", pack(f"notes\n{ANSWER}\n".encode()))
    clean = public_file(tmp_path, f"clean/{name}", pack(b"notes about something else entirely\n"))

    found = audit([owner], [leaked, clean])

    assert serious(found) == [(FAILING, "reference_in_public", "essay/1")]
    assert where in found[0].message
    assert "clean/" not in found[0].message


def test_an_eval_root_file_published_again_fails_even_inside_an_archive(tmp_path):
    checker = b"def test_output():\n    assert open('out.txt').read() == 'done'\n"
    hidden = public_file(tmp_path, "task/tests/test_out.py", checker, root="eval")
    empty_hidden = public_file(tmp_path, "task/tests/__init__.py", b"", root="eval")
    copies = [
        public_file(tmp_path, "copy/test_out.py", checker),
        public_file(tmp_path, "bundle.zip", _zip({"tests/test_out.py": checker})),
        public_file(tmp_path, "pkg/__init__.py", b""),  # the same empty file: no finding
        public_file(tmp_path, "other.py", checker + b"# changed\n"),
    ]

    found = audit([task("t/1")], [hidden, empty_hidden, *copies])

    leaks = [f for f in found if f.code == "hidden_file_is_public"]
    assert sorted(f.evidence["public_path"] for f in leaks) == [
        "bundle.zip!tests/test_out.py",
        "copy/test_out.py",
    ]
    assert all(f.severity == FAILING for f in leaks)
    # The eval-root path is sealed (a checker's path is an evaluation input).
    assert all("task/tests" not in f.message + json.dumps(f.evidence) for f in leaks)
    assert leaks[0].sealed_evidence == {"eval_path": "task/tests/test_out.py"}


def test_eval_root_file_text_quoted_in_a_prompt_fails(tmp_path):
    checker = public_file(tmp_path, "t1/check.py", f"EXPECTED = '''{ANSWER}'''\n".encode(), "eval")
    leaky = task("t/1", "terminal_task", public={"instructions": f"Write this: {ANSWER}"})

    found = audit([leaky], [checker])

    assert serious(found) == [(FAILING, "hidden_tokens_in_public", None)]
    assert serious(audit([task("t/1", "terminal_task")], [checker])) == []


def test_a_damaged_archive_is_reported_as_audited_in_part(tmp_path):
    broken = public_file(tmp_path, "data.zip", _zip({"a.txt": b"x" * 100})[:60])

    found = audit([task("t/1")], [broken])

    assert [(f.severity, f.code) for f in found] == [(WARNING, "audit_limits")]
    assert "data.zip" in found[0].message


# --- canaries ----------------------------------------------------------------------------------

CANARY = "SB-CANARY 7f3c2a9e-41d8"


def test_a_canary_anywhere_public_fails_and_is_never_shown(tmp_path):
    tasks = [
        task("t/1", public={"question": f"What is {CANARY.lower()}?"}),
        task("t/2", metadata={"note": f"copied from {CANARY}"}),
        task("t/3", hidden={"reference_answer": f"sealed {CANARY} is fine here"}),
    ]
    files = [
        public_file(tmp_path, "a.txt", f"line\n{CANARY}\n".encode()),
        public_file(tmp_path, "b.bin", b"\0\1\2" + CANARY.encode() + b"\0"),
        public_file(tmp_path, "c.zip", _zip({"deep/c.txt": CANARY.encode()})),
        public_file(tmp_path, "d.txt", b"no marker here"),
    ]

    found = audit(tasks, files, description=f"Pack with  {CANARY}", canaries=(CANARY,))

    places = sorted(f.evidence["place"] for f in found if f.code == "canary_in_public")
    assert places == [
        "public file a.txt",
        "public file b.bin",
        "public file c.zip!deep/c.txt",
        "task t/1 (question)",
        "task t/2 (metadata)",
        "the pack description",
    ]
    assert serious(found) == [(FAILING, "canary_in_public", f.task_id) for f in found]
    for finding in found:
        assert "7f3c2a9e" not in (finding.message + json.dumps(finding.evidence)).lower()
        assert "7f3c2a9e" in finding.sealed_evidence["canary"]


def test_without_declared_canaries_nothing_is_looked_for(tmp_path):
    files = [public_file(tmp_path, "a.txt", CANARY.encode())]

    assert audit([task("t/1")], files) == []


# --- family rules -------------------------------------------------------------------------------


def test_a_repo_patch_task_without_allow_paths_warns():
    bare = task(
        "repo/1", "repo_patch", inputs={"tests": {"source": "command", "command": ["pytest"]}}
    )
    empty = task("repo/2", "repo_patch", inputs={"candidate_policy": {"allow_paths": []}})
    scoped = task("repo/3", "repo_patch", inputs={"candidate_policy": {"allow_paths": ["src/"]}})

    found = audit([bare, empty, scoped])

    assert serious(found) == [
        (WARNING, "repo_patch_without_allow_paths", "repo/1"),
        (WARNING, "repo_patch_without_allow_paths", "repo/2"),
    ]


def mc(task_id: str, answer: Any) -> TaskLanes:
    row = mc_row(task_id)
    return task(task_id, "multiple_choice", public=row["input"], hidden={"answer": answer})


def test_a_multiple_choice_pack_whose_answers_are_all_one_letter_warns():
    # "B", 1 (an index) and the text of choice B all name the same letter.
    same = [mc("q1", "B"), mc("q2", "b"), mc("q3", 1), mc("q4", "two")]

    found = audit(same)

    assert serious(found) == [(WARNING, "mc_answers_all_same", None)]
    assert found[0].sealed_evidence == {"answer": "B"} and "B" not in found[0].message
    assert audit([*same[:3], mc("q4", "C")]) == []
    assert audit(same[:3]) == []  # three tasks are too few to call it a pattern


# --- real packs ---------------------------------------------------------------------------------


def audit_folder(root: Path) -> list[Finding]:
    pack = compile_pack(root)
    files = [AuditFile(r, p, e.sha256, e.source) for (r, p), e in pack.files.items()]
    return leak_findings(
        (compiled_task_lanes(t, pack.files) for t in pack.tasks),
        files,
        description=pack.manifest.description or "",
        canaries=pack.manifest.canaries,
        pack_title=pack.manifest.title or "",
    )


@pytest.mark.parametrize("name", REFERENCE_PACK_NAMES)
def test_the_reference_packs_are_clean(reference_packs, name):
    assert serious(audit_folder(reference_packs / name)) == []


def test_our_example_packs_are_clean():
    folders = [p for root in (EXAMPLES, TEST_PACKS) for p in sorted(root.iterdir())]
    found = {p.name: serious(audit_folder(p)) for p in folders if (p / "manifest.yaml").is_file()}

    assert found and all(f == [] for f in found.values()), found


def test_full_humaneval_is_clean(tmp_path):
    write_humaneval_pack(tmp_path)

    found = audit_folder(tmp_path)

    assert serious(found) == []
    # Tests repeating a documented example stay visible as information.
    assert {f.code for f in found} <= {"hidden_tokens_overlap"}


def test_a_canary_declared_in_a_compiled_pack_is_found_in_its_public_files(make_pack):
    root = make_pack(
        {"id": "demo", "version": 1, "canary": CANARY},
        [mc_row("q1")],
        {"assets/readme.txt": f"Do not train on this. {CANARY}\n"},
    )

    found = audit_folder(root)

    assert serious(found) == [(FAILING, "canary_in_public", None)]
    assert found[0].evidence["place"] == "public file readme.txt"
