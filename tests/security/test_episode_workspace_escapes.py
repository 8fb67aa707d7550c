"""Escapes tried from inside a live workspace episode (issue 12), on bubblewrap and on Docker.

Each test drives ``verifiers.live`` the way an episode's worker does — plan, seed, then one
fresh sandbox per action over the episode's snapshot — with the agent's moves as ``bash``,
``read_file``, ``write_file`` and ``list_files`` actions, on the real backends (the
``backend`` fixture: every test runs on each; after each test no process of the slot uids it
used and no container with its label may be left). The packs are built by
tests/episodes/repo_pack.py with a unique marker in every evaluation-input and hidden value
and file; searches for them cover the whole filesystem the sandbox sees.

Limits are proved by outcomes — what the observation says, what the next step finds, which
processes are left — never by how long anything took. The same probes run through a live
site in tests/episodes/test_live_workspaces.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from packs.compiler import compile_pack, compiled_task_lanes
from tests.components import REPO_ROOT
from tests.episodes.repo_pack import BuiltPack, RepoPack, build_repo_pack, build_terminal_pack
from tests.security.sandbox_backends import TEST_LABEL, settle_containers
from tests.security.sandbox_probes import processes_with_token, wait_for
from verifiers import live
from verifiers.sandbox import MiB, Sandbox
from verifiers.task import TaskLanes

# Small limits, so that each bound is reached in a moment; the file count stays at its
# default (8,192 on top of the seed's files), below the 10,000 files one test makes.
LIMITS = live.WorkspaceLimits(
    workspace_bytes=32 * MiB,
    memory_bytes=256 * MiB,
    pids=64,
    output_bytes=16 * 1024,
    command_seconds_default=30.0,
)
SEARCH_SECONDS = 300.0  # a generous bound for grep over the whole image on Docker
SYSTEM_CONTROL = "PRETTY_NAME="  # in /usr/lib/os-release of any Debian image


# --- packs and episodes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Packs:
    terminal: BuiltPack
    repo: RepoPack
    lanes: dict[str, TaskLanes]  # "terminal" / "repo" → the task's three lanes
    built_at: float  # epoch seconds just before the packs' files were written


@pytest.fixture(scope="module")
def packs() -> Iterator[Packs]:
    # Under /tmp and traversable: bwrap resolves the read-only asset mounts as a slot uid.
    folder = Path(tempfile.mkdtemp(prefix="sb-live-escapes-", dir="/tmp"))  # noqa: S108
    folder.chmod(0o755)
    try:
        built_at = time.time() - 2  # file times have coarse clocks on some filesystems
        terminal = build_terminal_pack(folder)
        repo = build_repo_pack(folder)
        for path in folder.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        lanes = {}
        for name, built in (("terminal", terminal), ("repo", repo)):
            compiled = compile_pack(built.root)
            lanes[name] = compiled_task_lanes(compiled.tasks[0], compiled.files)
        yield Packs(terminal, repo, lanes, built_at)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Episode:
    """One live workspace, acted on as an episode's worker acts on it."""

    def __init__(
        self, sandbox: Sandbox, task: TaskLanes, folder: Path, limits: live.WorkspaceLimits
    ) -> None:
        self.sandbox = sandbox
        self.task = task
        self.ws = live.plan_live_workspace(task, sandbox.name, folder, limits)
        seeded = live.seed(sandbox, self.ws, task)
        assert seeded.ok, seeded

    def bash(self, command: str, timeout: float | None = None) -> live.ActionOutcome:
        return live.run_bash(self.sandbox, self.ws, command, timeout)

    def ok(self, command: str, timeout: float | None = None) -> str:
        """The text of a bash step that must run to its end with exit code 0."""
        outcome = self.bash(command, timeout)
        assert outcome.ok and outcome.exit_code == 0 and outcome.limit is None, outcome
        return outcome.text

    def read(self, path: str) -> live.ActionOutcome:
        return live.read_file(self.sandbox, self.ws, path, None, None)

    def write(self, path: str, content: str) -> live.ActionOutcome:
        return live.write_file(self.sandbox, self.ws, path, content)

    def listing(self, path: str | None = None) -> live.ActionOutcome:
        return live.list_files(self.sandbox, self.ws, path)


OpenEpisode = Callable[..., Episode]


