"""An artifact_task served as a live workspace episode (issue 33) on a live site, driven by
the real `cube-standard` client (cube_driver): the workspace tools, a predictions.jsonl written
in the workspace and final_step → the run's result holds an artifact candidate of exactly that
file, scored by the family's verifier; a bad JSONL line fails the task naming the line; the
seed's public files, links and files outside the workspace are never part of the artifact.
The same layout and collection run on both backends in tests/security/test_live_artifacts.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.episodes.artifact_pack import (
    BAD_PREDICTIONS,
    GOOD_PREDICTIONS,
    PREDICTIONS,
    build_artifact_pack,
    pack_writer,
)
from tests.episodes.conftest import LiveSite
from tests.episodes.cube_driver import (
    CheckedBenchmark,
    CheckedTask,
    act,
    bash,
    finish,
    named_text,
    remember,
    workspace_reset,
)
from tests.episodes.test_live_workspaces import WORKSPACE_TOOLS, result_details


@pytest.fixture(scope="module")
def pack(live: LiveSite, tmp_path_factory: pytest.TempPathFactory) -> str:
    pack_id = "live-artifact"
    writer = pack_writer(tmp_path_factory.mktemp("artifact-pack"))
    live.import_pack(build_artifact_pack(writer, pack_id))
    return pack_id


def one_task(live: LiveSite, pack: str) -> tuple[int, CheckedTask]:
    run = live.open_run(pack)
    bench = CheckedBenchmark(remember(run.url))
    return run.run_id, bench.spawn(bench.task_configs()[0])


def stored_candidates(live: LiveSite, run_id: int) -> list[dict[str, Any]]:
    return live.shell(
        "import json; from runs.models import Candidate; print(json.dumps([{'kind': c.kind, "
        "'files': sorted(c.files), 'violations': [v['rule'] for v in c.contract_violations]} "
        "for c in Candidate.objects.filter("
        f"run_id={int(run_id)})]))"
    )


def test_predictions_written_in_the_workspace_are_the_artifact_and_pass(
    live: LiveSite, pack: str
) -> None:
    run_id, task = one_task(live, pack)
    tools = {tool["name"]: tool["description"] for tool in task.tools_list()}
    assert list(tools) == WORKSPACE_TOOLS
    assert "files you created or changed" in tools["final_step"], tools["final_step"]
    got = workspace_reset(task)
    objective = named_text(got["reset"]["obs"], "objective")
    assert "files you created or changed" in objective, objective
    listing = named_text(got["listing"], "workspace")
    assert "data/prompts.jsonl" in listing and "notes/readme.txt" in listing, listing
    assert act(task, "write_file", {"path": PREDICTIONS, "content": GOOD_PREDICTIONS}).error is None
    # Links in and out of the workspace, and files outside it: none is part of the artifact.
    planted = bash(
        task,
        "ln -s /etc/passwd passwd.jsonl && ln -s data/prompts.jsonl copy.jsonl && "
        "echo outside > /tmp/outside.jsonl; echo outside > ../outside.jsonl; true",
    )
    assert planted.error is None, planted.text
    record = finish(task, f"{pack}/predict", None)
    assert (record.verdict["info"]["status"], record.verdict["reward"]) == ("passed", 1.0), record
    stored = [{"kind": "artifact", "files": [PREDICTIONS], "violations": []}]
    assert stored_candidates(live, run_id) == stored
    (result,) = result_details(live, run_id)
    assert (result["status"], result["failure_reason"]) == ("passed", ""), result


def test_a_bad_jsonl_line_fails_the_task_naming_the_line(live: LiveSite, pack: str) -> None:
    run_id, task = one_task(live, pack)
    workspace_reset(task)
    assert act(task, "write_file", {"path": PREDICTIONS, "content": BAD_PREDICTIONS}).error is None
    record = finish(task, f"{pack}/predict", None)
    info = record.verdict["info"]
    assert (info["status"], info.get("reason")) == ("failed", "contract_violation"), record
    assert f"output_malformed: {PREDICTIONS} line 2: $.answer" in info["note"], info
    (result,) = result_details(live, run_id)
    (violation,) = result["details"]["contract_violations"]
    assert violation["rule"] == "output_malformed" and violation["paths"] == [PREDICTIONS]
    assert "line 2" in violation["message"], violation
    # The stored violation is what makes the run invalid once it is closed (runs.validity).
    stored = [{"kind": "artifact", "files": [PREDICTIONS], "violations": ["output_malformed"]}]
    assert stored_candidates(live, run_id) == stored
