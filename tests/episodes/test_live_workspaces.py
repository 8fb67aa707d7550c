"""Live workspaces (issue 12) on a live site (`make run`: the real web server and Celery
worker, bwrap), driven by the real `cube-standard` client, every answer validated with cube's
own models (cube_driver).

A scripted agent solves terminal-task-smoke with bash and write_file steps; oracle agents
(privileged info → the expected files written, or the gold patch applied with `git apply`)
pass every terminal and repository task of the reference packs, of our examples and of a
repository pack built here (tests/episodes/repo_pack.py); null agents fail them; an agent
that edits the read-only tests fails naming the path. Then a few escapes through the whole
path (web → actions queue → worker → sandbox): no network, no sealed marker anywhere, no
process across steps, links refused; and no sandbox process left after an episode is
closed, its run expires, or its worker is killed mid-step. The same probes run on both
backends against ``verifiers.live`` in tests/security/test_episode_workspace_escapes.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, REPO_ROOT, reference_packs_or_skip
from tests.episodes.conftest import LiveSite, OpenedRun
from tests.episodes.cube_driver import (
    Acted,
    CheckedBenchmark,
    CheckedTask,
    act,
    assert_no_secret,
    bash,
    drive_run,
    finish,
    named_text,
    null_agent,
    remember,
    still_running,
    text_of,
    verdicts,
    workspace_oracle_agent,
    workspace_reset,
)
from tests.episodes.repo_pack import (
    FIXED_SOURCE,
    INIT_PATH,
    SOURCE_PATH,
    TEST_PATH,
    WEAKENED_TEST,
    BuiltPack,
    RepoPack,
    build_repo_pack,
    build_terminal_pack,
)
from tests.episodes.test_workspace_lifecycle import step_rows
from tests.security.sandbox_probes import processes_with_token, wait_for
from tests.security.test_episode_workspace_escapes import (
    NETWORK_PROBE,
    host_listener,
    json_line,
    search_command,
    unjoined,
)

WORKSPACE_TOOLS = ["bash", "read_file", "write_file", "list_files", "wait", "final_step"]
SMOKE = "terminal-task-smoke"
SMOKE_CONTENT = "securebench terminal task\n"


@dataclass(frozen=True)
class BuiltPacks:
    repo: RepoPack
    terminal: BuiltPack
    built_at: float


@pytest.fixture(scope="module")
def built(live: LiveSite, tmp_path_factory: pytest.TempPathFactory) -> BuiltPacks:
    """The repository pack and the marked terminal pack, imported into the live site."""
    built_at = time.time() - 2
    folder = tmp_path_factory.mktemp("workspace-packs")
    repo = build_repo_pack(folder, "wordcount-repo")
    terminal = build_terminal_pack(folder, "marked-terminal")
    for pack in (repo, terminal):
        live.import_pack(pack.root)
    return BuiltPacks(repo=repo, terminal=terminal, built_at=built_at)


def pack_id(live: LiveSite, built: BuiltPacks, name: str) -> str:
    """A pack of the workspace families on the live site: reference packs imported on first
    use, our examples by `make run`, the generated ones by the ``built`` fixture."""
    where, _, pack = name.partition("/")
    if where == "reference":
        folder = reference_packs_or_skip() / pack
        if pack not in live.imported:
            live.import_pack(folder)
            live.imported.add(pack)
    elif where == "examples":
        assert (EXAMPLES / pack / "manifest.yaml").is_file()
    else:
        assert pack in (built.repo.pack_id, built.terminal.pack_id), pack
    return pack


def one_task(live: LiveSite, pack: str, **opened: Any) -> tuple[OpenedRun, CheckedTask]:
    run = live.open_run(pack, **opened)
    bench = CheckedBenchmark(remember(run.url))
    configs = bench.task_configs()
    return run, bench.spawn(configs[0])


def result_details(live: LiveSite, run_id: int) -> list[dict[str, Any]]:
    """Every result of the run's first evaluation, with its stored details and logs."""
    return live.shell(
        "import json; from runs.models import TaskResult; print(json.dumps(list("
        f"TaskResult.objects.filter(evaluation__run_id={int(run_id)}, evaluation__number=1)"
        ".values('task__task_id', 'status', 'failure_reason', 'details', 'stderr'))))"
    )