@pytest.fixture
def open_episode(backend: Sandbox, packs: Packs, host_dir: Path) -> Iterator[OpenEpisode]:
    """Opens episodes of the marked packs on the backend under test; destroys them after.
    Their folders are under /tmp and traversable (bwrap mounts a workspace's read-only assets
    from it as a slot uid), as the site's own workspace folder is."""
    opened: list[Episode] = []
    tmp_path = host_dir

    def open_(kind: str = "terminal", limits: live.WorkspaceLimits = LIMITS) -> Episode:
        folder = tmp_path / f"episode-{len(opened)}-{uuid.uuid4().hex[:8]}"
        episode = Episode(backend, packs.lanes[kind], folder, limits)
        opened.append(episode)
        return episode

    yield open_
    for episode in opened:
        live.destroy(episode.ws.folder)
        assert not episode.ws.folder.exists()


def unjoined(text: str) -> str:
    """``text`` as a bash word that the shell joins back, so that the command itself (which
    may be kept anywhere) never holds the text in one piece: ``"ab""cd"``."""
    middle = len(text) // 2
    return f'"{text[:middle]}""{text[middle:]}"'


def json_line(text: str, prefix: str) -> dict:
    """The JSON a probe printed on a line starting with ``prefix``."""
    found = re.search(rf"^{re.escape(prefix)} (\{{.*\}})$", text, re.MULTILINE)
    assert found, text[-3000:]
    return json.loads(found.group(1))


# --- searching the whole filesystem ------------------------------------------------------------


def search_command(markers: list[str], backend: str, since: float) -> str:
    """grep over every top-level folder but /proc, /sys and /dev (and the links to /usr);
    on bwrap /usr is the host's read-only system tree (6 GB): there, every file changed
    since the packs were built is searched instead, which is where anything of theirs would
    be. Prints ``path:marker`` per hit, then a line saying the search completed."""
    patterns = " ".join(f"-e {unjoined(marker)}" for marker in markers)
    skipped = "/proc|/sys|/dev|/usr" if backend == "bwrap" else "/proc|/sys|/dev"
    usr = (
        f"find /usr -type f -newermt @{int(since)} -print0 2>/dev/null"
        f" | xargs -0 -r grep -HFoa -D skip -s {patterns} --"
        if backend == "bwrap"
        else "true"
    )
    return (
        "roots=; for p in /* /.[!.]*; do case $p in " + skipped + ") ;; *) "
        '[ -e "$p" ] && [ ! -L "$p" ] && roots="$roots $p";; esac; done\n'
        f"{{ grep -rHFoa -D skip -s {patterns} -- $roots /dev/shm; {usr}; }} | sort -u\n"
        "echo search-complete\n"
    )


def search(episode: Episode, markers: list[str], since: float) -> dict[str, list[str]]:
    """Where each marker was found in the whole sandbox (the files that hold it)."""
    outcome = episode.bash(search_command(markers, episode.sandbox.name, since), SEARCH_SECONDS)
    assert outcome.limit is None and "search-complete" in outcome.text, outcome
    found: dict[str, list[str]] = {marker: [] for marker in markers}
    for line in outcome.text.splitlines():
        path, _, hit = line.rpartition(":")
        if hit in found and path.startswith("/"):
            found[hit].append(path)
    return found


# --- no network --------------------------------------------------------------------------------

NETWORK_PROBE = r"""
python3 - <<'EOF'
import json, socket
def attempt(host, port):
    try:
        with socket.create_connection((host, port), timeout=2):
            return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print("NETWORK " + json.dumps({
    "own listener": attempt("127.0.0.1", listener.getsockname()[1]),
    "host listener": attempt("127.0.0.1", HOST_PORT),
    "docker host": attempt("172.17.0.1", HOST_PORT),
    "outside": attempt("1.1.1.1", 443),
    "outside by name": attempt("example.org", 80),
}))
EOF
"""


