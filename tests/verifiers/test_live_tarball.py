"""The tar code of live workspaces, on crafted inputs (no sandbox needed).

The host's ``sanitise_tree`` is the last check before a step's tree becomes the workspace,
and the helper's ``Extractor`` writes a snapshot into the sandbox: both must hold even for a
tar nobody honest would write (a helper spoiled by the agent, a corrupted snapshot).
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from verifiers.live.helper_io import (
    Extractor,
    Source,
    StepError,
    read_text,
    scan,
    send_tree,
)
from verifiers.live.tarball import TreeRejected, sanitise_tree, workspace_files

pytestmark = pytest.mark.database_independent


def member(
    name: str,
    kind: bytes = tarfile.REGTYPE,
    data: bytes = b"",
    mode: int = 0o644,
    link: str = "",
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def crafted(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def sanitise(data: bytes, dest: Path, **limits: int):
    limits.setdefault("max_bytes", 1 << 20)
    limits.setdefault("max_files", 100)
    return sanitise_tree(io.BytesIO(data), dest, **limits)  # type: ignore[arg-type]


def test_the_host_keeps_only_files_folders_and_links(tmp_path: Path) -> None:
    data = crafted(
        member("ok", tarfile.DIRTYPE, mode=0o755),
        member("ok/run.sh", data=b"#!/bin/sh\n", mode=0o4755),
        member("ok/plain.txt", data=b"x", mode=0o666),
        member("ok/link", tarfile.SYMTYPE, link="/etc/passwd"),
        member("ok/link/inside", data=b"through a link"),
        member("ok/pipe", tarfile.FIFOTYPE),
        member("ok/dev", tarfile.CHRTYPE),
        member("ok/hard", tarfile.LNKTYPE, link="/etc/shadow"),
        member("../escape", data=b"x"),
        member("/abs", data=b"x"),
        member("ok/bad\\name", data=b"x"),
        member("ok/plain.txt", data=b"again"),
        member("orphan/child", data=b"no parent folder"),
        member("ro", tarfile.DIRTYPE),
        member("ro/asset.csv", data=b"forged asset"),
    )
    stats = sanitise(data, tmp_path / "out.tar", blocked=("ro/asset.csv",))
    with tarfile.open(tmp_path / "out.tar") as tar:
        kept = {m.name: m for m in tar.getmembers()}
    assert sorted(kept) == ["ok", "ok/link", "ok/plain.txt", "ok/run.sh", "ro"]
    assert stat.S_IMODE(kept["ok/run.sh"].mode) == 0o755
    assert stat.S_IMODE(kept["ok/plain.txt"].mode) == 0o644
    assert kept["ok/link"].linkname == "/etc/passwd"  # data only: resolved in sandboxes alone
    assert all(m.uid == 0 and m.gid == 0 for m in kept.values())
    notes = "\n".join(stats.notes)
    for name in ("ok/pipe", "ok/dev", "ok/hard", "ok/link/inside", "orphan/child", "ro/asset.csv"):
        assert name in notes, notes
    assert "setuid" in notes and "ok/run.sh" in notes
    assert "duplicate" in notes and "'../escape'" in notes and "'/abs'" in notes
    assert (stats.files, stats.bytes) == (5, len(b"#!/bin/sh\n") + 1)


@pytest.mark.parametrize(
    ("limits", "limit"),
    [({"max_files": 3}, "workspace_files"), ({"max_bytes": 1000}, "workspace_bytes")],
)
def test_a_tree_over_a_limit_is_refused_whole(
    tmp_path: Path, limits: dict[str, int], limit: str
) -> None:
    data = crafted(*(member(f"f{i}", data=b"x" * 300) for i in range(5)))
    with pytest.raises(TreeRejected) as refused:
        sanitise(data, tmp_path / "out.tar", **limits)
    assert refused.value.limit == limit and limit in str(refused.value)
    assert not (tmp_path / "out.tar").exists()


def test_an_unreadable_tree_is_refused(tmp_path: Path) -> None:
    data = crafted(member("f", data=b"x" * 5000))[:1500]
    with pytest.raises(TreeRejected) as refused:
        sanitise(data, tmp_path / "out.tar")
    assert refused.value.limit is None
    assert not (tmp_path / "out.tar").exists()


def test_the_helper_never_extracts_through_a_link(tmp_path: Path) -> None:
    outside, root = tmp_path / "outside", tmp_path / "root"
    outside.mkdir()
    root.mkdir()
    data = crafted(
        member("link", tarfile.SYMTYPE, link=str(outside)),
        member("link/planted", data=b"through the link"),
        member("up", tarfile.SYMTYPE, link=".."),
        member("up/outside/planted2", data=b"x"),
        member("../planted3", data=b"x"),
        member("/tmp/planted4", data=b"x"),
        member("ro/asset", data=b"skipped"),
        member("dir", tarfile.DIRTYPE),
        member("dir/ok.txt", data=b"fine", mode=0o755),
    )
    extractor = Extractor(str(root), skip=(b"ro",))
    extractor.extract(Source(_fd_of(tmp_path, data)), len(data))
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "planted3").exists()
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "dir",
        "dir/ok.txt",
        "link",
        "up",
    ]
    assert os.readlink(root / "link") == str(outside)
    assert stat.S_IMODE((root / "dir" / "ok.txt").stat().st_mode) == 0o755
    assert any("link/planted" in note for note in extractor.notes)


def _fd_of(tmp_path: Path, data: bytes) -> int:
    path = tmp_path / "input.tar"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


class _Frames:
    def __init__(self) -> None:
        self.data = bytearray()

    def frame(self, kind: bytes, payload: bytes) -> None:
        assert kind == b"T"
        self.data += payload


def test_the_helpers_tree_reads_back_with_tarfile(tmp_path: Path) -> None:
    """Long names, non-ASCII names, links and modes survive the helper's own tar writer."""
    root = tmp_path / "tree"
    deep = root / ("long-folder-name-" * 8) / "ünïcode"
    deep.mkdir(parents=True)
    (deep / "file.txt").write_bytes(b"content")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / ("l" * 120)).symlink_to("t" * 150)
    frames, notes = _Frames(), []
    summary = send_tree(frames, os.fsencode(root), scan(os.fsencode(root)), notes)
    assert summary["bytes"] == len(frames.data)
    stats = sanitise(bytes(frames.data), tmp_path / "out.tar")
    files, link_notes = workspace_files(tmp_path / "out.tar")
    long_name = ("long-folder-name-" * 8) + "/ünïcode/file.txt"
    assert files[long_name].content == b"content"
    assert files["run.sh"].mode & 0o111
    assert "l" * 120 in " ".join(link_notes)
    assert stats.notes == [] and notes == []


@pytest.mark.parametrize(
    ("offset", "limit", "expected"),
    [
        (None, None, "a\nb\nc"),
        (1, None, "b\nc"),
        (0, 2, "a\nb\n"),
        (2, 5, "c"),
        (7, None, ""),
    ],
)
def test_read_file_lines(
    tmp_path: Path, offset: int | None, limit: int | None, expected: str
) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"a\nb\nc")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_text(fd, offset, limit, 1024)["text"] == expected
    finally:
        os.close(fd)


def test_read_file_refuses_binary(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"\x7fELF\0\0")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(StepError):
            read_text(fd, None, None, 1024)
    finally:
        os.close(fd)