# --- a scripted agent ---------------------------------------------------------------------------


def test_a_scripted_agent_solves_terminal_task_smoke_with_bash_and_write_file(
    live: LiveSite, built: BuiltPacks
) -> None:
    opened, task = one_task(live, pack_id(live, built, f"reference/{SMOKE}"), agent="shell")
    assert [tool["name"] for tool in task.tools_list()] == WORKSPACE_TOOLS
    described = {tool["name"]: tool["description"] for tool in task.tools_list()}
    assert "processes do not" in described["bash"], described["bash"]
    got = workspace_reset(task)
    first = got["reset"]["obs"]
    assert "Create a file named output.txt" in named_text(first, "objective")
    assert "processes do not" in named_text(first, "rules")
    assert "/workspace" in named_text(got["listing"], "workspace")
    # A first try that is wrong, seen wrong, then fixed with write_file.
    tried = bash(task, "printf 'securebench terminal\\n' > output.txt && cat output.txt")
    assert tried.error is None and "securebench terminal" in tried.text, tried.text
    assert "[exit code 0]" in tried.text
    read = act(task, "read_file", {"path": "output.txt"})
    assert read.error is None and "securebench terminal" in read.text
    written = act(task, "write_file", {"path": "output.txt", "content": SMOKE_CONTENT})
    assert written.error is None, written.last
    checked = bash(task, "cat output.txt; ls")
    assert SMOKE_CONTENT.strip() in checked.text, checked.text
    listed = act(task, "list_files")
    assert "output.txt" in listed.text
    record = finish(task, f"{SMOKE}/create-output-file", None)
    assert record.verdict["reward"] == 1.0, record
    assert record.verdict["info"]["status"] == "passed", record
    rows = live.results(opened.run_id)
    assert [(row["status"], row["failure_reason"]) for row in rows.values()] == [("passed", "")]
    (episode,) = live.episodes(opened.run_id)
    # reset, bash, read_file, write_file, bash, list_files, final_step
    assert (episode["status"], episode["step_count"]) == ("done", 7), episode


# --- oracle and null agents on every workspace task ---------------------------------------------

WORKSPACE_PACKS = [
    f"reference/{SMOKE}",
    "examples/terminal-files",
    "examples/tiny-repo-patch",
    "generated/wordcount-repo",
]


@pytest.mark.parametrize("name", WORKSPACE_PACKS)
def test_an_oracle_agent_passes_every_workspace_task(
    live: LiveSite, built: BuiltPacks, name: str
) -> None:
    opened = live.open_run(pack_id(live, built, name), oracle=True)
    records = drive_run(opened.url, workspace_oracle_agent)
    assert records
    failing = {
        task_id: (record.verdict["info"], record.final["info"])
        for task_id, record in records.items()
        if (record.verdict["reward"], record.verdict["info"]["status"]) != (1.0, "passed")
    }
    assert not failing, failing
    evaluation = live.evaluation(opened.run_id)
    assert evaluation["counts"]["passed"] == evaluation["total"] == len(records), evaluation


@pytest.mark.parametrize("name", WORKSPACE_PACKS)
def test_a_null_agent_fails_every_workspace_task(
    live: LiveSite, built: BuiltPacks, name: str
) -> None:
    opened = live.open_run(pack_id(live, built, name), agent="null agent")
    records = drive_run(opened.url, null_agent)
    assert {status for status, _ in verdicts(records.values()).values()} == {"failed"}, records
    assert {record.verdict["reward"] for record in records.values()} == {0.0}
    assert live.evaluation(opened.run_id)["score"] == 0.0


