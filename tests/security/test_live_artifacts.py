"""An artifact_task's live workspace on both backends (``verifiers.live``, as an episode's
worker drives it): laid out like a terminal task's, its artifact is exactly the files the
agent created or changed (never the seed's untouched public files, never a link, never a file
outside the workspace), checked by the contract's output rules and the family's verifier; and
no file is written after the episode's wall-time budget ran out (``output_late`` cannot arise
from a live workspace: see episodes.live_collection)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from packs.compiler import compile_pack, compiled_task_lanes
from tests.episodes.artifact_pack import (
    BAD_PREDICTIONS,
    CONTRACT,
    GOOD_PREDICTIONS,
    PREDICTIONS,
    SEED_FILES,
    build_artifact_pack,
)
from verifiers import live
from verifiers.contract_check import candidate_violations
from verifiers.families import artifact_task
from verifiers.sandbox import MiB, Sandbox
from verifiers.task import TaskLanes

LIMITS = live.WorkspaceLimits(workspace_bytes=32 * MiB, memory_bytes=256 * MiB, pids=64)


@pytest.fixture
def workspace(backend: Sandbox, host_dir: Path, make_pack) -> Iterator[tuple[TaskLanes, object]]:
    compiled = compile_pack(build_artifact_pack(make_pack, "live-artifact"))
    lanes = compiled_task_lanes(compiled.tasks[0], compiled.files)
    ws = live.plan_live_workspace(lanes, backend.name, host_dir / "episode", LIMITS)
    seeded = live.seed(backend, ws, lanes)
    assert seeded.ok, seeded
    for path in SEED_FILES:
        assert path in seeded.text, seeded.text
    try:
        yield lanes, ws
    finally:
        live.destroy(ws.folder)


def test_the_artifact_is_what_the_agent_wrote_and_the_verifier_scores_it(backend, workspace):
    lanes, ws = workspace
    assert ws.read_only_paths == ("data",)
    written = live.write_file(backend, ws, PREDICTIONS, GOOD_PREDICTIONS)
    assert written.ok, written
    # The public files are there to read (the prompts read-only) but are not produced.
    read = live.run_bash(backend, ws, "cat data/prompts.jsonl notes/readme.txt", None)
    assert read.exit_code == 0 and "1 + 1" in read.text, read
    refused = live.write_file(backend, ws, "data/prompts.jsonl", "mine\n")
    assert not refused.ok, refused
    candidate, changed, _ = live.artifact_candidate(ws)
    assert candidate.kind == "artifact"
    assert sorted(candidate.files) == [PREDICTIONS]
    assert candidate.files[PREDICTIONS].content == GOOD_PREDICTIONS.encode()
    assert changed == [PREDICTIONS]
    assert candidate_violations(CONTRACT, "artifact_task", candidate, changed_paths=changed) == []
    verdict = artifact_task.verify(TaskLanes(**{**lanes.__dict__, "contract": CONTRACT}), candidate)
    assert verdict.status == "passed", verdict


def test_a_bad_jsonl_line_is_output_malformed_naming_the_line(backend, workspace):
    lanes, ws = workspace
    assert live.write_file(backend, ws, PREDICTIONS, BAD_PREDICTIONS).ok
    candidate, changed, _ = live.artifact_candidate(ws)
    (violation,) = candidate_violations(CONTRACT, "artifact_task", candidate, changed_paths=changed)
    assert violation.rule == "output_malformed", violation
    assert violation.paths == [PREDICTIONS]
    assert f"{PREDICTIONS} line 2: $.answer" in violation.message, violation.message
    verdict = artifact_task.verify(TaskLanes(**{**lanes.__dict__, "contract": CONTRACT}), candidate)
    assert (verdict.status, verdict.reason) == ("failed", "output_malformed"), verdict


def test_a_changed_public_file_is_produced_and_an_untouched_one_is_not(backend, workspace):
    _, ws = workspace
    edited = live.run_bash(backend, ws, "echo mine >> notes/readme.txt", None)
    assert edited.exit_code == 0, edited
    candidate, _, _ = live.artifact_candidate(ws)
    assert sorted(candidate.files) == ["notes/readme.txt"]


def test_links_and_files_outside_the_workspace_never_reach_the_artifact(backend, workspace):
    _, ws = workspace
    assert live.write_file(backend, ws, PREDICTIONS, GOOD_PREDICTIONS).ok
    outside = live.write_file(backend, ws, "../outside.jsonl", GOOD_PREDICTIONS)
    assert not outside.ok and outside.error_type == "PathRefused", outside
    planted = live.run_bash(
        backend,
        ws,
        "ln -s /etc/passwd passwd.jsonl && ln -s data/prompts.jsonl prompts.jsonl && "
        "mkdir out && ln -s /etc out/etc && ln -s .. up && "
        "echo outside > /tmp/outside.jsonl && echo outside > ../outside.jsonl; "
        "ls -la; exit 0",
        None,
    )
    assert planted.exit_code == 0, planted
    candidate, changed, notes = live.artifact_candidate(ws)
    # The links changed the workspace (its surfaces see them) but are not files of it.
    assert {"passwd.jsonl", "prompts.jsonl", "out/etc", "up"} <= set(changed), changed
    assert sorted(candidate.files) == [PREDICTIONS], sorted(candidate.files)
    assert any("symbolic links" in note for note in notes), notes
    for item in candidate.files.values():
        assert b"root:" not in item.content and b"outside" not in item.content


def test_no_file_is_written_after_the_wall_time_budget(backend, workspace):
    _, ws = workspace
    spent = live.write_file(backend, ws, PREDICTIONS, GOOD_PREDICTIONS, wall_cap=0)
    assert (spent.ok, spent.limit, spent.error_type) == (False, "budget", "BudgetExhausted")
    # A budget that ends while the workspace is copied in: the helper's clock, not the time
    # the host granted, decides, so neither the write nor the command happens.
    late = live.write_file(backend, ws, PREDICTIONS, GOOD_PREDICTIONS, wall_cap=0.001)
    assert (late.ok, late.limit, late.error_type) == (False, "budget", "BudgetExhausted"), late
    # 24 MiB to copy in before any command starts: longer than the budget's last 50 ms.
    assert live.run_bash(backend, ws, "head -c 25165824 /dev/zero > ballast", None).ok
    command = live.run_bash(backend, ws, f"echo late > {PREDICTIONS}; echo ran", 30, wall_cap=0.05)
    assert command.limit == "budget" and "ran" not in command.stdout, command
    candidate, changed, _ = live.artifact_candidate(ws)
    assert (sorted(candidate.files), changed) == (["ballast"], ["ballast"])