@contextlib.contextmanager
def host_listener() -> Iterator[int]:
    """A TCP server on the host (loopback and every interface), accepting for the test."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))  # noqa: S104 - reachable from a container if anything is
    server.listen(8)
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                connection, _ = server.accept()
                connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def test_a_bash_step_has_no_network(open_episode: OpenEpisode) -> None:
    episode = open_episode()
    with host_listener() as port:
        # The control: the host really answers on this port.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        text = episode.ok(NETWORK_PROBE.replace("HOST_PORT", str(port)))
    reached = json_line(text, "NETWORK")
    # The step's own loopback works, so the refusals below are the sandbox's.
    assert reached.pop("own listener") == "connected", reached
    assert all(outcome != "connected" for outcome in reached.values()), reached


# --- nothing sealed anywhere in the sandbox ----------------------------------------------------


@pytest.mark.parametrize("kind", ["terminal", "repo"])
def test_no_evaluation_input_hidden_value_or_checker_is_anywhere_in_the_sandbox(
    open_episode: OpenEpisode, packs: Packs, kind: str
) -> None:
    built = packs.terminal if kind == "terminal" else packs.repo
    episode = open_episode(kind)
    control = f"control-{uuid.uuid4().hex}"
    assert episode.write("notes-of-mine.txt", f"{control}\n").ok
    sealed = built.sealed.by_place
    markers = [control, built.public_marker, *sealed.values()]
    docker = episode.sandbox.name == "docker"
    found = search(episode, [*markers, SYSTEM_CONTROL] if docker else markers, packs.built_at)
    if docker:  # the search reached the image's own system files
        assert any(path.startswith("/usr/") for path in found[SYSTEM_CONTROL]), found
    # The controls: the search finds what the agent wrote and what the task shows it.
    assert f"{episode.ws.workdir}/notes-of-mine.txt" in found[control], found
    public_file = "notes/readme.txt" if kind == "terminal" else "repo/README.md"
    assert f"{episode.ws.workdir}/{public_file}" in found[built.public_marker], found
    leaked = {place: found[value] for place, value in sealed.items() if found[value]}
    assert not leaked, leaked
    # Nor is any trusted checker or evaluator folder mounted.
    listed = episode.ok("ls -a /opt /opt/securebench 2>&1; echo listed")
    assert "evaluator" not in listed and "evaluation_inputs" not in listed, listed


# --- another episode ---------------------------------------------------------------------------


def test_another_episodes_workspace_is_unreachable(open_episode: OpenEpisode, packs: Packs) -> None:
    mine, theirs = open_episode(), open_episode()
    secret = f"theirs-{uuid.uuid4().hex}"
    assert theirs.write("theirs.txt", f"{secret}\n").ok
    found = search(mine, [secret], packs.built_at)
    assert found[secret] == [], found
    for folder in (theirs.ws.folder, mine.ws.folder, theirs.ws.folder.parent):
        probe = mine.bash(f"test -e {folder} && echo present || echo absent")
        assert "absent" in probe.text and "present" not in probe.text, probe
    assert mine.read("theirs.txt").ok is False
    # Their workspace is theirs still.
    assert secret in theirs.read("theirs.txt").text


# --- processes do not outlive their step -------------------------------------------------------


def test_a_process_started_in_one_step_is_gone_in_the_next(open_episode: OpenEpisode) -> None:
    episode = open_episode()
    token = f"lingering-{uuid.uuid4().hex}"
    control = f"control-{uuid.uuid4().hex}"
    started = episode.bash(
        # A ticking loop in the background, and a double-forked sleeper in a session of its
        # own; both carry the token on their command lines.
        f"nohup sh -c 'while :; do date +%s%N > tick.txt; sleep 0.05; done; : {token}' "
        ">/dev/null 2>&1 &\n"
        f"setsid sh -c '(sleep 300; : {token}) &' </dev/null >/dev/null 2>&1\n"
        "sleep 0.5; echo started"
    )
    assert started.ok and "started" in started.text, started
    # Nothing of the step runs on the host once it has answered.
    assert wait_for(lambda: not processes_with_token(token), 10), processes_with_token(token)
    later = episode.ok(
        "a=$(cat tick.txt); sleep 0.5; b=$(cat tick.txt)\n"
        '[ "$a" = "$b" ] && echo tick-still || echo tick-moving\n'
        # Every process's command line, read by the shell itself (a grep for the token
        # would find its own).
        # The control: a process of this step with another token is seen.
        f"t={unjoined(token)}; c={unjoined(control)}\n"
        'sh -c "sleep 5; : $c" & sleep 0.2\n'
        "count() { n=0; for f in /proc/[0-9]*/cmdline; do\n"
        "  line=$(tr '\\0' ' ' < $f 2>/dev/null)\n"
        '  case "$line" in *"$1"*) n=$((n + 1));; esac; done; echo $n; }\n'
        'echo "lingering: $(count "$t") control: $(count "$c")"'
    )
    assert "tick-still" in later and "lingering: 0 control: 1" in later, later


def test_a_read_only_asset_cannot_be_changed_by_any_action(
    open_episode: OpenEpisode, packs: Packs
) -> None:
    episode = open_episode()
    original = episode.read("notes/readme.txt")
    assert original.ok and packs.terminal.public_marker in original.text, original
    refused = episode.write("notes/readme.txt", "rewritten\n")
    assert not refused.ok and refused.error_type, refused
    tried = episode.bash(
        "echo rewritten > notes/readme.txt; echo write=$?; rm -f notes/readme.txt; echo rm=$?; "
        "touch notes/extra.txt; echo touch=$?"
    )
    assert all(f"{op}=0" not in tried.text for op in ("write", "rm", "touch")), tried
    after = episode.read("notes/readme.txt")
    assert after.ok and after.text == original.text, after
    assert "extra.txt" not in episode.listing("notes").text
    # The writable asset is the agent's to change.
    assert episode.write("scratch/todo.txt", "done\n").ok
    assert episode.read("scratch/todo.txt").text == "done\n"


# --- limits, each bounded with an observation that names it ------------------------------------


def test_a_fork_bomb_is_bounded_and_leaves_nothing(open_episode: OpenEpisode) -> None:
    episode = open_episode()
    token = f"bomb-{uuid.uuid4().hex}"
    outcome = episode.bash(f"# {token}\nbomb() {{ bomb | bomb & }}; bomb; sleep 20", 10)
    assert outcome.limit == "processes" and "processes]" in outcome.text, outcome
    assert wait_for(lambda: not processes_with_token(token), 10), processes_with_token(token)
    assert "alive" in episode.ok("echo alive")


def test_a_memory_hog_is_stopped_as_out_of_memory(open_episode: OpenEpisode) -> None:
    episode = open_episode()
    outcome = episode.bash("python3 -c 'hog = [b\"x\" * (32 << 20) for _ in iter(int, 1)]'", 30)
    assert outcome.limit == "memory", outcome
    assert "memory" in outcome.text, outcome
    assert "alive" in episode.ok("echo alive")


def test_filling_the_disk_is_bounded_and_the_workspace_stays_within_its_limit(
    open_episode: OpenEpisode,
) -> None:
    episode = open_episode()
    outcome = episode.bash(
        "head -c 1G /dev/zero > /tmp/fill; echo tmp-exit=$?\n"
        "head -c 64M /dev/zero > big.bin; echo work-exit=$?",
        60,
    )
    # The sandbox's own /tmp is capped: the write there failed.
    assert "tmp-exit=0" not in outcome.text, outcome
    # The step's tree crossed the episode's limit: discarded, and said so.
    assert outcome.limit == "workspace_bytes" and not outcome.changed, outcome
    assert not outcome.ok and outcome.error_type == "WorkspaceLimit", outcome
    assert "NOT updated" in outcome.text and "(workspace_bytes)" in outcome.text, outcome
    assert "big.bin" not in episode.ok("ls")


def test_an_output_flood_is_cut_and_said_so(open_episode: OpenEpisode) -> None:
    episode = open_episode()
    outcome = episode.bash("yes flood-line | head -c 50000000; echo; echo flood-done", 60)
    assert len(outcome.text) < 4 * LIMITS.output_bytes + 4096, len(outcome.text)
    assert outcome.limit == "output" and "[output truncated" in outcome.text, outcome
    assert "bytes of output]" in outcome.text and "flood-line" in outcome.text, outcome
    assert "alive" in episode.ok("echo alive")


def test_a_symlink_out_of_the_workspace_is_refused_not_followed(
    open_episode: OpenEpisode,
) -> None:
    episode = open_episode()
    episode.ok(
        "ln -s /etc/passwd leak && ln -s / root && ln -s ../../../../../etc up && "
        "mkdir d && ln -s /etc d/etc && echo linked"
    )
    for path in ("leak", "root/etc/passwd", "up/passwd", "d/etc/passwd", "../etc/passwd"):
        outcome = episode.read(path)
        assert not outcome.ok and outcome.error_type, (path, outcome)
        assert "root:" not in outcome.text, (path, outcome)
    assert not episode.read("/etc/passwd").ok
    for path in ("leak", "d/etc/hostname-of-mine", "root/tmp/x", "../x", "/tmp/x"):
        outcome = episode.write(path, "written through a link\n")
        assert not outcome.ok and outcome.error_type, (path, outcome)
    refused = episode.listing("root")
    assert not refused.ok and refused.error_type, refused
    # Still links, pointing where they did: nothing was written through them.
    assert "linked-still" in episode.ok("test -L leak && test -L d/etc && echo linked-still")
    # A terminal candidate holds regular files only: the links are dropped, with a note.
    candidate, notes = live.workspace_candidate(episode.ws)
    assert not {"leak", "root", "up", "d/etc"} & set(candidate.files), candidate.files
    assert notes, "the dropped links are not mentioned"


def test_a_fifo_is_bounded_everywhere(open_episode: OpenEpisode) -> None:
    episode = open_episode()
    # Read in the step that made it: the command's own timeout ends the wait.
    blocked = episode.bash("mkfifo pipe && echo made && cat pipe", 3)
    assert blocked.limit == "timeout" and "timeout" in blocked.text, blocked
    assert "made" in blocked.text, blocked
    # A FIFO is no part of a workspace: dropped from the step's tree, and said so.
    made = episode.bash("mkfifo pipe && echo made")
    assert made.ok and "made" in made.text, made
    assert any("FIFO" in note and "pipe" in note for note in made.notes), made
    after = episode.ok("ls -l; echo listed")
    assert "pipe" not in after, after
    read = episode.read("pipe")
    assert not read.ok and read.error_type, read
    candidate, _ = live.workspace_candidate(episode.ws)
    assert "pipe" not in candidate.files
    assert "alive" in episode.ok("echo alive")


def test_a_setuid_file_loses_its_setuid_bit(open_episode: OpenEpisode) -> None:
    episode = open_episode()
    made = episode.bash(
        'cp "$(command -v sh)" shx && chmod 4755 shx && cp shx sgx && chmod 2755 sgx && '
        "mkdir sticky && chmod 1777 sticky && stat -c '%n %a' shx sgx sticky"
    )
    assert made.ok and "shx 4755" in made.text, made  # it was setuid within its step
    assert any("setuid" in note and "shx" in note for note in made.notes), made
    modes = episode.ok("stat -c '%n %a' shx sgx sticky")
    assert "shx 755" in modes and "sgx 755" in modes, modes
    assert re.search(r"sticky \d{3}$", modes, re.MULTILINE), modes
    assert episode.ok("./shx -c 'id -u'").splitlines()[0].strip() != "0"


def test_ten_thousand_files_cross_the_file_limit_and_the_step_is_discarded(
    open_episode: OpenEpisode,
) -> None:
    episode = open_episode(limits=replace(LIMITS, workspace_files=8192))
    outcome = episode.bash("mkdir many && cd many && seq 1 10000 | xargs touch && echo made", 120)
    assert outcome.limit == "workspace_files" and not outcome.changed, outcome
    assert "NOT updated" in outcome.text and "(workspace_files)" in outcome.text, outcome
    after = episode.ok("ls -d many 2>&1; echo listed")
    assert "No such file" in after, after


# --- no sandbox left behind --------------------------------------------------------------------


def test_a_command_cancelled_mid_run_leaves_nothing(
    backend: Sandbox, open_episode: OpenEpisode
) -> None:
    """What the site does when an episode is closed or its run expires while a command runs
    (its watcher cancels the action): the sandbox goes at once, nothing of the step is kept."""
    episode = open_episode()
    token = f"cancelled-{uuid.uuid4().hex}"
    cancel = threading.Event()
    outcome: list[live.ActionOutcome] = []
    command = f"echo partial > partial.txt; sh -c 'sleep 300; : {token}'"

    def act() -> None:
        outcome.append(live.run_bash(backend, episode.ws, command, 600, cancel=cancel))

    acting = threading.Thread(target=act)
    acting.start()
    try:
        assert wait_for(lambda: bool(processes_with_token(token)), 60), "the command never ran"
    finally:
        cancel.set()
        acting.join(60)
    assert not acting.is_alive(), "the cancelled action did not return"
    assert wait_for(lambda: not processes_with_token(token), 10), processes_with_token(token)
    assert not outcome[0].changed, outcome[0]
    assert not episode.read("partial.txt").ok  # nothing of the cancelled step was kept


# A worker's action, run in a process of its own so that the test can SIGKILL it mid-step
# (with its whole process group, as the OOM killer or a lost machine would).
DOOMED_WORKER = """
import os, sys
from pathlib import Path
from packs.compiler import compile_pack, compiled_task_lanes
from verifiers import live
from verifiers.sandbox import get_sandbox
root, backend, folder, label = sys.argv[1:5]
token = os.environ["DOOMED_TOKEN"]  # not on our own command line: only the step's carry it
pack = compile_pack(Path(root))
task = compiled_task_lanes(pack.tasks[0], pack.files)
if backend == "docker":
    from verifiers.sandbox.docker import DockerSandbox
    sandbox = DockerSandbox(labels={label: token})