def test_a_repo_agent_that_edits_the_read_only_tests_fails_naming_the_path(
    live: LiveSite, built: BuiltPacks
) -> None:
    opened, task = one_task(live, built.repo.pack_id, agent="test editor")
    got = workspace_reset(task)
    surfaces = [c["data"] for c in got["reset"]["obs"]["contents"] if c.get("name") == "surfaces"]
    assert surfaces == [
        {
            "allowed_to_modify": ["wordcount/"],
            "read_only": ["tests/", INIT_PATH],
            "required_outputs": [],
        }
    ]
    assert f"read-only: tests/, {INIT_PATH}" in named_text(got["reset"]["obs"], "rules")
    # The real fix, plus a weakened test: the tests pass in the workspace…
    assert (
        act(task, "write_file", {"path": f"repo/{SOURCE_PATH}", "content": FIXED_SOURCE}).error
        is None
    )
    assert (
        act(task, "write_file", {"path": f"repo/{TEST_PATH}", "content": WEAKENED_TEST}).error
        is None
    )
    ran = bash(task, "cd repo && python -m pytest -q -p no:cacheprovider tests")
    assert "passed" in ran.text and "[exit code 0]" in ran.text, ran.text
    # …and the contract fails the attempt, naming the test file.
    record = finish(task, built.repo.task_ids[0], None)
    assert (record.verdict["reward"], record.verdict["info"]["status"]) == (0.0, "failed")
    assert record.verdict["info"].get("reason") in ("contract_violation", "policy_denied"), record
    (episode,) = live.episodes(opened.run_id)
    (result,) = result_details(live, opened.run_id)
    named = json.dumps([episode["end_note"], result["details"], result["stderr"]])
    assert TEST_PATH in named, (episode, result)
    assert result["failure_reason"] in ("contract_violation", "policy_denied"), result


def test_a_change_only_the_contract_forbids_fails_as_a_contract_violation(
    live: LiveSite, built: BuiltPacks
) -> None:
    """The patch policy allows all of wordcount/; the contract makes its __init__ read-only.
    The fix is right and the tests pass: the contract alone fails the attempt."""
    opened, task = one_task(live, built.repo.pack_id, agent="init toucher")
    workspace_reset(task)
    fixed = act(task, "write_file", {"path": f"repo/{SOURCE_PATH}", "content": FIXED_SOURCE})
    assert fixed.error is None, fixed.last
    touched = bash(
        task,
        f"echo '# touched' >> repo/{INIT_PATH} && cd repo && "
        "python -m pytest -q -p no:cacheprovider tests",
    )
    assert "passed" in touched.text and "[exit code 0]" in touched.text, touched.text
    record = finish(task, built.repo.task_ids[0], None)
    assert (record.verdict["info"]["status"], record.verdict["info"].get("reason")) == (
        "failed",
        "contract_violation",
    ), record
    (episode,) = live.episodes(opened.run_id)
    (result,) = result_details(live, opened.run_id)
    assert INIT_PATH in episode["end_note"], episode
    assert INIT_PATH in json.dumps(result["details"]), result
    assert SOURCE_PATH not in episode["end_note"], episode  # an allowed change is not named


# --- long commands --------------------------------------------------------------------------------


def test_a_command_longer_than_the_answer_window_is_collected_with_wait(
    live: LiveSite, built: BuiltPacks
) -> None:
    opened, task = one_task(live, pack_id(live, built, f"reference/{SMOKE}"))
    workspace_reset(task)
    # The stock client's 10 s timeout would raise here if the answer came late.
    first = task.step("bash", {"command": "echo early; sleep 12; echo late", "timeout": 60})
    assert still_running(first) and "early" in text_of(first["obs"]), first
    assert "late" not in text_of(first["obs"])
    rest = Acted([first])
    while still_running(rest.last):
        rest = Acted([*rest.outputs, task.step("wait")])
    assert "late" in text_of(rest.last["obs"]) and "[exit code 0]" in rest.text, rest.text
    task.close()


