"""What a candidate can write to, on both backends: the root filesystem answers EROFS, every
writable mount is a declared, capped tmpfs (or explained in ``sandbox_probes``), and filling
every writable place a candidate could find stores no more than the declared caps.

EROFS is the only acceptable answer on the root filesystem: a permission refusal (EACCES)
would hide a root mounted read-write, so the probe writes where permissions would allow it
(folders of the root filesystem the sandbox uid owns or anyone may write, e.g. /var/tmp).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from tests.security.sandbox_backends import SMALL, WORKDIR, on_gvisor
from tests.security.sandbox_probes import (
    FILL_PROBE,
    MOUNTS_PROBE,
    mount_problems,
    python,
)
from verifiers.sandbox import MiB, Mount, Sandbox, SandboxResult, SandboxSpec

# Different caps for the two tmpfs mounts, so a swapped or dropped size shows.
CAPS = replace(SMALL, work_bytes=8 * MiB, tmp_bytes=4 * MiB, wall_seconds=60.0)


def report(result: SandboxResult) -> dict:
    assert result.exit_code == 0, result
    return json.loads(result.stdout)


# Folders of the root filesystem (its own device, no other mount) that permissions would let
# the sandbox uid write into; a write in each must fail with EROFS.
ROOT_PROBE = """
import errno, json, os, stat, uuid
root_dev = os.stat("/").st_dev
uid = os.getuid()
open_by_permission = []
for folder, dirs, _files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.lstat(os.path.join(folder, d)).st_dev == root_dev]
    info = os.stat(folder)
    if info.st_uid == uid or info.st_mode & stat.S_IWOTH:
        open_by_permission.append(folder)
answers = {}
for folder in open_by_permission:
    path = os.path.join(folder, "sb-root-" + uuid.uuid4().hex)
    try:
        with open(path, "w") as fh:
            fh.write("x")
        answers[folder] = "written"
    except OSError as exc:
        answers[folder] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(answers))
"""


def test_the_root_filesystem_answers_erofs_where_permissions_would_allow_a_write(
    backend: Sandbox,
) -> None:
    answers = report(backend.run(SandboxSpec(command=python(ROOT_PROBE), limits=CAPS)))

    # Something to try: bwrap's root is owned by the sandbox uid; images have /var/tmp (1777).
    assert answers, "no folder of the root filesystem is open by permission: nothing proved"
    assert answers == dict.fromkeys(answers, "EROFS")


@pytest.mark.parametrize("writable_mount", [False, True], ids=["plain", "writable-mount"])
def test_every_writable_mount_is_a_declared_capped_tmpfs(
    backend: Sandbox, host_dir: Path, writable_mount: bool
) -> None:
    mounts = (Mount(host_dir, "/out", read_only=False),) if writable_mount else ()
    spec = SandboxSpec(command=python(MOUNTS_PROBE), mounts=mounts, limits=CAPS)
    probe = report(backend.run(spec))

    declared = ("/out",) if writable_mount else ()
    assert mount_problems(probe, CAPS, WORKDIR, declared) == []
    assert probe["uid"] != 0


def test_filling_every_writable_place_stores_no_more_than_the_declared_caps(
    backend: Sandbox,
) -> None:
    # A place stops at the sum of the caps plus 1 MiB: enough to show a breach, and a
    # broken sandbox cannot fill the host.
    ceiling = CAPS.work_bytes + CAPS.tmp_bytes + 1 * MiB
    fill = SandboxSpec(command=python(FILL_PROBE, str(ceiling)), limits=CAPS)
    places = report(backend.run(fill))

    by_device: dict[int, int] = defaultdict(int)
    for outcome in places.values():
        by_device[outcome["dev"]] += outcome["written"]
    work_dev, tmp_dev = places[WORKDIR]["dev"], places["/tmp"]["dev"]
    # The probe reached both caps (so it can tell), byte for byte, and nowhere else took data.
    assert by_device[work_dev] == CAPS.work_bytes, places
    assert by_device[tmp_dev] == CAPS.tmp_bytes, places
    elsewhere = {
        place: outcome
        for place, outcome in places.items()
        if outcome["dev"] not in (work_dev, tmp_dev) and outcome["written"]
    }
    assert elsewhere == {}
    assert sum(by_device.values()) == CAPS.work_bytes + CAPS.tmp_bytes
    # The usual suspects were tried, wherever they exist.
    assert {"/", "/tmp", WORKDIR} <= set(places)


def test_posix_message_queues_cannot_be_created(backend: Sandbox) -> None:
    # Queues live in kernel memory, outside every tmpfs cap: RLIMIT_MSGQUEUE=0 refuses them.
    code = """
    import ctypes, errno, os
    librt = ctypes.CDLL("librt.so.1", use_errno=True)
    fd = librt.mq_open(b"/sb-queue", os.O_CREAT | os.O_RDWR | os.O_NONBLOCK, 0o600, None)
    print(fd, errno.errorcode.get(ctypes.get_errno(), "none"))
    sent = librt.mq_send(fd, b"x" * 64, 64, 0) if fd >= 0 else -1
    print(sent, errno.errorcode.get(ctypes.get_errno(), "none") if sent else "stored")
    """
    result = backend.run(SandboxSpec(command=python(code), limits=CAPS))

    assert result.exit_code == 0, result
    opened, stored = result.stdout.decode().splitlines()
    if on_gvisor(backend):
        # gVisor's own kernel (a process in the container's memory cgroup) ignores the
        # limit but stores no message at all: a queue there holds nothing.
        assert stored.split()[0] == "-1", result.stdout
        return
    assert opened.split() == ["-1", "EMFILE"]