else:
    sandbox = get_sandbox("bwrap")
ws = live.plan_live_workspace(task, backend, Path(folder), live.WorkspaceLimits())
assert live.seed(sandbox, ws, task).ok
print("seeded", flush=True)
live.run_bash(sandbox, ws, "sh -c 'sleep 300; : %s'" % token, 600)
print("the step ended: it should have been killed first", flush=True)
"""


def test_a_worker_killed_mid_step_leaves_no_sandbox_once_reaped(
    backend: Sandbox, packs: Packs, host_dir: Path
) -> None:
    token = f"doomed-{uuid.uuid4().hex}"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            DOOMED_WORKER,
            str(packs.terminal.root),
            backend.name,
            str(host_dir / "workspace"),
            TEST_LABEL,
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "DOOMED_TOKEN": token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: bool(processes_with_token(token)) or worker.poll() is not None, 120)
        running = bool(processes_with_token(token))
        # The worker alone is killed, as the OOM killer would: what it started must go too.
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
        output = worker.communicate()[0]
        assert running, f"the step never ran: {output[-3000:]}"
        assert "should have been killed" not in output, output
        if backend.name == "docker":
            # The engine keeps a dead worker's container: the janitor removes what is past
            # the age limit (zero here) among the site's labelled containers.
            from verifiers.sandbox.docker import (  # noqa: PLC0415
                docker_client,
                remove_stale_containers,
            )

            client = docker_client()
            labelled = {"label": f"{TEST_LABEL}={token}"}
            assert client.containers.list(all=True, filters=labelled), "no container to reap"
            assert remove_stale_containers(client, 0, labels={TEST_LABEL: token})
            assert not client.containers.list(all=True, filters=labelled)
        # bwrap: the sandbox dies with the worker that started it, no janitor needed.
        assert wait_for(lambda: not processes_with_token(token), 30), processes_with_token(token)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)  # the machine stays clean when failing
        for pid in processes_with_token(token):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_no_container_or_process_outlives_an_action(
    backend: Sandbox, open_episode: OpenEpisode
) -> None:
    episode = open_episode()
    token = f"action-{uuid.uuid4().hex}"
    # A background process carrying the token, seen running inside the step (the control).
    seen = episode.ok(
        f"t={unjoined(token)}; n=0\n"
        'sh -c "sleep 300; : $t" & sleep 0.3\n'
        "for f in /proc/[0-9]*/cmdline; do line=$(tr '\\0' ' ' < $f 2>/dev/null)\n"
        '  case "$line" in *"$t"*) n=$((n + 1));; esac; done; echo "running: $n"'
    )
    assert "running: 1" in seen, seen
    assert wait_for(lambda: not processes_with_token(token), 10), processes_with_token(token)
    if backend.name == "docker":
        labels = getattr(backend, "labels", {})
        client = backend.client  # type: ignore[attr-defined]
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        settle_containers()  # idle pooled containers ran nothing: they are not the action's
        assert not client.containers.list(all=True, filters=filters)
    folder = episode.ws.folder
    live.destroy(folder)
    assert not folder.exists()