# --- escapes through the live site ---------------------------------------------------------------


def test_a_bash_step_through_the_site_has_no_network(live: LiveSite, built: BuiltPacks) -> None:
    _, task = one_task(live, built.terminal.pack_id)
    workspace_reset(task)
    with host_listener() as port:
        probe = bash(task, NETWORK_PROBE.replace("HOST_PORT", str(port)))
    reached = json_line(probe.text, "NETWORK")
    assert reached.pop("own listener") == "connected", reached
    assert reached.pop("host listener") != "connected", reached
    assert "connected" not in reached.values(), reached
    # The site itself is not reachable either.
    site = bash(task, NETWORK_PROBE.replace("HOST_PORT", str(live.site.port)))
    assert json_line(site.text, "NETWORK")["host listener"] != "connected", site.text
    task.close()


@pytest.mark.parametrize("kind", ["terminal", "repo"])
def test_no_sealed_value_or_file_is_anywhere_in_an_episodes_sandbox(
    live: LiveSite, built: BuiltPacks, kind: str
) -> None:
    pack = built.terminal if kind == "terminal" else built.repo
    _, task = one_task(live, pack.pack_id)
    workspace_reset(task)
    control = f"control-{uuid.uuid4().hex}"
    assert act(task, "write_file", {"path": "mine.txt", "content": control}).error is None
    markers = [control, pack.public_marker, *pack.sealed.values()]
    searched = bash(task, search_command(markers, "bwrap", built.built_at), timeout=300)
    assert "search-complete" in searched.text, searched.text[-3000:]
    found: dict[str, list[str]] = {marker: [] for marker in markers}
    for line in searched.text.splitlines():
        path, _, hit = line.rpartition(":")
        if hit in found:
            found[hit].append(path)
    assert any(path.endswith("/mine.txt") for path in found[control]), found
    assert found[pack.public_marker], found
    leaked = {place: found[value] for place, value in pack.sealed.by_place.items() if found[value]}
    assert not leaked, leaked
    paths = [str(live.site.data_dir), str(EXAMPLES.parent)]
    exists = bash(task, "".join(f"test -e {p} && echo 'present {p}'\n" for p in paths) + "true")
    assert "present" not in exists.text, exists.text
    task.close()


def test_a_process_of_one_step_is_gone_in_the_next_through_the_site(
    live: LiveSite, built: BuiltPacks
) -> None:
    _, task = one_task(live, built.terminal.pack_id)
    workspace_reset(task)
    token = f"site-lingering-{uuid.uuid4().hex}"
    started = bash(
        task, f"setsid sh -c '(sleep 300; : {token}) &' </dev/null >/dev/null 2>&1; echo started"
    )
    assert "started" in started.text, started.text
    assert wait_for(lambda: not processes_with_token(token), 10), processes_with_token(token)
    later = bash(
        task,
        f"t={unjoined(token)}; n=0\n"
        "for f in /proc/[0-9]*/cmdline; do line=$(tr '\\0' ' ' < $f 2>/dev/null)\n"
        '  case "$line" in *"$t"*) n=$((n + 1));; esac; done; echo "lingering: $n"',
    )
    assert "lingering: 0" in later.text, later.text
    task.close()


