"""Live workspaces (issue 12) in real sandboxes, on bwrap and Docker.

Every action is a fresh sandbox over the episode's tar snapshot: these tests act as an agent
would (bash, read_file, write_file, list_files) and check what the next action sees, what the
observation says, and that the snapshot stays as it was when a step crosses a limit.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.verifiers.test_repo_patch import open_backend
from verifiers.live import (
    LiveWorkspace,
    WorkspaceLimits,
    changed_paths,
    destroy,
    list_files,
    plan_live_workspace,
    read_file,
    run_bash,
    seed,
    workspace_candidate,
    write_file,
)
from verifiers.sandbox import MiB, Sandbox
from verifiers.task import TaskFile, TaskLanes

pytestmark = pytest.mark.database_independent

EVAL_MARKER = "EVAL-MARKER-5f1c0de"
HIDDEN_MARKER = "HIDDEN-MARKER-9ab77e"
INPUT_CSV = "a,b\n1,2\n"
TABLE_CSV = "x\n7\n"
NOTES = "remember\n"
# Low limits, so that every hostile step crosses one quickly.
SMALL = WorkspaceLimits(
    workspace_bytes=8 * MiB, workspace_files=500, memory_bytes=256 * MiB, pids=64
)


@pytest.fixture(params=["bwrap", "docker"])
def sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return open_backend(request.param, monkeypatch)


@pytest.fixture
def folder() -> Iterator[Path]:
    """The episode's folder, below one the sandbox uid may traverse (read-only copies)."""
    root = Path(tempfile.mkdtemp(prefix="sb-live-test-"))
    root.chmod(0o711)
    try:
        yield root / "episode"
    finally:
        destroy(root / "episode")
        shutil.rmtree(root, ignore_errors=True)


def terminal_task(tmp_path: Path) -> TaskLanes:
    """Read-only assets (a folder, and a single file mounted inside a writable folder), a
    writable one, and evaluation/hidden lanes holding markers that must never be seen."""
    files = {
        "data/input.csv": INPUT_CSV,
        "ref/table.csv": TABLE_CSV,
        "work/notes.txt": NOTES,
        "checks/test_out.py": f"# {EVAL_MARKER}\ndef test_x():\n    pass\n",
    }
    sources: dict[str, TaskFile] = {}
    for path, content in files.items():
        source = tmp_path / "pack" / path
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(content)
        sources[path] = TaskFile(path, source)
    return TaskLanes(
        task_id="t/live",
        family="terminal_task",
        public={
            "instructions": "write the sum of a and b to work/out.txt",
            "assets": [
                {"path": "data"},  # the manifest default: read-only
                {"path": "ref/table.csv", "mount": "inputs/table.csv", "read_only": True},
                {"path": "work", "read_only": False},
            ],
        },
        evaluation_inputs={
            "checker": {"source": "pytest", "path": "checks"},
            "run_tests": {"note": EVAL_MARKER},
        },
        hidden={"expected_state": {"path": "work/out.txt", "content": HIDDEN_MARKER}},
        environment={"image": "python:3.12-slim"},
        metadata={"asset_defaults": {"read_only": True}},
        files={
            "assets": (
                sources["data/input.csv"],
                sources["ref/table.csv"],
                sources["work/notes.txt"],
            ),
            "checker": (sources["checks/test_out.py"],),
        },
    )


def live(
    sandbox: Sandbox, folder: Path, tmp_path: Path, limits: WorkspaceLimits = SMALL
) -> LiveWorkspace:
    task = terminal_task(tmp_path)
    ws = plan_live_workspace(task, sandbox.name, folder, limits)
    outcome = seed(sandbox, ws, task)
    assert outcome.ok, outcome
    return ws


def bash(sandbox: Sandbox, ws: LiveWorkspace, command: str, timeout: float = 30):
    return run_bash(sandbox, ws, command, timeout)


def snapshot_names(ws: LiveWorkspace) -> set[str]:
    with tarfile.open(ws.snapshot) as tar:
        return set(tar.getnames())


