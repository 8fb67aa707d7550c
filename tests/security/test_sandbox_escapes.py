"""Escape suite for the sandbox backends (security.md §6 A15–A33, §7), with real processes.

Every test runs on bubblewrap and on Docker (backends and the after-test cleanliness checks:
``sandbox_backends``). Limits are proved by outcomes — exit status, the timed_out / memory /
output flags, bytes written, processes left — never by how long a run took.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
import textwrap
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.security.sandbox_backends import (
    SMALL,
    TIGHT_MEMORY,
    WORKDIR,
    on_gvisor,
    write,
)
from tests.security.sandbox_probes import ANNOUNCING_DAEMON, survivors
from verifiers.sandbox import (
    Mount,
    Sandbox,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
    get_sandbox,
)
from verifiers.sandbox import bwrap as bwrap_backend
from verifiers.sandbox.bwrap import PATH_VALUE
from verifiers.sandbox.docker_pool import KEEPER_UID

# --- running code inside ---------------------------------------------------------------------


def python(code: str) -> list[str]:
    return ["python3", "-c", textwrap.dedent(code)]


def spec(code: str, **kwargs: Any) -> SandboxSpec:
    kwargs.setdefault("limits", SMALL)
    return SandboxSpec(command=python(code), **kwargs)


def run(backend: Sandbox, code: str, **kwargs: Any) -> SandboxResult:
    return backend.run(spec(code, **kwargs))


def report(result: SandboxResult) -> Any:
    """The JSON a sandboxed script printed, after checking that it exited cleanly."""
    assert result.exit_code == 0, result
    return json.loads(result.stdout)


def assert_flags(
    result: SandboxResult, *, timed_out: bool = False, memory: bool = False, output: bool = False
) -> None:
    flags = (result.timed_out, result.memory_exceeded, result.output_exceeded)
    assert flags == (timed_out, memory, output), result


# Reports what an OSError was as its errno name; used by scripts below.
PROBE = """
import errno, json, os, sys
def attempt(fn, *args):
    try:
        fn(*args)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"
def write_file(path, text="x", mode="w"):
    with open(path, mode) as fh:
        fh.write(text)
