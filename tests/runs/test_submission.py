"""Submitting runs: bundle formats, every refusal a user can cause (with its message and
nothing stored), missing candidates, budgets, and the evaluation rows a submission creates."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.bundle import BundleRejected, parse_bundle_file
from runs.candidates import verifier_candidate
from runs.models import Candidate, Evaluation, Run, TaskResult
from runs.services import (
    RunAlreadySubmitted,
    RunMetadata,
    evaluation_create,
    run_add_candidates,
    run_create,
    run_submit,
    run_submit_bundle,
)
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _broker(broker: Any) -> None:
    """Submissions send Celery messages on commit; keep them in a broker of the test's own."""


def _version(name: str) -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / name, source_name=name).contract_version


def _jsonl(tmp_path: Path, lines: list[Any], name: str = "candidates.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def _submit(version: ContractVersion, path: Path, **metadata: Any) -> tuple[Run, Evaluation]:
    bundle = parse_bundle_file(path, display_name=path.name)
    return run_submit_bundle(
        contract_version=version,
        bundle=bundle,
        metadata=RunMetadata(agent_name=metadata.pop("agent_name", "tester"), **metadata),
        source="form",
    )


def _problems(excinfo: pytest.ExceptionInfo[BundleRejected]) -> list[str]:
    return [str(problem) for problem in excinfo.value.problems]


def _nothing_stored() -> None:
    assert Run.objects.count() == 0
    assert Candidate.objects.count() == 0
    assert Evaluation.objects.count() == 0
    assert TaskResult.objects.count() == 0


MC = "arithmetic-mc"


def test_text_bundle_creates_run_candidates_and_queued_results(tmp_path: Path) -> None:
    version = _version(MC)
    path = _jsonl(
        tmp_path,
        [
            {"run": {"agent_name": "bundle-agent", "model_name": "m-1", "usage": {"usd": 0.5}}},
            {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B"}},
            {
                "task_id": "arithmetic-mc/linear-equation",
                "candidate": {"kind": "text", "text": "Answer: A"},
                "usage": {"input_tokens": 10, "output_tokens": 5, "wall_seconds": 1.5},
            },
        ],
    )
    run, evaluation = _submit(version, path, agent_name="")
    assert run.agent_name == "bundle-agent" and run.model_name == "m-1"
    assert run.candidate_count == 2 and run.is_submitted
    assert run.usage["usd"] == 0.5 and run.usage["total_input_tokens"] == 10
    results = {r.task.task_id: r for r in evaluation.results.select_related("task")}
    assert len(results) == version.task_count == 5
    assert results["arithmetic-mc/product"].status == "queued"
    assert results["arithmetic-mc/product"].queue == "text"
    missing = results["arithmetic-mc/power-remainder"]
    assert (missing.status, missing.failure_reason) == ("failed", "missing_candidate")


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    version = _version(MC)
    path = _jsonl(
        tmp_path,
        [
            {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B"}},
            "",
            '{"task_id": "arithmetic-mc/linear-equation", "candidate": {"kind": "text"',
        ],
    )
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, path)
    assert _problems(excinfo)[0].startswith("candidates.jsonl line 3: invalid JSON")
    _nothing_stored()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            {"task_id": "arithmetic-mc/nope", "candidate": {"kind": "text", "text": "B"}},
            "candidates.jsonl line 1, task_id: 'arithmetic-mc/nope' is not a task of "
            "arithmetic-mc v1",
        ),
        (
            {"task_id": "arithmetic-mc/product", "candidate": {"kind": "code", "code": "x"}},
            "candidate.kind: task 'arithmetic-mc/product' is multiple_choice, which takes a text "
            "candidate, not code",
        ),
        (
            {"task_id": "arithmetic-mc/product", "candidate": {"kind": "essay", "text": "B"}},
            "candidate.kind: must be one of text, code, patch, workspace",
        ),
        (
            {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "txt": "B"}},
            "candidate.txt: is not a key of a text candidate (use 'text')",
        ),
        (
            {
                "task_id": "arithmetic-mc/product",
                "candidate": {"kind": "text", "text": "B"},
                "x": 1,
            },
            "x: is not a candidate line key",
        ),
        (
            {
                "task_id": "arithmetic-mc/product",
                "candidate": {"kind": "text", "text": "B"},
                "usage": {"usd": -1},
            },
            "usage.usd: must be a non-negative number",
        ),
        (
            {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B\u0000"}},
            "contains a NUL character",
        ),
    ],
)
def test_bad_lines_are_refused_with_field_and_nothing_stored(
    tmp_path: Path, line: dict[str, Any], expected: str
) -> None:
    version = _version(MC)
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, _jsonl(tmp_path, [line]))
    assert any(expected in problem for problem in _problems(excinfo)), _problems(excinfo)
    _nothing_stored()


