"""Attacks by a run_python snippet (verifiers.snippet) on the worker that runs it.

An episode's agent runs any code it likes through ``run_snippet``. Each test is an attack,
run on bubblewrap and on Docker (the ``backend`` fixture, which then checks that no process
or container of the test survived). Secrets are handed to the snippet on stdin, never in its
code: its own file is visible to it, so a marker written there would always be found.
Limits are proved by outcomes (what was printed, the limit named), never by timing.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import textwrap
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from tests.security.sandbox_backends import write
from tests.security.sandbox_probes import survivors
from verifiers.sandbox import Sandbox
from verifiers.snippet import OUTPUT_CAP_BYTES, SNIPPET_LIMITS, SnippetOutcome, run_snippet

REPO_ROOT = Path(__file__).resolve().parents[2]
TRUNCATED = f"[… output truncated at {OUTPUT_CAP_BYTES} bytes"
# Names the backends set themselves (PWD by the runtime's chdir, HOSTNAME by Docker).
FIXED_ENV = {"PATH", "LANG", "HOME", "PWD", "HOSTNAME", "PYTHONDONTWRITEBYTECODE"}


def run(backend: Sandbox, code: str, stdin: str = "") -> SnippetOutcome:
    return run_snippet(backend, textwrap.dedent(code), stdin)


def report(outcome: SnippetOutcome) -> dict:
    """The JSON a snippet printed, after checking that it ran to its end."""
    assert (outcome.exit_code, outcome.limit) == (0, None), outcome
    return json.loads(outcome.stdout)


def image_env_names(backend: Sandbox) -> set[str]:
    """Variables the Docker image itself declares (trusted, part of the image)."""
    if backend.name != "docker":
        return set()
    image = backend.client.images.get(os.environ["SECUREBENCH_DEFAULT_IMAGE"])  # type: ignore[attr-defined]
    return {item.split("=", 1)[0] for item in image.attrs["Config"].get("Env") or []}


# --- the worker's secrets --------------------------------------------------------------------


def test_the_workers_environment_is_not_visible(
    backend: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = uuid.uuid4().hex
    name, value = f"SECUREBENCH_MARKER_{token}", f"marker-value-{token}"
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("DJANGO_SECRET_KEY", value)
    code = """
    import json, os, sys
    needles = sys.stdin.read().split()
    seen = {"environ": dict(os.environ), "proc": {}}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as fh:
                    text = fh.read().decode("latin-1")
            except OSError:
                continue
            seen["proc"][f"{pid}/{part}"] = [n for n in needles if n in text]
    print(json.dumps(seen))
    """
    outcome = run(backend, code, f"{name} {value}")
    seen = report(outcome)

    # Messages name no values: a failure must not print the worker's environment into logs.
    assert name not in seen["environ"], "the worker's marker variable reached the snippet"
    leaked = sorted(where for where, hits in seen["proc"].items() if hits)
    assert leaked == [], "the marker is readable in /proc"
    unexpected = sorted(set(seen["environ"]) - FIXED_ENV - image_env_names(backend))
    assert unexpected == [], "variables beyond the fixed set reached the snippet"
    assert value not in outcome.stdout.replace(f"{name} {value}", "")  # only the stdin echo


# The snippet walks the whole tree (not /proc, /sys) and reports every path whose name holds
# the marker, and every regular file whose content does. Contents are read everywhere but in
# the system folders (hundreds of thousands of the host's own files on bwrap: too many to
# read within the wall limit); names are checked there too, so a host folder mounted under
# /usr would still be found by its marked file names.
SEARCH = """
import json, os, stat, sys
marker = sys.stdin.read().strip()
needle = marker.encode()
system = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/")
named, holding, read = [], [], 0
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys"):
        dirs[:] = []
        continue
    named += [os.path.join(root, n) for n in dirs + files if marker in n]
    if (root + "/").startswith(system):
        continue
    for name in files:
        path = os.path.join(root, name)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            with open(path, "rb") as fh:
                read += 1
                if needle in fh.read(4 << 20):
                    holding.append(path)
        except OSError:
            continue