"""


# --- normal behaviour ------------------------------------------------------------------------


def test_a_normal_run_exits_zero_and_returns_its_stdout(backend: Sandbox) -> None:
    result = run(backend, "print('hello from the sandbox')")

    assert result.exit_code == 0
    assert result.stdout == b"hello from the sandbox\n"
    assert result.stderr == b""
    assert result.backend == backend.name
    assert result.image == (
        os.environ["SECUREBENCH_DEFAULT_IMAGE"] if backend.name == "docker" else None
    )
    assert_flags(result)
    assert (result.collected, result.refused) == ({}, ())


def test_stdin_is_passed_through_to_the_command(backend: Sandbox) -> None:
    data = b"first line\nsecond line\n\x00binary\xff tail"
    result = backend.run(SandboxSpec(command=["cat"], stdin=data, limits=SMALL))

    assert result.exit_code == 0
    assert result.stdout == data
    assert_flags(result)


def test_a_read_from_stdin_without_input_sees_end_of_file_at_once(backend: Sandbox) -> None:
    result = backend.run(SandboxSpec(command=["cat"], limits=SMALL))

    assert (result.exit_code, result.stdout) == (0, b"")
    assert_flags(result)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (python("import sys; sys.exit(3)"), 3),
        (python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"), 128 + signal.SIGTERM),
        (python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), 128 + signal.SIGKILL),
        (["no-such-command-anywhere"], 127),
    ],
    ids=["sys-exit-3", "sigterm-143", "own-sigkill-137", "not-found-127"],
)
def test_a_failing_command_reports_its_exit_code(
    backend: Sandbox, command: list[str], expected: int
) -> None:
    result = backend.run(SandboxSpec(command=command, limits=SMALL))

    assert result.exit_code == expected, result
    assert_flags(result)  # a SIGKILL the run sent itself is not a memory kill


# --- isolation: network, environment, filesystem ---------------------------------------------


def test_the_network_is_unreachable_even_for_a_server_on_the_hosts_loopback(
    backend: Sandbox,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        code = f"""
        import errno, json, socket
        out = {{}}
        for host, port in (("1.1.1.1", 53), ("127.0.0.1", {port})):
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
        print(json.dumps(out))
        """
        outcome = report(run(backend, code))
        with pytest.raises(TimeoutError):
            server.accept()  # nothing from inside ever reached the host's listener

    # gVisor's own network stack says "no route to host" where Linux says "network".
    unreachable = "EHOSTUNREACH" if on_gvisor(backend) else "ENETUNREACH"
    assert outcome == {"1.1.1.1": unreachable, "127.0.0.1": "ECONNREFUSED"}


def test_the_environment_is_cleared_down_to_the_whitelist_and_spec_env(
    backend: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("SECUREBENCH_TEST_CANARY", canary)
    monkeypatch.setenv("DJANGO_SECRET_KEY", canary)
    result = run(
        backend, "import json, os; print(json.dumps(dict(os.environ)))", env={"TASK_SEED": "42"}
    )
    env = report(result)

    assert canary.encode() not in result.stdout
    # PWD comes from the runtime's chdir; HOSTNAME is set by Docker itself (to "sandbox").
    assert env.pop("PWD", WORKDIR) == WORKDIR
    assert env.pop("HOSTNAME", "sandbox") == "sandbox"
    assert env == {
        "PATH": PATH_VALUE,
        "HOME": WORKDIR,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TASK_SEED": "42",
    }


def test_the_host_proc_1_environ_and_other_host_processes_are_not_visible(
    backend: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("SECUREBENCH_TEST_CANARY", canary)
    code = """
    import json, os
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    seen = {}
    for pid in pids:
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as fh:
                    seen[f"{pid}/{name}"] = fh.read().decode("latin-1")
            except OSError as exc:
                seen[f"{pid}/{name}"] = "error " + type(exc).__name__
    print(json.dumps({"pids": pids, "seen": seen}))
    """
    result = run(backend, code)
    inside = report(result)

    assert canary.encode() not in result.stdout
    assert len(inside["pids"]) < 8, inside["pids"]  # a pid namespace: only the sandbox's own
    # /proc/1 inside is the sandbox's init: unreadable, or an environment of a few safe names.
    environ = inside["seen"]["1/environ"]
    if not environ.startswith("error "):
        names = {item.split("=", 1)[0] for item in environ.split("\0") if item}
        assert names <= {"PATH", "LANG", "HOME", "PYTHONDONTWRITEBYTECODE", "PWD", "HOSTNAME"}


def test_system_folders_are_read_only(backend: Sandbox) -> None:
    name = f"sb-escape-{uuid.uuid4().hex}"
    targets = [f"/usr/{name}", f"/usr/bin/{name}", f"/etc/{name}", f"/{name}", f"/bin/{name}"]
    code = PROBE + textwrap.dedent(f"""
    targets = {targets!r}
    out = {{t: attempt(write_file, t) for t in targets}}
    out["/etc/passwd"] = attempt(write_file, "/etc/passwd", "x", "a")
    out["mkdir /usr/lib"] = attempt(os.mkdir, "/usr/lib/{name}")
    print(json.dumps(out))
    """)
    outcome = report(run(backend, code))

    # Opening an existing root-owned file checks permissions before the mount's read-only
    # flag (on Docker's overlay): EACCES there says nothing about the root, either will do.
    assert outcome.pop("/etc/passwd") in ("EROFS", "EACCES")
    # Creating is refused by the read-only mount first: EROFS only, as a permission refusal
    # (EACCES) would hide a writable root filesystem (test_sandbox_mounts probes further).
    # gVisor checks permissions first; there, the root's read-only flag is proved where
    # permissions would allow a write (test_sandbox_mounts, ROOT_PROBE).
    refusals = {"EACCES", "EROFS"} if on_gvisor(backend) else {"EROFS"}
    assert set(outcome) == {*targets, "mkdir /usr/lib"}
    assert set(outcome.values()) <= refusals, outcome
    for target in [*targets, f"/usr/lib/{name}"]:
        assert not os.path.lexists(target), f"{target} was created on the host"


def test_host_paths_are_absent_unless_mounted(backend: Sandbox, host_dir: Path) -> None:
    secret = write(host_dir / "secret.txt", "host secret")
    host_tmp_file = write(Path(tempfile.gettempdir()) / f"sb-escape-{uuid.uuid4().hex}", "host tmp")
    try:
        paths = [
            "/work/main",
            "/work/main/manage.py",
            str(host_dir),
            str(secret),
            str(host_tmp_file),
            "/var/run/docker.sock",
            "/run/docker.sock",
            bwrap_backend.DEFAULT_SLOT_DIR,
        ]
        code = f"""
        import json, os
        def look(path):
            if not os.path.lexists(path):
                return "absent"
            try:
                os.listdir(path) if os.path.isdir(path) else open(path, "rb").close()
            except PermissionError:
                return "denied"
            return "visible"
        print(json.dumps({{p: look(p) for p in {[*paths, "/root"]!r}}}))
        """
        outcome = report(run(backend, code))
    finally:
        host_tmp_file.unlink()

    # Docker's image has its own /root (mode 700, root's): denied to the sandbox user.
    assert outcome.pop("/root") in ("absent", "denied")
    assert outcome == dict.fromkeys(paths, "absent")


def test_a_read_only_mount_can_be_read_but_not_written(backend: Sandbox, host_dir: Path) -> None:
    # Writable by anyone on the host: only the read-only mount can stop the writes (EROFS).
    host_dir.chmod(0o777)
    data = write(host_dir / "data.txt", "trusted input\n", mode=0o666)
    code = PROBE + textwrap.dedent("""
    print(json.dumps({
        "read": open("/task/data.txt").read(),
        "append": attempt(write_file, "/task/data.txt", "forged", "a"),
        "create": attempt(write_file, "/task/new.txt"),
        "unlink": attempt(os.unlink, "/task/data.txt"),
        "chmod": attempt(os.chmod, "/task/data.txt", 0o777),
        "mkdir": attempt(os.mkdir, "/task/sub"),
    }))
    """)
    outcome = report(run(backend, code, mounts=(Mount(host_dir, "/task"),)))

    assert outcome.pop("read") == "trusted input\n"
    # chmod of a file the sandbox uid does not own: gVisor says so (EPERM) before it looks at
    # the mount; the four writes above prove the mount read-only there too.
    assert outcome.pop("chmod") == ("EPERM" if on_gvisor(backend) else "EROFS")
    assert outcome == dict.fromkeys(("append", "create", "unlink", "mkdir"), "EROFS")
    assert data.read_text() == "trusted input\n"
    assert sorted(p.name for p in host_dir.iterdir()) == ["data.txt"]


def test_work_files_are_copied_in_and_the_host_copy_stays_unchanged(
    backend: Sandbox, host_dir: Path
) -> None:
    first = write(host_dir / "a.txt", "original")
    nested = write(host_dir / "sub" / "b.txt", "nested")
    script = write(host_dir / "run.sh", "#!/bin/sh\necho script ran\n", mode=0o755)
    code = """
    import json, os, subprocess
    before = {p: open(p).read() for p in ("a.txt", "sub/b.txt")}
    ran = subprocess.run(["./run.sh"], capture_output=True, text=True).stdout
    open("a.txt", "w").write("changed inside")
    os.unlink("sub/b.txt")
    open("c.txt", "w").write("new inside")
    os.chmod("run.sh", 0o600)
    print(json.dumps({"before": before, "ran": ran, "cwd": os.getcwd()}))
    """
    result = run(backend, code, work_files=host_dir, collect=("a.txt", "c.txt"))
    outcome = report(result)

    assert outcome == {
        "before": {"a.txt": "original", "sub/b.txt": "nested"},
        "ran": "script ran\n",
        "cwd": WORKDIR,
    }
    assert result.collected == {"a.txt": b"changed inside", "c.txt": b"new inside"}
    assert first.read_text() == "original"
    assert nested.read_text() == "nested"
    assert script.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in host_dir.iterdir()) == ["a.txt", "run.sh", "sub"]


def test_a_symlink_in_work_files_is_skipped_not_followed(backend: Sandbox, host_dir: Path) -> None:
    write(host_dir / "real.txt", "real")
    outside = write(
        Path(tempfile.mkdtemp(prefix="sb-escapes-outside-", dir="/tmp")) / "s.txt", "host only"
    )  # noqa: S108
    try:
        (host_dir / "link.txt").symlink_to(outside)
        (host_dir / "linkdir").symlink_to(outside.parent)
        code = """
        import json, os
        print(json.dumps({n: os.path.lexists(n) for n in ("real.txt", "link.txt", "linkdir")}))
        """
        result = run(backend, code, work_files=host_dir)
    finally:
        shutil.rmtree(outside.parent)

    assert report(result) == {"real.txt": True, "link.txt": False, "linkdir": False}
    assert b"host only" not in result.stdout
    assert set(result.notes) >= {
        "work_files: skipped link.txt (not a regular file or folder)",
        "work_files: skipped linkdir (not a regular file or folder)",
    }


# --- resource limits -------------------------------------------------------------------------


def test_a_fork_bomb_stops_at_the_process_limit_and_leaves_nothing_behind(
    backend: Sandbox,
) -> None:
    limits = replace(SMALL, pids=16)
    code = """
    import errno, os
    born, error = 0, None
    for _ in range(500):
        try:
            pid = os.fork()
        except OSError as exc:
            error = errno.errorcode[exc.errno]
            break
        if pid == 0:  # each child holds its process slot, then is orphaned by our exit
            try:
                os.execv("/bin/sleep", ["sleep", "60"])
            finally:
                os._exit(1)
        born += 1
    print(born, error)
    """
    result = run(backend, code, limits=limits)

    assert result.exit_code == 0, result  # ended by itself, not at the wall limit
    born, error = result.stdout.split()
    assert error == b"EAGAIN"
    assert 0 < int(born) <= limits.pids
    assert_flags(result)  # the fixture then checks that none of the sleepers survived


def test_an_endless_fork_bomb_is_killed_at_the_deadline(backend: Sandbox) -> None:
    limits = replace(SMALL, wall_seconds=2.0, pids=16)
    code = """
    import os, time
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
    """
    result = run(backend, code, limits=limits)

    assert result.exit_code is None
    # gVisor's kernel needs threads of the same pids cgroup: refused them, it may take the
    # whole sandbox down before the deadline. Either way the bomb ends, and is named.
    if not on_gvisor(backend) or result.timed_out:
        assert_flags(result, timed_out=True)
    else:
        assert "the container stopped under the command" in result.notes
    # Named a process-limit failure: Docker reads the refused forks off the container's pids
    # cgroup, bwrap sees the sandbox sitting at its RLIMIT_NPROC cap (or, not root, above it).
    # gVisor refuses the forks inside its own kernel, out of the host's sight: the name shows
    # there only when its own threads were refused too (5 runs in 6 end as a plain timeout).
    assert result.process_limit or on_gvisor(backend)


def test_a_memory_hog_is_reported_as_memory_exceeded(backend: Sandbox) -> None:
    code = """
    chunks = []
    for _ in range(64):  # 1 GiB in touched 16 MiB pieces
        chunks.append(b"\\x01" * (16 << 20))
    print("allocated 1 GiB")
    """
    result = run(backend, code, limits=TIGHT_MEMORY)

    assert result.exit_code != 0
    assert b"allocated" not in result.stdout
    assert_flags(result, memory=True)


def test_memory_spread_over_four_processes_is_caught(backend: Sandbox) -> None:
    # 4 × 48 MiB: each process is under the 128 MiB limit, together they are far above it.
    code = """
    import os, sys, time
    children = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            block = b"\\x01" * (48 << 20)
            time.sleep(1.5)
            os._exit(0)
        children.append(pid)
    block = b"\\x01" * (48 << 20)
    time.sleep(1.5)
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    print("all four held 48 MiB" if not any(statuses) else f"children: {statuses}")
    sys.exit(1 if any(statuses) else 0)
    """
    result = run(backend, code, limits=TIGHT_MEMORY)

    assert result.exit_code != 0
    assert b"all four" not in result.stdout
    assert_flags(result, memory=True)


def test_filling_the_disk_stops_at_the_tmpfs_caps_and_leaves_nothing_on_the_host(
    backend: Sandbox,
) -> None:
    name = f"sb-fill-{uuid.uuid4().hex}.bin"
    code = f"""
    import errno, json, os
    out = {{}}
    for folder in ("/work", "/tmp"):
        fd, written = os.open(f"{{folder}}/{name}", os.O_WRONLY | os.O_CREAT), 0
        try:
            while True:
                written += os.write(fd, b"z" * 65536)
        except OSError as exc:
            out[folder] = [written, errno.errorcode[exc.errno]]
        os.close(fd)
    print(json.dumps(out))
    """
    result = run(backend, code)

    assert report(result) == {
        "/work": [SMALL.work_bytes, "ENOSPC"],
        "/tmp": [SMALL.tmp_bytes, "ENOSPC"],
    }
    assert_flags(result)
    for folder in ("/work", "/tmp", tempfile.gettempdir(), os.getcwd()):
        assert not (Path(folder) / name).exists(), f"{name} reached the host in {folder}"


def test_a_huge_output_is_cut_off_as_output_exceeded_and_capped(backend: Sandbox) -> None:
    limits = replace(SMALL, wall_seconds=3.0)
    code = """
    import sys
    while True:  # one endless line, no newline
        sys.stdout.write("x" * 65536)
    """
    result = run(backend, code, limits=limits)

    cap = limits.output_bytes
    assert result.output_exceeded is True
    assert result.exit_code is None
    assert result.memory_exceeded is False
    assert result.stdout.startswith(b"x" * (cap // 2) + b"\n[... ")
    assert result.stdout.endswith(b"bytes omitted by the sandbox ...]\n" + b"x" * (cap - cap // 2))
    assert cap < len(result.stdout) <= cap + 100
    assert result.timed_out is False  # cut off by the flood, not by the wall limit


def test_sleeping_past_the_deadline_is_timed_out_within_the_wall_limit(backend: Sandbox) -> None:
    limits = replace(SMALL, wall_seconds=2.0)
    result = run(
        backend, "import time\nprint('started', flush=True)\ntime.sleep(60)", limits=limits
    )

    assert result.exit_code is None
    assert result.stdout == b"started\n"  # output before the kill is kept
    assert_flags(result, timed_out=True)


@pytest.mark.parametrize("collect", [(), ("late.txt",)], ids=["no-collect", "collect"])
def test_a_double_forked_setsid_daemon_does_not_survive_the_run(
    backend: Sandbox, host_dir: Path, collect: tuple[str, ...]
) -> None:
    # The daemon announces its pid and pid namespace through a writable mount (the one place
    # a survivor could reach the host) before the command ends, and carries a token on its
    # command line. Once run() has returned, it must be found nowhere: not by the token (any
    # uid, any container), not in its pid namespace, and the write it would make on "go"
    # never lands. With collect, bwrap runs its wrapper: both teardown paths are covered.
    host_dir.chmod(0o777)
    token = f"sb-daemon-{uuid.uuid4().hex}"
    result = backend.run(
        SandboxSpec(
            command=["python3", "-I", "-c", ANNOUNCING_DAEMON, "/out", token],
            mounts=(Mount(host_dir, "/out", read_only=False),),
            collect=collect,
            limits=SMALL,
        )
    )

    assert (result.exit_code, result.stdout) == (0, b"main done\n"), result
    assert_flags(result)
    announced = json.loads((host_dir / "daemon.json").read_text())
    assert announced["ns"].startswith("pid:[")
    # A Docker container may still be on its way out (removed on a thread once nothing of
    # the run is left in it): its docker-init (root) and keeper (KEEPER_UID) are ours. Every
    # process of the run is the sandbox uid's, which can become neither.
    ours = (0, KEEPER_UID) if backend.name == "docker" else ()
    assert survivors(token, announced["ns"], ignore_uids=ours) == {}
    (host_dir / "go").touch()  # a survivor would now write late.txt; none is left to do so
    assert sorted(p.name for p in host_dir.iterdir()) == ["daemon.json", "go"]
    assert (result.collected, result.refused) == ({}, ())


# --- identity and kernel surface -------------------------------------------------------------


def run_with_groups(backend: Sandbox, code: str) -> SandboxResult:
    """Run ``code`` from a supervisor that belongs to root's group and another one, as a
    worker started by an init system may: the sandbox must not inherit either."""
    if os.geteuid() != 0:
        return run(backend, code)
    before = os.getgroups()
    os.setgroups([0, 27])
    try:
        return run(backend, code)
    finally:
        os.setgroups(before)


def test_the_sandbox_has_no_capabilities_and_no_new_privileges(backend: Sandbox) -> None:
    code = """
    import ctypes, json
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    keys = ("CapInh", "CapPrm", "CapEff", "CapBnd", "Uid", "Gid")
    found = {k: fields[k].split()[0] for k in keys}
    # gVisor's status has no CapAmb line: ambient capabilities are a subset of permitted and
    # inheritable ones, so with both empty there can be none.
    found["CapAmb"] = fields.get("CapAmb", "0000000000000000").split()[0]
    found["Groups"] = fields["Groups"].split()
    # Asked of the kernel (PR_GET_NO_NEW_PRIVS), not of a status line every kernel may not show.
    found["NoNewPrivs"] = str(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))
    print(json.dumps(found))
    """
    status = report(run_with_groups(backend, code))

    assert status.pop("Uid") != "0"
    # No supplementary group of the supervisor's (root's group 0 shows as the overflow gid in
    # bwrap's user namespace, but the kernel would still grant it): at most its own group.
    own_group = status.pop("Gid")
    assert set(status.pop("Groups")) <= {own_group}
    assert own_group != "0"
    assert status == {
        "CapInh": "0000000000000000",
        "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000",
        "CapAmb": "0000000000000000",
        "NoNewPrivs": "1",
    }


def assert_gvisor_user_namespace_gains_nothing(backend: Sandbox) -> None:
    """gVisor releases before its exec processes got the engine's seccomp profile (2026)
    let a command started by `docker exec` make user namespaces. They are gVisor's own, in
    user space: the host kernel's user-namespace code, the reason to refuse them, is never
    reached. Root in one still writes nothing and mounts nothing over the system folders."""
    code = """
    import json, subprocess
    inside = "touch /usr/sb-userns; echo $?; mount -t tmpfs none /usr 2>/dev/null; echo $?; id -u"
    done = subprocess.run(["unshare", "-r", "sh", "-c", inside], capture_output=True, text=True)
    print(json.dumps(done.stdout.split()))
    """
    touched, mounted, uid = report(run(backend, code))
    assert uid == "0"  # it did get a user namespace, as root in it
    assert touched != "0" and mounted != "0"


def test_a_nested_user_namespace_is_refused(backend: Sandbox) -> None:
    code = """
    import ctypes, errno, json, subprocess
    tool = subprocess.run(["unshare", "-U", "true"], capture_output=True, text=True)
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.unshare(0x10000000)  # CLONE_NEWUSER
    print(json.dumps({
        "tool": tool.returncode,
        "syscall": rc,
        "errno": errno.errorcode.get(ctypes.get_errno(), "none"),
    }))
    """
    outcome = report(run(backend, code))

    if on_gvisor(backend) and outcome["syscall"] == 0:
        assert_gvisor_user_namespace_gains_nothing(backend)
        return
    assert outcome["tool"] != 0
    assert outcome["syscall"] == -1
    # bwrap --disable-userns: ENOSPC (user namespace count 0); Docker's seccomp profile: EPERM.
    assert outcome["errno"] in ("ENOSPC", "EPERM")


# --- collection ------------------------------------------------------------------------------


def test_a_symlink_or_fifo_left_for_collection_is_refused_not_read(backend: Sandbox) -> None:
    code = """
    import os
    os.symlink("/etc/shadow", "out.txt")
    os.symlink("/etc/passwd", "passwd.txt")
    os.mkfifo("results.fifo")
    """
    wanted = ("out.txt", "passwd.txt", "results.fifo")
    result = run(backend, code, collect=wanted)

    assert result.exit_code == 0, result
    assert result.collected == {}
    assert sorted(result.refused) == sorted(wanted)
    assert_flags(result)


def test_a_symlinked_folder_on_a_collect_path_is_refused(backend: Sandbox) -> None:
    result = run(backend, "import os; os.symlink('/etc', 'd')", collect=("d/passwd",))

    assert result.exit_code == 0, result
    # Whatever else happens, the host's own file never comes back.
    assert result.collected.get("d/passwd") != Path("/etc/passwd").read_bytes()
    assert result.refused == ("d/passwd",)
    assert result.collected == {}


def test_collected_regular_files_come_back_capped_at_output_bytes(backend: Sandbox) -> None:
    cap = SMALL.output_bytes
    code = f"""
    import os
    open("small.txt", "w").write("hello")
    os.mkdir("dir")
    open("dir/out.json", "w").write("{{}}")
    open("big.bin", "wb").write(b"y" * {3 * cap})
    """
    result = run(backend, code, collect=("small.txt", "dir/out.json", "big.bin", "missing.txt"))

    assert result.exit_code == 0, result
    assert result.collected == {"small.txt": b"hello", "dir/out.json": b"{}", "big.bin": b"y" * cap}
    assert result.refused == ()


# --- started sandboxes -----------------------------------------------------------------------


ECHO = """
import sys
for line in sys.stdin:
    sys.stdout.write("echo: " + line)
    sys.stdout.flush()