def test_duplicate_task_ids_name_both_lines(tmp_path: Path) -> None:
    version = _version(MC)
    line = {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B"}}
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, _jsonl(tmp_path, [line, line]))
    assert _problems(excinfo) == [
        "candidates.jsonl line 2, task_id: 'arithmetic-mc/product' already has a candidate "
        "on line 1"
    ]
    _nothing_stored()


def test_oversized_candidate_and_bundle_are_refused(tmp_path: Path, settings: Any) -> None:
    version = _version(MC)
    settings.SECUREBENCH_MAX_CANDIDATE_BYTES = 1000
    big = {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B" * 1001}}
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, _jsonl(tmp_path, [big]))
    assert "candidate.text: is larger than" in _problems(excinfo)[0]
    settings.SECUREBENCH_MAX_BUNDLE_BYTES = 100
    small = {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B" * 200}}
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, _jsonl(tmp_path, [small], "big.jsonl"))
    assert "big.jsonl: is 2" in _problems(excinfo)[0] and "over the limit" in _problems(excinfo)[0]
    _nothing_stored()


def test_unsafe_archive_member_is_refused(tmp_path: Path) -> None:
    version = _version(MC)
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("candidates.jsonl", "")
        archive.writestr("../escape.txt", "x")
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, path)
    assert "bundle.zip" in _problems(excinfo)[0] and ".." in _problems(excinfo)[0]
    _nothing_stored()


def _tar_gz(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), mode
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_workspace_candidates_from_archive_folder_and_file_map(tmp_path: Path) -> None:
    version = _version("terminal-files")
    lines = [
        {
            "task_id": "terminal-files/version-file",
            "candidate": {"kind": "workspace", "archive": "ws/version.tar.gz"},
        },
        {
            "task_id": "terminal-files/json-config",
            "candidate": {"kind": "workspace", "directory": "ws/json"},
        },
        {
            "task_id": "terminal-files/organise-logs",
            "candidate": {
                "kind": "workspace",
                "files": {"run.sh": {"content": "echo hi\n", "mode": "755"}, "a/b.txt": "b"},
            },
        },
    ]
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("bundle/candidates.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
        archive.writestr("bundle/ws/version.tar.gz", _tar_gz({"build/VERSION": b"1.4.2\n"}))
        archive.writestr("bundle/ws/json/config/settings.json", '{"port": 8080}\n')
    run, _ = _submit(version, path)
    by_task = {c.task.task_id: verifier_candidate(c) for c in run.candidates.select_related("task")}
    assert by_task["terminal-files/version-file"].files["build/VERSION"].content == b"1.4.2\n"
    assert by_task["terminal-files/json-config"].files["config/settings.json"].content == (
        b'{"port": 8080}\n'
    )
    organise = by_task["terminal-files/organise-logs"].files
    assert organise["run.sh"].mode == 0o755 and organise["a/b.txt"].content == b"b"


def test_workspace_path_escape_is_refused(tmp_path: Path) -> None:
    version = _version("terminal-files")
    line = {
        "task_id": "terminal-files/version-file",
        "candidate": {"kind": "workspace", "files": {"../../etc/passwd": "x"}},
    }
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, _jsonl(tmp_path, [line]))
    assert (
        "candidate.files.../../etc/passwd: path '../../etc/passwd' escapes" in _problems(excinfo)[0]
    )
    _nothing_stored()