print(json.dumps({"named": named, "holding": holding, "read": read}))
"""


def test_host_files_are_not_visible_anywhere_in_the_sandbox(
    backend: Sandbox, host_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.conf import settings  # noqa: PLC0415 - only to name the site's data folder

    # The search reads the whole filesystem: on a loaded machine it outlasts the 5 s an
    # agent's snippet gets (CI saw it time out). What is visible does not depend on time.
    roomy = replace(SNIPPET_LIMITS, wall_seconds=60.0, cpu_seconds=60)
    monkeypatch.setattr("verifiers.snippet.SNIPPET_LIMITS", roomy)

    marker = f"sbmarker{uuid.uuid4().hex}"
    # World-readable files a careless mount would expose: a marked file, settings-like files,
    # and a folder beside the one run_snippet writes the snippet to (the same temp dir).
    write(host_dir / f"{marker}.txt", marker)
    write(host_dir / "securebench_site" / "local_settings.py", f'SECRET_KEY = "{marker}"\n')
    write(host_dir / ".env", f"DJANGO_SECRET_KEY={marker}\n")
    beside = Path(tempfile.mkdtemp(prefix=f"securebench-snippet-{marker}-"))
    beside.chmod(0o755)
    write(beside / "main.py", f"print('{marker}')\n")
    try:
        outcome = run(backend, SEARCH, marker)
        found = report(outcome)
        looks = run(backend, LOOK, json.dumps(host_paths(host_dir, beside, settings.DATA_DIR)))
    finally:
        for path in sorted(beside.iterdir()):
            path.unlink()
        beside.rmdir()

    assert found["read"] > 0  # the search did read files (its own snippet, at least)
    assert (found["named"], found["holding"]) == ([], [])
    assert report(looks) == {"visible": [], "snippet folder": ["main.py"]}


# Which of the host paths on stdin exist inside, and what the snippet's own folder holds.
LOOK = """
import json, os, sys
paths = json.loads(sys.stdin.read())
print(json.dumps({
    "visible": [p for p in paths if os.path.lexists(p)],
    "snippet folder": sorted(os.listdir(os.path.dirname(os.path.abspath(__file__)))),
}))
"""


def host_paths(host_dir: Path, beside: Path, data_dir: Path) -> list[str]:
    """The repository, the site's data folder, the host temp folders: none may exist inside."""
    return [
        str(REPO_ROOT),
        str(REPO_ROOT / "manage.py"),
        str(REPO_ROOT / "securebench_site" / "settings.py"),
        str(Path(data_dir)),
        str(host_dir),
        str(beside),
        tempfile.gettempdir() + "/" + beside.name,
        "/var/run/docker.sock",
        "/run/docker.sock",
    ]


# --- network ---------------------------------------------------------------------------------

CONNECT = """
import errno, json, socket, sys
targets = json.loads(sys.stdin.read())
out = {}
for host, port in targets:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, port))
        out[host] = "connected"
    except socket.timeout:
        out[host] = "timeout"
    except OSError as exc:
        out[host] = errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        s.close()
try:
    socket.getaddrinfo("example.com", 443)
    out["dns"] = "resolved"
except OSError as exc:
    out["dns"] = type(exc).__name__
print(json.dumps(out))
"""