print("bye")
"""


def test_a_started_sandbox_answers_requests_over_its_pipes(backend: Sandbox) -> None:
    process = backend.start(spec(ECHO))
    try:
        for number in range(3):
            process.stdin.write(f"request {number}\n".encode())
            process.stdin.flush()
            assert process.stdout.readline() == f"echo: request {number}\n".encode()
        process.stdin.close()
        assert process.stdout.read() == b"bye\n"
    finally:
        result = process.finish()

    assert result.exit_code == 0, result
    assert_flags(result)


def test_kill_ends_a_started_sandbox_at_once(backend: Sandbox) -> None:
    limits = replace(SMALL, wall_seconds=20.0)
    code = "import time\nprint('up', flush=True)\ntime.sleep(60)"
    process = backend.start(spec(code, limits=limits))
    try:
        assert process.stdout.readline() == b"up\n"
    finally:
        process.kill()
        result = process.finish()

    assert result.exit_code is None
    assert "killed by the caller" in result.notes
    assert_flags(result)  # not timed_out: the kill ended it, not the 20 s wall limit


def test_two_sandboxes_at_once_cannot_see_each_others_processes_or_files(
    backend: Sandbox,
) -> None:
    token = uuid.uuid4().hex
    first_code = f"""
    import socket, sys
    open("/tmp/first-{token}", "w").write("first")
    open("first-{token}", "w").write("first")
    server = socket.socket()
    server.bind(("127.0.0.1", 45678))
    server.listen(1)
    print("ready", flush=True)
    sys.stdin.read()
    """
    second_code = f"""
    import errno, json, os, socket
    token = "{token[:16]}" + "{token[16:]}"  # split: this script's own argv must not match
    hits = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if token.encode() in open(f"/proc/{{pid}}/cmdline", "rb").read():
                hits.append(pid)
        except OSError:
            pass
    try:
        socket.create_connection(("127.0.0.1", 45678), timeout=2).close()
        connect = "connected"
    except OSError as exc:
        connect = errno.errorcode.get(exc.errno, str(exc))
    print(json.dumps({{
        "processes": hits,
        "tmp": [n for n in os.listdir("/tmp") if token in n],
        "work": [n for n in os.listdir(".") if token in n],
        "connect": connect,
    }}))
    """
    first = backend.start(spec(first_code, limits=replace(SMALL, wall_seconds=20.0)))
    try:
        assert first.stdout.readline() == b"ready\n"
        second = run(backend, second_code)
        first.stdin.close()
    finally:
        first_result = first.finish()

    assert report(second) == {"processes": [], "tmp": [], "work": [], "connect": "ECONNREFUSED"}
    assert first_result.exit_code == 0, first_result


# --- backend selection -----------------------------------------------------------------------


def test_an_unknown_backend_name_is_refused() -> None:
    with pytest.raises(SandboxUnavailable, match="unknown sandbox backend 'nope'"):
        get_sandbox("nope")