# --- layout ----------------------------------------------------------------------------------


def test_seed_lays_out_the_assets_and_read_only_ones_stay_read_only(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    task = terminal_task(tmp_path)
    ws = plan_live_workspace(task, sandbox.name, folder, SMALL)
    assert ws.workdir == "/workspace"
    assert ws.read_only_paths == ("data", "inputs/table.csv")
    first = seed(sandbox, ws, task)
    assert first.ok and first.backend == sandbox.name
    listing = first.text.splitlines()
    assert any(line.endswith("data/input.csv  (read-only)") for line in listing), first.text
    assert any(line.endswith("inputs/table.csv  (read-only)") for line in listing), first.text
    assert any(line.endswith(" work/notes.txt") for line in listing), first.text

    attack = bash(
        sandbox,
        ws,
        "echo hacked > data/input.csv; echo hacked > inputs/table.csv; rm -f data/input.csv;"
        " mv inputs/table.csv elsewhere.csv; echo beside > inputs/beside.txt;"
        " echo more >> work/notes.txt; cat data/input.csv inputs/table.csv",
    )
    assert "Read-only file system" in attack.stderr, attack.text
    assert attack.stdout == INPUT_CSV + TABLE_CSV, attack.text
    after = bash(
        sandbox, ws, "cat data/input.csv inputs/table.csv inputs/beside.txt work/notes.txt"
    )
    assert after.stdout == INPUT_CSV + TABLE_CSV + "beside\n" + NOTES + "more\n", after.text
    # The read-only assets are never part of the snapshot (the verifier restores them).
    candidate, _ = workspace_candidate(ws)
    assert set(candidate.files) == {"inputs/beside.txt", "work/notes.txt"}
    assert candidate.files["work/notes.txt"].content == (NOTES + "more\n").encode()
    assert changed_paths(ws) == ["inputs/beside.txt", "work/notes.txt"]


def test_nothing_of_the_evaluation_or_hidden_lanes_is_in_the_sandbox(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    search = bash(
        sandbox,
        ws,
        f"grep -rIl -e {EVAL_MARKER} -e {HIDDEN_MARKER} / --exclude-dir=proc --exclude-dir=sys"
        " --exclude-dir=dev --exclude-dir=usr 2>/dev/null; echo searched",
        timeout=120,
    )
    assert search.stdout == "searched\n", search.text


# --- persistence ---------------------------------------------------------------------------


def test_files_persist_between_steps_and_processes_do_not(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    first = bash(
        sandbox,
        ws,
        "echo kept > work/kept.txt; (sleep 1; echo late > work/late.txt) &"
        " sleep 1000 & nohup sh -c 'while sleep 1; do date >> work/daemon.log; done' &"
        " echo started",
    )
    assert first.ok and first.stdout == "started\n" and first.exit_code == 0, first.text
    assert first.changed and "work/kept.txt" in first.files_written
    second = bash(
        sandbox,
        ws,
        "sleep 2; cat work/kept.txt; ls work;"
        " for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c 'sleep 100[0]'",
    )
    lines = second.stdout.splitlines()
    assert lines[0] == "kept", second.text
    assert "late.txt" not in lines and "daemon.log" not in lines, second.text
    assert lines[-1] == "0", second.text  # only the grep's own line would match: it has none
    third = list_files(sandbox, ws, "work")
    assert "late.txt" not in third.text and "daemon.log" not in third.text, third.text


def test_a_command_killed_at_its_timeout_keeps_the_files_it_wrote(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    slow = run_bash(sandbox, ws, "echo partial > work/p.txt; echo begun; sleep 60", 1)
    assert slow.ok and slow.limit == "timeout" and slow.truncated, slow
    assert slow.exit_code is None and "begun" in slow.stdout
    assert "timeout" in slow.text
    assert read_file(sandbox, ws, "work/p.txt", None, None).text == "partial\n"


def test_the_episode_budget_ends_a_command_as_budget(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    capped = run_bash(sandbox, ws, "sleep 60", 30, wall_cap=1.0)
    assert capped.limit == "budget" and capped.truncated, capped
    assert "budget" in capped.text
    spent = run_bash(sandbox, ws, "echo never", 30, wall_cap=0)
    assert not spent.ok and spent.limit == "budget" and "never" not in spent.text


def test_output_reaches_the_callback_as_it_arrives(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    seen: list[tuple[str, str]] = []
    outcome = run_bash(
        sandbox,
        ws,
        "echo out; echo err >&2; printf 'SBF1R\\0\\0\\0\\2{}'",
        10,
        on_output=lambda stream, text: seen.append((stream, text)),
    )
    assert "".join(t for s, t in seen if s == "stdout") == outcome.stdout, seen
    assert "".join(t for s, t in seen if s == "stderr") == outcome.stderr == "err\n"
    # Frame-like bytes the command prints are only its output, never a frame of ours.
    assert outcome.ok and outcome.stdout.startswith("out\nSBF1R"), outcome


# --- paths the agent names -------------------------------------------------------------------


def test_paths_leaving_the_workspace_are_refused(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    made = bash(
        sandbox,
        ws,
        "ln -s /etc etc_link; ln -s /etc/passwd pw; ln -s .. up; ln -s work/notes.txt inner;"
        " ln -s /nowhere/x dangling",
    )
    assert made.changed, made
    for path in ("../etc/passwd", "/etc/passwd", "pw", "etc_link/passwd", "up/x", "work/../../x"):
        outcome = read_file(sandbox, ws, path, None, None)
        assert not outcome.ok and outcome.error_type == "PathRefused", (path, outcome)
        assert "root:" not in outcome.text
    for path in ("etc_link", "/", "..", "up"):
        outcome = list_files(sandbox, ws, path)
        assert not outcome.ok and outcome.error_type == "PathRefused", (path, outcome)
    for path in ("pw", "etc_link/x", "../x", "/tmp/x", "up/x", "dangling"):
        outcome = write_file(sandbox, ws, path, "owned\n")
        assert not outcome.ok and outcome.error_type == "PathRefused", (path, outcome)
    for path in ("data/input.csv", "data/new.csv", "inputs/table.csv"):
        outcome = write_file(sandbox, ws, path, "owned\n")
        assert not outcome.ok and outcome.error_type == "ReadOnlyPath", (path, outcome)
    # A link that stays inside the workspace is followed.
    assert read_file(sandbox, ws, "inner", None, None).text == NOTES
    assert read_file(sandbox, ws, "data/input.csv", None, None).text == INPUT_CSV


def test_read_write_and_list(sandbox: Sandbox, folder: Path, tmp_path: Path) -> None:
    ws = live(sandbox, folder, tmp_path)
    text = "".join(f"line {i}\n" for i in range(10))
    wrote = write_file(sandbox, ws, "deep/er/file.txt", text)
    assert wrote.ok and wrote.changed and wrote.files_written == ("deep/er/file.txt",), wrote
    assert read_file(sandbox, ws, "deep/er/file.txt", None, None).text == text
    assert read_file(sandbox, ws, "deep/er/file.txt", 2, 3).text == "line 2\nline 3\nline 4\n"
    assert read_file(sandbox, ws, "deep/er/file.txt", 9, None).text == "line 9\n"
    missing = read_file(sandbox, ws, "nope.txt", None, None)
    assert not missing.ok and missing.error_type == "NotFound"
    folder_read = read_file(sandbox, ws, "deep", None, None)
    assert not folder_read.ok and folder_read.error_type == "IsADirectory"
    bash(sandbox, ws, "printf 'a\\0b' > bin.dat; head -c 400000 /dev/zero | tr '\\0' x > big.txt")
    binary = read_file(sandbox, ws, "bin.dat", None, None)
    assert not binary.ok and binary.error_type == "BinaryFile"
    big = read_file(sandbox, ws, "big.txt", None, None)
    assert big.ok and big.limit == "output" and big.text.startswith("x" * SMALL.read_bytes)
    assert len(big.text) < SMALL.read_bytes + 200
    listing = list_files(sandbox, ws, "deep")
    assert listing.ok and listing.text.splitlines() == [
        f"dir  {'-':>10}  deep/er/",
        f"file {len(text):>10}  deep/er/file.txt",
    ]
    over_write = write_file(sandbox, ws, "deep", "x")
    assert not over_write.ok and over_write.error_type == "NotAFile"


# --- hostile steps: each bounded, named, and the workspace kept as it was ---------------------


def test_a_fork_bomb_is_stopped_and_named(sandbox: Sandbox, folder: Path, tmp_path: Path) -> None:
    ws = live(sandbox, folder, tmp_path)
    bomb = bash(sandbox, ws, "echo bomb > work/b.txt; b(){ b|b& }; b; sleep 30", timeout=20)
    assert bomb.limit == "processes" and bomb.truncated, bomb
    assert "processes" in bomb.text
    after = bash(sandbox, ws, "echo alive")
    assert after.ok and after.stdout == "alive\n"


def test_a_memory_hog_is_named(sandbox: Sandbox, folder: Path, tmp_path: Path) -> None:
    ws = live(sandbox, folder, tmp_path)
    hog = bash(sandbox, ws, "python3 -c 'x = b\"x\" * (600 << 20); print(len(x))'")
    assert hog.limit == "memory", hog
    assert "memory" in hog.text
    assert bash(sandbox, ws, "echo alive").stdout == "alive\n"


def test_a_disk_filler_leaves_the_workspace_as_it_was(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    before = ws.snapshot.read_bytes()
    fill = bash(sandbox, ws, "echo lost > work/lost.txt; cat /dev/zero > filler; echo done")
    assert not fill.ok and fill.error_type == "WorkspaceLimit", fill
    assert fill.limit == "workspace_bytes" and not fill.changed
    assert "NOT updated" in fill.text and "workspace_bytes" in fill.text
    assert ws.snapshot.read_bytes() == before
    assert read_file(sandbox, ws, "work/lost.txt", None, None).error_type == "NotFound"


def test_an_output_flood_is_cut_and_named(sandbox: Sandbox, folder: Path, tmp_path: Path) -> None:
    ws = live(sandbox, folder, tmp_path)
    flood = bash(sandbox, ws, "yes flood", timeout=30)
    assert flood.limit == "output" and flood.truncated, flood
    assert "bytes of output" in flood.text and "omitted" in flood.text
    assert len(flood.text) < 2 * SMALL.output_bytes
    chatty = bash(sandbox, ws, "seq 1 100000")
    assert chatty.ok and chatty.exit_code == 0 and chatty.limit == "output", chatty
    assert chatty.stdout.startswith("1\n2\n") and chatty.stdout.endswith("99999\n100000\n")


def test_fifos_and_setuid_bits_do_not_survive(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    made = bash(
        sandbox,
        ws,
        "mkfifo work/pipe; cp /bin/sh work/suid; chmod 6755 work/suid; chmod +t work; echo ok",
    )
    assert made.ok and made.changed, made
    notes = " ".join(made.notes)
    assert "FIFO" in notes and "work/pipe" in notes, made.notes
    assert "setuid" in notes and "work/suid" in notes, made.notes
    with tarfile.open(ws.snapshot) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert "work/pipe" not in members
    assert all(not m.mode & 0o7000 for m in members.values())
    assert stat.S_IMODE(members["work/suid"].mode) == 0o755
    after = bash(sandbox, ws, "stat -c '%a %n' work work/suid; ls work")
    assert after.stdout.splitlines()[:2] == ["755 work", "755 work/suid"], after.text
    assert "pipe" not in after.stdout


def test_ten_thousand_files_over_the_files_limit_are_not_kept(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    before = snapshot_names(ws)
    many = bash(
        sandbox,
        ws,
        "mkdir many && cd many && python3 -c \"[open(f'f{i}', 'w').close() for i in range(10000)]\""
        " && ls | wc -l",
        timeout=120,
    )
    assert not many.ok and many.limit == "workspace_files", many
    assert many.stdout.strip() == "10000" and "NOT updated" in many.text
    assert snapshot_names(ws) == before


def test_killing_the_helper_only_spoils_its_own_step(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    before = ws.snapshot.read_bytes()
    spoiled = bash(sandbox, ws, "echo x > work/x.txt; kill -9 $PPID; sleep 5")
    assert not spoiled.ok and not spoiled.changed, spoiled
    assert ws.snapshot.read_bytes() == before
    assert bash(sandbox, ws, "ls work").stdout == "notes.txt\n"


def test_the_command_cannot_reach_into_the_helper(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    """The helper (the command's parent) holds the nonce in its memory and the channel on
    its fd 1: non-dumpable, none of its /proc entries open to the command's uid."""
    ws = live(sandbox, folder, tmp_path)
    probe = bash(
        sandbox,
        ws,
        "for f in mem environ maps fd/1 fd/0; do head -c1 /proc/$PPID/$f >/dev/null 2>&1"
        " && echo open $f; done; ls /proc/$PPID/fd >/dev/null 2>&1 && echo listed fd;"
        " echo $PPID > helper.pid; echo checked",
    )
    assert probe.stdout == "checked\n", probe.text


FORGE = r"""
import glob, io, os, tarfile
data = io.BytesIO()
with tarfile.open(fileobj=data, mode="w") as tar:
    info = tarfile.TarInfo("forged.txt"); info.size = 6
    tar.addfile(info, io.BytesIO(b"forged"))
tree = data.getvalue()
frames = b"SBF1T" + len(tree).to_bytes(4, "big") + tree
frames += b'SBF1R' + (30).to_bytes(4, "big") + b'{"nonce": "0", "ok": true, "x":1}'[:30]
reached = 0
for path in glob.glob("/proc/[0-9]*/fd/[0-9]*"):
    try:
        with open(path, "wb", buffering=0) as fd:
            fd.write(frames)
            reached += 1
    except OSError:
        pass
print("reached", reached)
"""


def test_frames_forged_by_the_command_never_plant_files(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    """On Docker the exec's shell holds the helper's channel and is reachable through /proc:
    forged frames may spoil the step, never reach the workspace."""
    ws = live(sandbox, folder, tmp_path)
    write_file(sandbox, ws, "forge.py", FORGE)
    forged = bash(sandbox, ws, "echo real > real.txt; python3 forge.py")
    assert "forged.txt" not in snapshot_names(ws), forged
    listing = list_files(sandbox, ws, None)
    assert "forged.txt" not in listing.text
    # Either nothing was reached, or the step was discarded as tampered with. On bwrap no
    # holder's fds open to the command (the pipes are the host's, mode 0600): the step is an
    # ordinary one. Code written into bwrap's pid 1 is tests/security/test_live_channel.py's.
    assert forged.ok == ("real.txt" in listing.text), (forged, listing.text)
    if sandbox.name == "bwrap":
        assert forged.ok and "real.txt" in listing.text, forged


def test_a_cancelled_command_is_killed_and_changes_nothing(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    ws = live(sandbox, folder, tmp_path)
    before = ws.snapshot.read_bytes()
    cancel = threading.Event()
    seen = threading.Event()

    def on_output(stream: str, text: str) -> None:
        if "ready" in text:
            cancel.set()  # the worker's "episode closed" while the command runs
            seen.set()

    outcome = run_bash(
        sandbox, ws, "echo x > work/x.txt; echo ready; sleep 60", 90, on_output=on_output,
        cancel=cancel,
    )  # fmt: skip
    assert seen.is_set() and not outcome.ok and not outcome.changed, outcome
    assert ws.snapshot.read_bytes() == before


def test_the_workspace_limits_are_the_callers(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    roomy = replace(SMALL, workspace_bytes=64 * MiB)
    ws = live(sandbox, folder, tmp_path, roomy)
    big = bash(sandbox, ws, "head -c 20000000 /dev/zero > work/big.bin; echo done")
    assert big.ok and big.changed, big
    assert workspace_candidate(ws)[0].files["work/big.bin"].content == bytes(20_000_000)