def host_address() -> str | None:
    """This host's own outward address (no packet is sent to pick it); None without a route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only a route lookup
        except OSError:
            return None
        return probe.getsockname()[0]


def test_the_snippet_has_no_network_not_even_to_the_hosts_own_ports(backend: Sandbox) -> None:
    own = host_address()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("0.0.0.0", 0))  # noqa: S104 - every host address: any route in would do
        server.listen(8)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        targets = [("127.0.0.1", port), ("1.1.1.1", 53)] + ([(own, port)] if own else [])
        outcome = report(run(backend, CONNECT, json.dumps(targets)))
        with pytest.raises(TimeoutError):
            server.accept()  # nothing from inside ever reached the host's listener

    assert outcome.pop("dns") == "gaierror"
    assert "connected" not in outcome.values(), outcome
    # Only a loopback of its own (nothing listens there) and no route anywhere else.
    expected = {"127.0.0.1": "ECONNREFUSED", "1.1.1.1": "ENETUNREACH"}
    assert outcome == expected | ({own: "ENETUNREACH"} if own else {})


# --- resource limits -------------------------------------------------------------------------


def test_forking_stops_at_the_process_limit_and_no_child_survives(backend: Sandbox) -> None:
    # Bounded on purpose (64 sleepers at most even without a limit); each child carries the
    # token as its process name, so a survivor is found on the host whatever uid it runs as.
    token = f"sb-snippet-fork-{uuid.uuid4().hex}"
    code = """
    import os, sys
    token = sys.stdin.read()
    born = 0
    for _ in range(64):
        pid = os.fork()  # the limit makes this raise BlockingIOError, uncaught
        if pid == 0:
            os.execv("/bin/sleep", [token, "60"])
        born += 1
        print(born, flush=True)
    print("all 64 born")
    """
    outcome = run(backend, code, token)

    assert outcome.limit == "processes", outcome
    assert outcome.exit_code == 1
    assert "all 64 born" not in outcome.stdout
    assert 0 < len(outcome.stdout.split()) <= SNIPPET_LIMITS.pids
    assert survivors(token) == {}


def test_a_fork_bomb_is_contained_and_the_next_snippet_runs_normally(backend: Sandbox) -> None:
    code = """
    import os
    while True:
        os.fork()
    """
    outcome = run(backend, code)

    assert outcome.limit in ("processes", "timeout"), outcome
    assert outcome.exit_code != 0
    after = run(backend, "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert after.exit_code == 0
    assert int(after.stdout) < 5  # a fresh sandbox: nothing of the bomb is there


def test_a_detached_daemon_does_not_outlive_its_snippet(backend: Sandbox) -> None:
    # Double fork and a new session: the daemon leaves the snippet's process tree. It carries
    # the token as its process name, so it is found on the host wherever it runs.
    token = f"sb-snippet-daemon-{uuid.uuid4().hex}"
    code = """
    import os, sys
    token = sys.stdin.read()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", [token, "60"])
        os._exit(0)
    os.wait()
    print("daemon started")
    """
    outcome = run(backend, code, token)

    assert (outcome.stdout, outcome.exit_code, outcome.limit) == ("daemon started\n", 0, None)
    assert survivors(token) == {}


def test_a_memory_hog_is_stopped_at_the_memory_limit(backend: Sandbox) -> None:
    code = """
    chunks = []
    for _ in range(64):  # 1 GiB in touched 16 MiB pieces
        chunks.append(b"\\x01" * (16 << 20))
    print("allocated 1 GiB")
    """
    outcome = run(backend, code)

    assert outcome.limit == "memory", outcome
    assert outcome.exit_code != 0
    assert "allocated" not in outcome.stdout


def test_memory_spread_over_several_processes_is_stopped_too(backend: Sandbox) -> None:
    # 4 × 96 MiB: each process under the 256 MiB limit, together far above it.
    code = """
    import os, sys, time
    children = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            block = b"\\x01" * (96 << 20)
            time.sleep(3)
            os._exit(0)
        children.append(pid)
    block = b"\\x01" * (96 << 20)
    time.sleep(3)
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    print("all four held 96 MiB" if not any(statuses) else f"children: {statuses}")
    """
    outcome = run(backend, code)

    assert outcome.limit == "memory", outcome
    assert "all four" not in outcome.stdout


def test_an_endless_loop_is_stopped_at_the_time_limit(backend: Sandbox) -> None:
    # Would end by itself after 40 s: printing "loop ended" means no limit stopped it.
    code = """
    import time
    print("started")
    end = time.monotonic() + 40
    while time.monotonic() < end:
        pass
    print("loop ended")
    """
    outcome = run(backend, code)

    assert outcome.limit == "timeout", outcome
    assert outcome.exit_code is None
    assert outcome.stdout == "started\n"  # printed before the kill, without a flush


def test_sleeping_is_stopped_at_the_wall_limit(backend: Sandbox) -> None:
    # Sleeping uses no CPU: only the wall clock can stop it before it finishes.
    outcome = run(backend, "import time\nprint('started')\ntime.sleep(30)\nprint('finished')\n")

    assert outcome.limit == "timeout", outcome
    assert outcome.exit_code is None
    assert outcome.stdout == "started\n"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_an_output_flood_is_cut_off_and_capped_with_a_marker(backend: Sandbox, stream: str) -> None:
    code = f"""
    import sys
    while True:  # one endless line, no newline
        sys.{stream}.write("x" * 65536)
    """
    outcome = run(backend, code)
    text = getattr(outcome, stream)

    assert outcome.limit == "output", outcome
    assert outcome.exit_code is None
    assert text.count(TRUNCATED) == 1
    head, tail = text.split(TRUNCATED)
    assert head == "x" * (OUTPUT_CAP_BYTES // 2) + "\n"
    assert tail.endswith("]\n" + "x" * (OUTPUT_CAP_BYTES - OUTPUT_CAP_BYTES // 2))
    assert len(text.encode()) <= OUTPUT_CAP_BYTES + 100


# --- the filesystem --------------------------------------------------------------------------

WRITE_ATTEMPTS = """
import errno, json, os, sys
name = sys.stdin.read()
def attempt(action):
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"
def create(path):
    with open(path, "x") as fh:
        fh.write("written from a snippet")
