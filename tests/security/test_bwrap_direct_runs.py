"""bubblewrap runs without the wrapper ("direct": no ``collect``, few work files).

bwrap then copies the work files and execs the command itself; these tests pin what the
wrapper used to guarantee: leftovers die with the run, the work dir stays capped, exit codes
are the command's (not forgeable from inside), and runs that need the wrapper still get it.
"""

from __future__ import annotations

import os
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.components import require
from tests.security.sandbox_probes import processes_with_token, survivors
from verifiers.sandbox import Limits, MiB, SandboxSpec, SandboxUnavailable
from verifiers.sandbox.bwrap import DIRECT_MAX_FILES, BwrapSandbox, pids_of_uid

SMALL = Limits(
    wall_seconds=10.0,
    cpu_seconds=10,
    memory_bytes=256 * MiB,
    pids=32,
    tmp_bytes=8 * MiB,
    work_bytes=1 * MiB,
    open_files=64,
    output_bytes=64 * 1024,
)


@pytest.fixture
def sandbox() -> Iterator[BwrapSandbox]:
    try:
        backend = BwrapSandbox()
    except SandboxUnavailable as exc:
        require("bwrap", f"bwrap sandbox unavailable: {exc}")
    yield backend
    left = {uid: pids for uid in sorted(backend.used_uids) if (pids := pids_of_uid(uid))}
    assert not left, f"processes of slot uids survived the test: {left}"


def python(code: str, *args: str) -> list[str]:
    return ["python3", "-I", "-c", textwrap.dedent(code), *args]


def token() -> str:
    """Put on the command line of a run's processes (forks keep it): found by any uid."""
    return f"sb-direct-{uuid.uuid4().hex}"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "pkg" / "deep").mkdir(parents=True)
    (folder / "data.txt").write_text("hello\n")
    (folder / "pkg" / "deep" / "mod.py").write_text("VALUE = 42\n")
    os.chmod(folder / "pkg" / "deep" / "mod.py", 0o640)
    for path in (tmp_path, folder, folder / "pkg", folder / "pkg" / "deep"):
        path.chmod(0o755)
    return folder


def test_a_run_without_collect_runs_the_command_directly_under_pid_1(
    sandbox: BwrapSandbox, work: Path
) -> None:
    # Without the wrapper, the command's parent is bwrap's pid 1 (the reaper).
    code = """
    import os, stat
    print(os.getppid(), open("data.txt").read().strip(), open("pkg/deep/mod.py").read().strip())
    print(oct(stat.S_IMODE(os.stat("pkg/deep/mod.py").st_mode)))
    """
    result = sandbox.run(SandboxSpec(command=python(code), work_files=work, limits=SMALL))

    assert result.exit_code == 0, result
    assert result.stdout.decode().split() == ["1", "hello", "VALUE", "=", "42", "0o640"]


def test_a_run_with_collect_or_many_work_files_still_uses_the_wrapper(
    sandbox: BwrapSandbox, tmp_path: Path
) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for index in range(DIRECT_MAX_FILES + 1):
        (many / f"f{index}.txt").write_text(str(index))
    code = "import os; print(os.getppid(), len(os.listdir('.')))"
    for spec in (
        SandboxSpec(command=python(code), work_files=many, limits=SMALL),
        SandboxSpec(command=python(code), limits=SMALL, collect=("out.txt",)),
    ):
        result = sandbox.run(spec)
        parent, count = result.stdout.split()
        assert result.exit_code == 0, result
        assert parent != b"1"  # the wrapper is the parent
        assert int(count) == (DIRECT_MAX_FILES + 1 if spec.work_files else 0)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (python("import sys; sys.exit(3)"), 3),
        (python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"), 143),
        (["no-such-command-anywhere"], 127),
        (["/work/data.txt"], 126),  # exists, not executable
        (["/work"], 126),  # a folder
    ],
    ids=["exit-3", "sigterm-143", "not-found-127", "not-executable-126", "folder-126"],
)
def test_a_direct_run_reports_the_commands_exit_code(
    sandbox: BwrapSandbox, work: Path, command: list[str], expected: int
) -> None:
    result = sandbox.run(SandboxSpec(command=command, work_files=work, limits=SMALL))

    assert result.exit_code == expected, result
    assert not (result.timed_out or result.memory_exceeded or result.output_exceeded)


def test_the_command_cannot_forge_bwraps_exit_status(sandbox: BwrapSandbox) -> None:
    code = """
    import os
    for fd in range(3, 1024):
        try:
            os.write(fd, b'{ "exit-code": 0 }\\n')
        except OSError:
            pass
    raise SystemExit(5)
    """
    result = sandbox.run(SandboxSpec(command=python(code), limits=SMALL))

    assert result.exit_code == 5, result


def test_a_daemon_left_by_a_direct_run_is_killed_with_it(sandbox: BwrapSandbox) -> None:
    code = """
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(120)
        os._exit(0)
    os.wait()
    print(os.readlink("/proc/self/ns/pid"))  # the daemon's pid namespace too
    """
    mark = token()
    result = sandbox.run(SandboxSpec(command=python(code, mark), limits=SMALL))

    assert result.exit_code == 0, result
    namespace = result.stdout.decode().strip()
    assert namespace.startswith("pid:[")
    # Looked for by token and by pid namespace (whoever runs the test); the fixture then
    # also checks the slot uid when run as root.
    assert survivors(mark, namespace) == {}


def test_work_files_larger_than_the_work_dir_are_refused(
    sandbox: BwrapSandbox, tmp_path: Path
) -> None:
    big = tmp_path / "big"
    big.mkdir(mode=0o755)
    (big / "blob.bin").write_bytes(b"\0" * (2 * SMALL.work_bytes))

    with pytest.raises(SandboxUnavailable):
        sandbox.run(SandboxSpec(command=["true"], work_files=big, limits=SMALL))


def test_a_direct_run_cannot_write_past_the_work_dir_cap(sandbox: BwrapSandbox, work: Path) -> None:
    code = """
    import errno
    written = 0
    try:
        with open("fill.bin", "wb") as out:
            while True:
                out.write(b"x" * 65536)
                out.flush()
                written += 65536
    except OSError as exc:
        print(errno.errorcode[exc.errno], written)
    """
    limits = replace(SMALL, work_bytes=512 * 1024)
    result = sandbox.run(SandboxSpec(command=python(code), work_files=work, limits=limits))

    assert result.exit_code == 0, result
    error, written = result.stdout.split()
    assert error == b"ENOSPC"
    assert int(written) <= limits.work_bytes


def test_a_started_direct_sandbox_is_killed_with_everything_in_it(
    sandbox: BwrapSandbox,
) -> None:
    code = """
    import os, sys, time
    for _ in range(3):
        if os.fork() == 0:
            time.sleep(120)
    print(os.readlink("/proc/self/ns/pid"), flush=True)
    sys.stdin.read()
    """
    mark = token()
    process = sandbox.start(SandboxSpec(command=python(code, mark), limits=SMALL))
    namespace = process.stdout.readline().decode().strip()
    assert len(processes_with_token(mark)) >= 4  # the check can see them while they live
    process.kill()
    result = process.finish()

    assert result.exit_code is None
    assert "killed by the caller" in result.notes
    assert survivors(mark, namespace) == {}