def test_a_link_out_of_the_workspace_is_a_step_error_not_a_crash(
    live: LiveSite, built: BuiltPacks
) -> None:
    _, task = one_task(live, built.terminal.pack_id)
    workspace_reset(task)
    bash(task, "ln -s /etc/passwd leak && ln -s / root")
    for name, arguments in (
        ("read_file", {"path": "leak"}),
        ("read_file", {"path": "root/etc/passwd"}),
        ("read_file", {"path": "../../etc/passwd"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("write_file", {"path": "leak", "content": "x"}),
        ("list_files", {"path": "root"}),
    ):
        acted = act(task, name, arguments)
        error = acted.error
        assert error is not None and error["_type"] == "cube.core.StepError", (name, acted.last)
        assert error["error_type"], error
        assert acted.last["done"] is False and "root:x:0" not in acted.text, acted.last
    assert act(task, "bash", {"command": "echo still-working"}).error is None
    task.close()


def test_a_nul_in_the_output_and_a_file_name_that_is_not_utf8_are_shown_escaped(
    live: LiveSite, built: BuiltPacks
) -> None:
    # Neither can be stored as they are (PostgreSQL refuses NUL in text and jsonb; no UTF-8
    # encoder takes the surrogate os.fsdecode makes of a 0xff byte): the step used to fail as
    # the site's error with its change kept (PostgreSQL), or break the trajectory (SQLite).
    opened, task = one_task(live, built.terminal.pack_id)
    workspace_reset(task)

    acted = bash(task, "touch $'evil-\\xff.txt' && printf 'before\\0after\\n'")
    task.close()

    assert acted.error is None and "[exit code 0]" in acted.text, acted.last
    assert "before\\x00after" in acted.text, acted.text
    steps = step_rows(live, opened.run_id)
    assert any("evil-\\udcff.txt" in name for s in steps for name in s["files_written"]), steps
    live.episodes(opened.run_id)
    result_id = live.shell(
        "from runs.models import TaskResult; print(TaskResult.objects.get("
        f"evaluation__run_id={int(opened.run_id)}, evaluation__number=1).pk)"
    )
    session = live.site.admin_session()  # another user's run: read in debug mode
    reason = {"reason": "reading a trajectory", "next": "/packs/"}
    assert session.post(f"{live.url}/debug-mode/", data=reason, allow_redirects=False).ok
    base = f"{live.url}/runs/{opened.run_id}/results/{result_id}"
    page = session.get(f"{base}/trajectory/", timeout=30)
    transcript = session.get(f"{base}/transcript.jsonl", timeout=30)
    assert (page.status_code, transcript.status_code) == (200, 200)
    assert "evil-\\udcff.txt" in page.text, page.text
    lines = [json.loads(line) for line in transcript.text.splitlines()]
    assert any("evil-\\udcff.txt" in line["files_written"] for line in lines), lines
    assert "before\\\\x00after" in transcript.text  # the escape, itself escaped in JSON


# --- no sandbox left behind --------------------------------------------------------------------


def started_command(task: CheckedTask, token: str) -> dict[str, Any]:
    """A bash step still running when its answer came (the sandbox carries the token)."""
    # sh stays (a single command would be exec'd by bash, dropping the token)
    output = task.step("bash", {"command": f"sh -c 'sleep 300; : {token}'", "timeout": 600})
    assert still_running(output), output
    assert wait_for(lambda: bool(processes_with_token(token)), 30), "the command never ran"
    return output


def workspace_folders(live: LiveSite) -> set[str]:
    """The episode folders that exist in the site's workspace folder."""
    root = Path(
        live.shell(
            "import json; from django.conf import settings; "
            "print(json.dumps(str(settings.SECUREBENCH_EPISODE_WORKSPACE_DIR)))"
        )
    )
    return {entry.name for entry in root.iterdir()} if root.is_dir() else set()


def episode_folder(live: LiveSite, run_id: int) -> str:
    (name,) = live.shell(
        "import json; from episodes.models import Episode; print(json.dumps(list("
        f"Episode.objects.filter(episode_run__run_id={int(run_id)})"
        ".values_list('workspace_folder', flat=True))))"
    )
    assert name
    return name


def test_closing_an_episode_mid_command_leaves_no_sandbox_or_workspace(
    live: LiveSite, built: BuiltPacks
) -> None:
    opened, task = one_task(live, built.terminal.pack_id)
    workspace_reset(task)
    token = f"closed-{uuid.uuid4().hex}"
    started_command(task, token)
    folder = episode_folder(live, opened.run_id)
    assert folder in workspace_folders(live)
    task.close()
    assert wait_for(lambda: not processes_with_token(token), 30), processes_with_token(token)
    (episode,) = live.episodes(opened.run_id)
    assert episode["status"] == "abandoned", episode
    assert wait_for(lambda: folder not in workspace_folders(live), 60), (
        folder,
        live.episodes(opened.run_id),
    )


def test_an_expired_run_mid_command_leaves_no_sandbox_or_workspace(
    live: LiveSite, built: BuiltPacks
) -> None:
    opened, task = one_task(live, built.terminal.pack_id)
    workspace_reset(task)
    token = f"expired-{uuid.uuid4().hex}"
    started_command(task, token)
    folder = episode_folder(live, opened.run_id)
    live.shell(
        "import json; from datetime import timedelta; from django.utils import timezone; "
        "from episodes.models import EpisodeRun; print(json.dumps(EpisodeRun.objects.filter("
        f"run_id={opened.run_id}).update(expires_at=timezone.now() - timedelta(minutes=1))))"
    )
    # The reaper (every 2 s here) closes the run: the running command is killed, the
    # workspace scored as it stands and destroyed.
    assert wait_for(lambda: not processes_with_token(token), 60), processes_with_token(token)
    live.evaluation(opened.run_id, wait=120)
    (episode,) = live.episodes(opened.run_id)
    assert (episode["status"], episode["end_note"]) == ("abandoned", "the run's URL expired")
    assert wait_for(lambda: folder not in workspace_folders(live), 60), (
        folder,
        live.episodes(opened.run_id),
    )


def actions_workers(live: LiveSite) -> list[int]:
    """The site's own actions worker (`make run` starts one, a pool of threads)."""
    return [
        pid
        for pid in live.site.process.worker_pids()
        if b"--queues=actions" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


@contextlib.contextmanager
def doomed_actions_worker(live: LiveSite) -> Iterator[subprocess.Popen[str]]:
    """A second actions worker, the only one taking actions while it lives (the site's own
    is frozen meanwhile, so the next step is surely this one's); killed by the test."""
    frozen = actions_workers(live)
    assert frozen, "`make run` started no actions worker"
    command = [
        str(Path(sys.executable).parent / "celery"),
        "-A",
        "securebench_site",
        "worker",
        "--queues=actions",
        "--pool=threads",
        "--concurrency=2",
        "--hostname=doomed@%h",
        "--loglevel=INFO",
    ]
    assert live.site.process is not None
    doomed = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=live.site.process.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(doomed.stdout or []), daemon=True).start()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        assert wait_for(lambda: any("ready" in line for line in lines), 60), "".join(lines)
        yield doomed
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait()
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def test_a_worker_killed_mid_step_leaves_no_sandbox_process(
    live: LiveSite, built: BuiltPacks
) -> None:
    opened, task = one_task(live, built.terminal.pack_id)
    workspace_reset(task)
    token = f"killed-{uuid.uuid4().hex}"
    with doomed_actions_worker(live) as doomed:
        started_command(task, token)
        (sandboxed, *_) = processes_with_token(token)
        assert doomed.pid in ancestors(sandboxed), "the doomed worker does not run the step"
        # The worker process alone is killed, as the OOM killer would.
        os.kill(doomed.pid, signal.SIGKILL)
        # bwrap dies with its parent: nothing of the sandbox outlives the worker.
        assert wait_for(lambda: not processes_with_token(token), 30), processes_with_token(token)
    # The site goes on with its own worker: the episode ends, a new episode's actions run.
    task.close()
    _, other = one_task(live, built.terminal.pack_id)
    workspace_reset(other)
    assert "still-here" in bash(other, "echo still-here").text
    other.close()


def ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        chain.append(pid)
    return chain


def test_no_url_secret_or_sealed_marker_reaches_the_sites_output(
    live: LiveSite, built: BuiltPacks
) -> None:
    output = live.output()
    assert_no_secret(output, "the site's output")
    for pack in (built.repo, built.terminal):
        leaked = [marker for marker in pack.sealed.values() if marker in output]
        assert not leaked, leaked