def test_workspace_archive_reference_outside_an_archive_bundle_is_refused(tmp_path: Path) -> None:
    version = _version("terminal-files")
    line = {
        "task_id": "terminal-files/version-file",
        "candidate": {"kind": "workspace", "archive": "ws.tar.gz"},
    }
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, _jsonl(tmp_path, [line]))
    assert "only bundle archives can carry" in _problems(excinfo)[0]


def test_over_budget_run_is_scored_but_marked(tmp_path: Path) -> None:
    version = _version("python-functions")  # budgets: 600 s, 200,000 tokens, 2.5 USD per task
    lines = [
        {
            "task_id": "python-functions/chunked",
            "candidate": {"kind": "code", "code": "def chunked(items, size):\n    return []\n"},
            "usage": {"input_tokens": 150_000, "output_tokens": 60_000},
        }
    ]
    run, evaluation = _submit(version, _jsonl(tmp_path, lines))
    assert run.over_budget
    assert run.budget_notes == [
        "task python-functions/chunked used 210,000 tokens, over the budget of 200,000 per task"
    ]
    assert evaluation.results.filter(status="queued").count() == 1


def test_within_budget_run_is_eligible(tmp_path: Path) -> None:
    version = _version("python-functions")
    lines = [
        {
            "task_id": "python-functions/chunked",
            "candidate": {"kind": "code", "code": "pass\n"},
            "usage": {"input_tokens": 1000, "usd": 0.01, "wall_seconds": 30},
        }
    ]
    run, _ = _submit(version, _jsonl(tmp_path, lines))
    assert not run.over_budget and run.budget_notes == []


def test_api_style_batches_refuse_duplicates_across_batches_and_late_additions() -> None:
    from runs.bundle import parse_candidate_objects

    version = _version(MC)
    run = run_create(contract_version=version, metadata=RunMetadata("api"), source="api")
    line = {"task_id": "arithmetic-mc/product", "candidate": {"kind": "text", "text": "B"}}
    run_add_candidates(run, parse_candidate_objects([line]))
    with pytest.raises(BundleRejected) as excinfo:
        run_add_candidates(run, parse_candidate_objects([line]))
    assert "already has a candidate in this run" in _problems(excinfo)[0]
    run_submit(run)
    with pytest.raises(RunAlreadySubmitted):
        run_submit(run)
    with pytest.raises(RunAlreadySubmitted):
        run_add_candidates(run, parse_candidate_objects([{**line, "task_id": "arithmetic-mc/lcm"}]))
    assert Candidate.objects.filter(run=run).count() == 1


def test_reevaluation_keeps_history() -> None:
    version = _version(MC)
    run = run_create(contract_version=version, metadata=RunMetadata("api"), source="api")
    first = run_submit(run)
    second = evaluation_create(run)
    assert (first.number, second.number) == (1, 2)
    assert TaskResult.objects.filter(evaluation=first).count() == 5
    assert TaskResult.objects.filter(evaluation=second).count() == 5
    # No candidates at all: every task fails at once, and the evaluation is already done.
    assert second.is_done and second.failed == 5 and second.score == 0.0


def test_deferred_family_results_are_pending_and_not_scored(tmp_path: Path) -> None:
    version = _version("deferred-tool-call")
    run = run_create(contract_version=version, metadata=RunMetadata("api"), source="api")
    evaluation = run_submit(run)
    assert evaluation.is_done
    assert set(evaluation.results.values_list("status", "failure_reason")) == {
        ("pending", "no_verifier")
    }
    assert evaluation.score is None and evaluation.pending == version.task_count
