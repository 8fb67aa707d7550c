"""`manage.py submit_run` end to end with a real worker: oracle runs pass every task that has a
reference, null runs fail every task, on each reference pack. (On the full HumanEval set the
same oracle and null runs are the health report's own: tests/pack_health/test_reference_packs.)"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from packs.models import ContractVersion, Task
from packs.selectors import evaluator_lanes_for_tasks
from tests.runs.conftest import WorkerPool, bwrap_or_skip
from verifiers.oracle import oracle_candidate

pytestmark = pytest.mark.django_db(transaction=True)

REFERENCE_PACK_NAMES = (
    "code-completion-smoke",
    "humaneval-mini",
    "mmlu-abstract-algebra-mini",
    "terminal-task-smoke",
)


def _command(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("submit_run", *args, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def _tasks_with_reference(pack_id: str) -> set[str]:
    version = ContractVersion.objects.get(pack__pack_id=pack_id)
    tasks = list(Task.objects.filter(contract_version=version))
    lanes = evaluator_lanes_for_tasks(tasks)
    return {task.task_id for task in tasks if oracle_candidate(lanes[task.pk]) is not None}


def _check_oracle_and_null(pack_id: str, version: int = 1) -> None:
    with_reference = _tasks_with_reference(pack_id)
    assert with_reference, f"{pack_id} has no task with a reference"
    common = ["--pack", pack_id, "--version", str(version), "--wait", "--json", "--timeout", "600"]
    oracle = _command(*common, "--oracle")
    null = _command(*common, "--null")
    assert oracle["status"] == null["status"] == "done"
    for row in oracle["results"]:
        if row["task_id"] in with_reference:
            assert (row["status"], row["failure_reason"]) == ("passed", None), (pack_id, row)
        else:
            assert (row["status"], row["failure_reason"]) == ("failed", "missing_candidate")
    assert {row["status"] for row in null["results"]} == {"failed"}, (pack_id, null["results"])
    assert null["score"] == 0.0


def test_oracle_and_null_on_every_reference_pack(
    workers: WorkerPool, reference_packs: Path
) -> None:
    bwrap_or_skip()
    workers.start()
    for name in REFERENCE_PACK_NAMES:
        call_command("import_pack", str(reference_packs / name), stdout=io.StringIO())
        _check_oracle_and_null(name)


def test_submit_run_with_a_bundle_file_and_errors(tmp_path: Path, broker: Any) -> None:
    call_command("import_pack", "examples/arithmetic-mc", stdout=io.StringIO())
    bundle = tmp_path / "candidates.jsonl"
    bundle.write_text(
        json.dumps({"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B"}})
        + "\n"
    )
    out = io.StringIO()
    call_command(
        "submit_run",
        "--pack",
        "arithmetic-mc",
        "--candidates",
        str(bundle),
        "--agent",
        "cli",
        stdout=out,
    )
    assert re.match(r"run \d+, evaluation 1: queued \(a worker scores it", out.getvalue())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"task_id": "arithmetic-mc/nope", "candidate": {"kind": "text", "text": "B"}}\n'
    )
    with pytest.raises(CommandError, match=r"bad.jsonl line 1, task_id: 'arithmetic-mc/nope'"):
        call_command("submit_run", "--pack", "arithmetic-mc", "--candidates", str(bad))
    with pytest.raises(CommandError, match=r"version 7 of pack 'arithmetic-mc' is not stored"):
        call_command("submit_run", "--pack", "arithmetic-mc", "--version", "7", "--null")
