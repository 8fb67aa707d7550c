"""Two versions of one pack, written as folders and imported as an author would."""

from __future__ import annotations

import copy
from typing import Any

from packs.models import ContractVersion
from packs.services import pack_import_folder

PROMPT = (
    "Write a Python function `add(a, b)` that returns the sum of its two arguments. "
    "Both arguments are integers; put the function in candidate.py and do not print anything."
)
OLD_SECRET = "SEALED-OLD-3c9a"
NEW_SECRET = "SEALED-NEW-7d41"
OLD_TESTS = f"assert add(1, 2) == 3  # {OLD_SECRET}-tests\n"
NEW_TESTS = f"assert add(2, 2) == 4  # {NEW_SECRET}-tests\n"
CONTRACT: dict[str, Any] = {
    "budgets": {"wall_time_seconds": 600, "tokens": 200000, "attempts": 1},
    "allowed_to_modify": ["candidate.py"],
    "read_only": ["tests/**"],
    "required_outputs": ["candidate.py"],
    "compatible_evaluations": ["securebench@1"],
}


def code_row(task_id: str = "add", *, prompt: str = PROMPT, tests: str = OLD_TESTS) -> dict:
    return {
        "id": task_id,
        "family": "code_completion",
        "input": {"prompt": prompt, "language": "python"},
        "eval": {
            "tests": {"source": "inline", "code": tests},
            "canonical_solution": f"def add(a, b):\n    return a + b  # {OLD_SECRET}-solution\n",
        },
        "metadata": {"entry_point": "add"},
    }


def answer_row(task_id: str = "q1", *, question: str = "Capital of France?", answers=None) -> dict:
    return {
        "id": task_id,
        "family": "short_answer",
        "input": {"question": question},
        "eval": {"accepted_answers": answers or [f"Paris {OLD_SECRET}"]},
    }


def choice_row(task_id: str = "mc1", *, choices=None, answer: str = "B") -> dict:
    return {
        "id": task_id,
        "family": "multiple_choice",
        "input": {
            "question": "Which city is the capital of Italy?",
            "choices": choices or ["Paris", "Rome", "London", "Madrid"],
        },
        "eval": {"answer": answer},
    }


def manifest(version: int, **fields: Any) -> dict[str, Any]:
    base = {
        "id": "demo",
        "version": version,
        "title": "Demo pack",
        "description": "A pack for comparing versions.",
        "contract": copy.deepcopy(CONTRACT),
    }
    return {**base, **fields}


def base_rows() -> list[dict]:
    return [code_row(), answer_row(), choice_row()]


def import_pack(make_pack, version: int, rows: list[dict], files=None, **fields):
    folder = make_pack(manifest(version, **fields), rows, files)
    return pack_import_folder(folder=folder).contract_version


def two_versions(
    make_pack, new_rows: list[dict] | None = None, *, old_rows=None, old=None, new=None,
    old_files=None, new_files=None,
) -> tuple[ContractVersion, ContractVersion]:  # fmt: skip
    """v1 from old_rows (default: base rows), v2 from new_rows (default: the same rows);
    old/new are extra manifest fields of each side."""
    first = import_pack(make_pack, 1, old_rows or base_rows(), old_files, **(old or {}))
    second = import_pack(
        make_pack, 2, new_rows if new_rows is not None else base_rows(), new_files, **(new or {})
    )
    return first, second
