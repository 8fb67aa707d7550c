"""Live workspaces through `make run`'s site (bubblewrap) and the real `cube-standard` client:
a terminal task solved by acting, a command longer than the answer window, a reset and a
close that stop a running command and take the workspace with them, a repository episode
that edits its tests (contract_violation), and a command that outlives the wall-time budget.

Every answer is validated with cube's own models (cube_driver). The escape suite and the
oracle runs on every pack are tests/episodes' other live-workspace files.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import EXAMPLES, reference_packs_or_skip
from tests.episodes.conftest import LiveSite
from tests.episodes.cube_driver import CheckedBenchmark, CheckedTask, remember, settled

WORKSPACES = "episode-workspaces"


def texts(answer: dict[str, Any]) -> str:
    """Every text an answer (an EnvironmentOutput or an Observation) shows the agent."""
    obs = answer.get("obs", answer)
    return "\n".join(c["data"] for c in obs["contents"] if isinstance(c["data"], str))


def spawn(live: LiveSite, pack: str, task_id: str | None = None) -> tuple[int, CheckedTask]:
    """A run opened through the API by the site's admin (who so owns it and reads its
    trajectories), and an episode of the task."""
    body = {"pack": pack, "version": 1, "mode": "episodes", "agent_name": "workspace tests"}
    answer = live.api.post("/runs/", json=body)
    assert answer.status_code == 201, answer.text
    opened = answer.json()
    bench = CheckedBenchmark(remember(opened["benchmark_url"]))
    configs = bench.task_configs(task_id=task_id) if task_id else bench.task_configs()
    return opened["id"], bench.spawn(configs[0])


def episode_rows(live: LiveSite, run_id: int) -> list[dict[str, Any]]:
    return live.shell(
        "import json; from episodes.models import Episode; print(json.dumps(list("
        f"Episode.objects.filter(episode_run__run_id={int(run_id)}).order_by('id').values("
        "'status', 'ending', 'end_note', 'verdict_status', 'verdict_reason', "
        "'workspace_folder'))))"
    )


def step_rows(live: LiveSite, run_id: int) -> list[dict[str, Any]]:
    return live.shell(
        "import json; from episodes.models import Step; print(json.dumps(list("
        f"Step.objects.filter(run_id={int(run_id)}).order_by('episode_id', 'index').values("
        "'index', 'method', 'action', 'state', 'error_type', 'files_written', 'observation')"
        ")))"
    )


def folder_exists(live: LiveSite, name: str) -> bool:
    assert name, "the episode never named its workspace folder"
    return (live.site.data_dir / WORKSPACES / name).exists()


def eventually(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def processes_naming(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker`` (a sandboxed command's own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def copy_pack(source: Path, folder: Path, pack_id: str, **manifest: Any) -> Path:
    """A copy of an example pack under a new id, with manifest keys replaced."""
    target = folder / pack_id
    shutil.copytree(source, target)
    data = yaml.safe_load((target / "manifest.yaml").read_text())
    data.update(id=pack_id, **manifest)
    (target / "manifest.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rows = [json.loads(line) for line in (target / "tasks.jsonl").read_text().splitlines()]
    for row in rows:
        row["id"] = pack_id + "/" + row["id"].split("/", 1)[1]
    (target / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return target


# --- solved by acting ------------------------------------------------------------------------


def test_a_scripted_agent_solves_terminal_task_smoke_with_bash_and_write_file(live: LiveSite):
    folder = reference_packs_or_skip() / "terminal-task-smoke"
    if "terminal-task-smoke" not in live.imported:
        live.import_pack(folder)
        live.imported.add("terminal-task-smoke")
    run_id, task = spawn(live, "terminal-task-smoke")
    first = task.reset()
    shown = texts(first)
    assert "Create a file named output.txt" in shown
    assert "files persist between steps, processes do not" in shown
    assert "you may change: any path" in shown
    where = task.step("bash", {"command": "pwd && ls -A && echo to-stderr >&2"})
    assert where["error"] is None and not where["done"]
    assert "/workspace\n" in texts(where) and "to-stderr" in texts(where)
    assert "[exit code 0]" in texts(where)
    draft = task.step("write_file", {"path": "notes/draft.txt", "content": "first try\n"})
    assert draft["error"] is None, draft
    made = task.step(
        "bash",
        {
            "command": "printf 'securebench terminal task\\n' > output.txt && rm -r notes",
            "timeout": 30,
        },
    )
    assert made["error"] is None and "[exit code 0]" in texts(made), made
    final = task.step("final_step")
    assert final["done"] is True and final["truncated"] is False
    verdict = settled(task, final)
    assert (verdict["reward"], verdict["info"]["status"]) == (1.0, "passed"), verdict
    task.close()
    (episode,) = episode_rows(live, run_id)
    assert (episode["status"], episode["verdict_status"]) == ("done", "passed")
    eventually(lambda: not folder_exists(live, episode["workspace_folder"]), "the folder to go")
    # The trajectory a person reads: each command, its output, the files written.
    steps = step_rows(live, run_id)
    assert [s["action"] or s["method"] for s in steps] == [
        "cube/reset", "bash", "write_file", "bash", "final_step",
    ]  # fmt: skip
    assert steps[2]["files_written"] == ["notes/draft.txt"]
    assert "output.txt" in steps[3]["files_written"]
    result_id = live.shell(
        "from runs.models import TaskResult; print(TaskResult.objects.get("
        f"evaluation__run_id={int(run_id)}, evaluation__number=1).pk)"
    )
    page = live.site.admin_session().get(
        f"{live.url}/runs/{run_id}/results/{result_id}/trajectory/", timeout=30
    )
    assert page.status_code == 200, page.status_code
    assert "printf" in page.text and "to-stderr" in page.text
    assert "files written" in page.text and "notes/draft.txt" in page.text


# --- longer than the answer window -----------------------------------------------------------


def test_a_long_command_answers_its_output_so_far_and_wait_returns_the_rest(live: LiveSite):
    run_id, task = spawn(live, "terminal-files", "terminal-files/version-file")
    task.reset()
    slow = task.step("bash", {"command": "echo started; sleep 11; echo finished", "timeout": 30})
    assert slow["info"]["running"] is True and not slow["done"], slow
    assert "started" in texts(slow) and "finished" not in texts(slow)
    rest = task.step("wait")
    assert rest["error"] is None and "running" not in rest["info"], rest
    assert "finished" in texts(rest) and "[exit code 0]" in texts(rest)
    nothing = task.step("wait")
    assert "Nothing is running" in texts(nothing)
    # The next step waits for a command still running, then shows its rest before its own.
    task.step("bash", {"command": "sleep 9.5; echo first-done", "timeout": 30})
    after = task.step("bash", {"command": "echo second-done"})
    assert after["error"] is None, after
    assert texts(after).index("first-done") < texts(after).index("second-done")
    # Processes do not outlive their step: a background job is gone in the next one.
    started = task.step("bash", {"command": "sleep 300 & echo $!"})
    pid = texts(started).split()[0]
    gone = task.step("bash", {"command": f"kill -0 {pid} && echo alive || echo gone"})
    assert "gone" in texts(gone), texts(gone)
    # final_step does not wait for a command still running: ending the episode stops it.
    marker = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**3:03}"
    assert task.step("bash", {"command": f"sleep {marker}", "timeout": 60})["info"]["running"]
    final = task.step("final_step")
    assert final["done"] is True and "is stopped: the episode ends" in texts(final), final
    eventually(lambda: not processes_naming(marker), "final_step to stop the command")
    settled(task, final)
    task.close()


# --- reset and close stop what runs ------------------------------------------------------------


def test_reset_and_close_stop_a_running_command_and_the_workspace_ends_with_the_episode(
    live: LiveSite,
):
    run_id, task = spawn(live, "terminal-files", "terminal-files/version-file")
    task.reset()
    task.step("write_file", {"path": "build/VERSION", "content": "0.0.1\n"})
    marker = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**3:03}"
    running = task.step("bash", {"command": f"sleep {marker}", "timeout": 600})
    assert running["info"]["running"] is True
    assert processes_naming(marker), "the command should be running"
    again = task.reset()
    assert "build/VERSION" not in texts(again), "a reset restarts the workspace from its seed"
    eventually(lambda: not processes_naming(marker), "the reset to stop the command")
    stopped = [s for s in step_rows(live, run_id) if s["action"] == "bash"]
    assert stopped[0]["error_type"] == "Stopped", stopped
    # A command running when the episode is closed is stopped, and the workspace removed.
    task.step("bash", {"command": f"sleep {marker}", "timeout": 600})
    task.close()
    (episode,) = episode_rows(live, run_id)
    eventually(lambda: not processes_naming(marker), "the close to stop the command")
    eventually(lambda: not folder_exists(live, episode["workspace_folder"]), "the folder to go")
    eventually(
        lambda: episode_rows(live, run_id)[0]["status"] == "abandoned", "the episode's verdict"
    )
    assert episode_rows(live, run_id)[0]["verdict_status"] == "failed"


# --- the contract's surfaces -----------------------------------------------------------------


def test_a_repository_episode_that_edits_its_tests_fails_with_the_path_named(
    live: LiveSite, tmp_path: Path
):
    contract = {"allowed_to_modify": ["src/"], "read_only": ["tests/"]}
    pack = copy_pack(EXAMPLES / "tiny-repo-patch", tmp_path, "calc-surfaces", contract=contract)
    live.import_pack(pack)
    run_id, task = spawn(live, "calc-surfaces", "calc-surfaces/median-even-count")
    first = task.reset()
    assert "you may change: src/" in texts(first) and "read-only: tests/" in texts(first)
    assert "repo/src/calc/stats.py" in texts(first)
    edited = task.step(
        "bash",
        {
            "command": "cd repo && sed -i 's/return items\\[middle\\]$/return (items[middle - 1]"
            " + items[middle]) \\/ 2 if len(items) % 2 == 0 else items[middle]/' "
            "src/calc/stats.py && echo 'def test_nothing(): pass' >> tests/test_stats.py"
        },
    )
    assert edited["error"] is None and "[exit code 0]" in texts(edited), edited
    final = task.step("final_step")
    verdict = settled(task, final)
    assert verdict["info"]["status"] == "failed", verdict
    assert verdict["info"]["reason"] == "contract_violation", verdict
    assert "tests/test_stats.py" in verdict["info"]["note"]
    assert "src/calc/stats.py" not in verdict["info"]["note"]
    row = live.results(run_id)["calc-surfaces/median-even-count"]
    assert (row["status"], row["failure_reason"]) == ("failed", "contract_violation")


def test_a_terminal_episode_that_leaves_out_a_required_output_fails_naming_it(
    live: LiveSite, tmp_path: Path
):
    contract = {"required_outputs": ["build/VERSION", "build/NOTES.md"]}
    pack = copy_pack(EXAMPLES / "terminal-files", tmp_path, "files-outputs", contract=contract)
    live.import_pack(pack)
    run_id, task = spawn(live, "files-outputs", "files-outputs/version-file")
    first = task.reset()
    assert "must exist when you finish: build/VERSION, build/NOTES.md" in texts(first)
    # What the checker wants, but not the second output the contract requires.
    task.step("bash", {"command": "mkdir -p build && printf '1.4.2\\n' > build/VERSION"})
    verdict = settled(task, task.step("final_step"))
    assert verdict["info"]["status"] == "failed", verdict
    assert verdict["info"]["reason"] == "contract_violation", verdict
    assert "build/NOTES.md" in verdict["info"]["note"]
    row = live.results(run_id)["files-outputs/version-file"]
    assert (row["status"], row["failure_reason"]) == ("failed", "contract_violation")


# --- the wall-time budget --------------------------------------------------------------------


def test_a_command_running_past_the_wall_time_budget_ends_the_episode_truncated(
    live: LiveSite, tmp_path: Path
):
    budgets = {"contract": {"budgets": {"wall_time_seconds": 12}}}
    pack = copy_pack(EXAMPLES / "terminal-files", tmp_path, "files-12s", **budgets)
    live.import_pack(pack)
    run_id, task = spawn(live, "files-12s", "files-12s/version-file")
    task.reset()
    task.step("bash", {"command": "mkdir -p build && printf '1.4.2\\n' > build/VERSION"})
    slow = task.step("bash", {"command": "sleep 40", "timeout": 60})
    assert slow["info"]["running"] is True, slow
    ended = task.step("wait")
    assert ended["done"] is True and ended["truncated"] is True, ended
    assert "wall-time budget ran out" in texts(ended)
    verdict = settled(task, ended)
    # Scored as it stands: the file written before the budget ran out passes the checker.
    assert verdict["info"]["status"] == "passed", verdict
    (episode,) = episode_rows(live, run_id)
    assert (episode["status"], episode["ending"]) == ("truncated", "truncated")
    assert "wall-time budget" in episode["end_note"]