here = os.path.dirname(os.path.abspath(__file__))
out = {p: attempt(lambda p=p: create(p)) for p in (
    f"/{name}", f"/etc/{name}", f"/usr/{name}", f"/usr/bin/{name}", f"/opt/{name}",
    f"{here}/{name}")}
out["append to the snippet itself"] = attempt(lambda: open(__file__, "a").write("#"))
out["mkdir /usr/lib"] = attempt(lambda: os.mkdir(f"/usr/lib/{name}"))
print(json.dumps(out))
"""


def test_the_root_filesystem_and_the_snippets_own_folder_are_read_only(
    backend: Sandbox,
) -> None:
    name = f"sb-snippet-{uuid.uuid4().hex}"
    outcome = report(run(backend, WRITE_ATTEMPTS, name))

    # An existing file may be refused by its permissions before the read-only mount's flag.
    assert outcome.pop("append to the snippet itself") in ("EROFS", "EACCES")
    # Creating anywhere is refused by the read-only mounts themselves.
    assert set(outcome.values()) == {"EROFS"}, outcome
    for folder in ("/", "/etc", "/usr", "/usr/bin", "/usr/lib", "/opt"):
        assert not (Path(folder) / name).exists(), f"{name} was created on the host"


# Writes a marked file in every place it can, then (second run) looks for any of them.
PLANT = """
import json, os, sys
marker = sys.stdin.read()
places = ["/tmp", os.getcwd(), os.environ.get("HOME", "/tmp"), "/var/tmp", "/dev/shm", "/run"]
planted = []
for place in places:
    try:
        with open(os.path.join(place, marker), "w") as fh:
            fh.write(marker)
        planted.append(place)
    except OSError:
        pass
print(json.dumps(sorted(set(planted))))
"""
FIND = """
import json, os, sys
marker = sys.stdin.read()
places = ["/tmp", os.getcwd(), os.environ.get("HOME", "/tmp"), "/var/tmp", "/dev/shm", "/run"]
print(json.dumps(sorted({p for p in places if os.path.lexists(os.path.join(p, marker))})))
"""


def test_scratch_writes_are_allowed_but_gone_by_the_next_snippet(backend: Sandbox) -> None:
    marker = f"sb-snippet-{uuid.uuid4().hex}"
    planted = json.loads(run(backend, PLANT, marker).stdout)
    found = run(backend, FIND, marker)

    assert planted == ["/tmp", "/work"]  # cwd and HOME are /work; nothing else is writable
    assert json.loads(found.stdout) == []
    for folder in (tempfile.gettempdir(), "/tmp", "/var/tmp", os.getcwd()):  # noqa: S108
        assert not (Path(folder) / marker).exists(), f"{marker} reached the host in {folder}"


def test_the_snippet_runs_unprivileged_without_capabilities(backend: Sandbox) -> None:
    code = """
    import json, os
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    print(json.dumps({
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
        "caps": [status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
        "no_new_privs": status.get("NoNewPrivs", "").strip(),
    }))
    """
    outcome = report(run(backend, code))

    assert 0 not in (outcome["uid"], outcome["euid"], outcome["gid"])
    assert outcome["caps"] == ["0000000000000000"] * 5
    assert outcome["no_new_privs"] == "1"
