"""Safe pack-archive extraction (security.md §3 Archives, §6 A35-A37).

Hostile archives are built here with zipfile/tarfile; every rejection checks the
user-facing message and that nothing is left in the destination.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import stat
import struct
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

from packs.compiler import archive
from packs.compiler.archive import ArchiveError, ArchiveLimits, extract_archive, find_pack_root

SMALL = ArchiveLimits(max_unpacked_bytes=100 * 1024)
MEGABYTE_OF_ZEROS = bytes(1024 * 1024)


# --- archive builders --------------------------------------------------------------------


def make_zip(path: Path, members: dict[str, bytes | None]) -> Path:
    """None marks a folder entry."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            if data is None:
                zf.mkdir(name)
            else:
                zf.writestr(name, data)
    return path


def make_zip_with_info(path: Path, info: zipfile.ZipInfo, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(info, data)
    return path


def tar_member(
    name: str, data: bytes = b"", *, kind: bytes = tarfile.REGTYPE, mode: int = 0o644
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as tf:  # type: ignore[call-overload]
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def reject(source: Path, tmp_path: Path, **kwargs: object) -> str:
    destination = tmp_path / "out"
    with pytest.raises(ArchiveError) as excinfo:
        extract_archive(source, destination, **kwargs)  # type: ignore[arg-type]
    assert list(destination.iterdir()) == []
    return str(excinfo.value)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- good archives -----------------------------------------------------------------------


def test_it_extracts_a_zip_of_a_folder_and_finds_the_pack_inside(tmp_path: Path) -> None:
    source = make_zip(
        tmp_path / "pack.zip",
        {
            "my-pack/": None,
            "my-pack/manifest.yaml": b"id: my-pack\nversion: 1\n",
            "my-pack/tasks.jsonl": b"{}\n",
            "my-pack/assets/repo/README.md": b"hello\n",
        },
    )
    destination = tmp_path / "out"

    extract_archive(source, destination)

    root = find_pack_root(destination)
    assert root == destination / "my-pack"
    assert (root / "manifest.yaml").read_bytes() == b"id: my-pack\nversion: 1\n"
    assert (root / "assets/repo/README.md").read_text() == "hello\n"
    assert mode_of(root / "tasks.jsonl") == 0o644
    assert mode_of(root / "assets") == 0o755


def test_it_extracts_a_flat_zip_whose_root_is_the_pack(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"manifest.yaml": b"id: x\n", "tasks.jsonl": b""})
    destination = tmp_path / "out"

    extract_archive(source, destination)

    assert find_pack_root(destination) == destination
    assert sorted(p.name for p in destination.iterdir()) == ["manifest.yaml", "tasks.jsonl"]


def test_it_extracts_a_tar_gz_and_drops_exec_and_setuid_bits(tmp_path: Path) -> None:
    source = make_tar(
        tmp_path / "pack.tar.gz",
        [
            tar_member("./", kind=tarfile.DIRTYPE, mode=0o777),
            tar_member("./manifest.yaml", b"id: t\n"),
            tar_member("./bin/run.sh", b"#!/bin/sh\n", mode=0o4755),
        ],
    )
    destination = tmp_path / "out"

    extract_archive(source, destination)

    assert find_pack_root(destination) == destination
    assert (destination / "bin/run.sh").read_bytes() == b"#!/bin/sh\n"
    assert mode_of(destination / "bin/run.sh") == 0o644
    assert mode_of(destination / "bin") == 0o755


def test_it_extracts_a_plain_tar(tmp_path: Path) -> None:
    source = make_tar(
        tmp_path / "pack.tar",
        [tar_member("p/", kind=tarfile.DIRTYPE), tar_member("p/manifest.yaml", b"id: p\n")],
        mode="w",
    )
    destination = tmp_path / "out"

    extract_archive(source, destination)

    assert find_pack_root(destination) == destination / "p"


def test_it_detects_the_format_from_the_content_not_the_name(tmp_path: Path) -> None:
    source = make_tar(tmp_path / "pack.zip", [tar_member("manifest.yaml", b"id: t\n")])
    destination = tmp_path / "out"

    extract_archive(source, destination)

    assert (destination / "manifest.yaml").read_bytes() == b"id: t\n"


def test_it_creates_the_destination_when_missing(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"manifest.yaml": b""})
    destination = tmp_path / "deep" / "new" / "out"

    extract_archive(source, destination)

    assert (destination / "manifest.yaml").is_file()


def test_it_refuses_a_destination_that_already_has_files(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"manifest.yaml": b""})
    destination = tmp_path / "out"
    destination.mkdir()
    (destination / "keep.txt").write_text("mine")

    with pytest.raises(ValueError, match="must be a new empty folder"):
        extract_archive(source, destination)

    assert (destination / "keep.txt").read_text() == "mine"


# --- names -------------------------------------------------------------------------------


def test_it_rejects_a_member_that_climbs_out_of_the_root(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"ok.txt": b"x", "../../etc/x": b"pwned"})

    message = reject(source, tmp_path)

    assert message == "pack.zip: member '../../etc/x' escapes the archive root"


def test_it_rejects_a_dot_dot_component_even_when_it_stays_inside(tmp_path: Path) -> None:
    source = make_tar(tmp_path / "pack.tgz", [tar_member("a/../b.txt", b"x")])

    message = reject(source, tmp_path)

    assert message == "pack.tgz: member 'a/../b.txt' contains a '..' component"


def test_it_rejects_an_absolute_member(tmp_path: Path) -> None:
    source = make_tar(tmp_path / "pack.tar.gz", [tar_member("/etc/cron.d/x", b"* * * * * id")])

    message = reject(source, tmp_path)

    assert message == "pack.tar.gz: member '/etc/cron.d/x' is an absolute path"


def test_it_rejects_a_member_with_a_drive_letter(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"C:/Windows/x.dll": b"x"})

    message = reject(source, tmp_path)

    assert message == "pack.zip: member 'C:/Windows/x.dll' starts with a drive letter"


def test_it_rejects_a_member_with_a_backslash(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"..\\..\\evil.py": b"x"})

    message = reject(source, tmp_path)

    assert message == (
        "pack.zip: member '..\\..\\evil.py' contains a backslash; use '/' between folders"
    )


def test_it_rejects_a_member_with_a_nul_in_its_name(tmp_path: Path) -> None:
    # zipfile cuts names at NUL when writing, so patch the stored bytes afterwards.
    source = make_zip(tmp_path / "pack.zip", {"evil#.txt": b"x"})
    source.write_bytes(source.read_bytes().replace(b"evil#.txt", b"evil\x00.txt"))

    message = reject(source, tmp_path)

    assert message == (
        "pack.zip: member 'evil\\x00.txt' has a NUL or other control character in its name"
    )


def test_it_rejects_a_name_longer_than_the_limit(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"a/" * 20 + "x": b""})

    message = reject(source, tmp_path, limits=ArchiveLimits(max_path_length=30))

    assert message.endswith("has a name longer than 30 characters")


def test_the_message_uses_the_display_name_when_given(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "upload-7f3a.bin", {"../x": b""})

    message = reject(source, tmp_path, display_name="my pack.zip")

    assert message == "my pack.zip: member '../x' escapes the archive root"


# --- links and special files -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "linkname"),
    [
        (tarfile.SYMTYPE, "/"),
        (tarfile.LNKTYPE, "etc/passwd"),
        (tarfile.CHRTYPE, ""),
        (tarfile.BLKTYPE, ""),
        (tarfile.FIFOTYPE, ""),
    ],
    ids=["symlink", "hardlink", "char-device", "block-device", "fifo"],
)
def test_it_rejects_tar_links_and_special_files(tmp_path: Path, kind: bytes, linkname: str) -> None:
    info, data = tar_member("lib", kind=kind)
    info.linkname = linkname
    source = make_tar(tmp_path / "pack.tar.gz", [tar_member("ok.txt", b"x"), (info, data)])

    message = reject(source, tmp_path)

    assert message == "pack.tar.gz contains a link or special file: 'lib'"


def test_it_rejects_a_tar_symlink_followed_by_a_file_beneath_it(tmp_path: Path) -> None:
    link, _ = tar_member("lib", kind=tarfile.SYMTYPE)
    link.linkname = "/"
    source = make_tar(tmp_path / "pack.tar", [(link, b""), tar_member("lib/etc/x", b"x")], "w")

    message = reject(source, tmp_path)

    assert message == "pack.tar contains a link or special file: 'lib'"


def test_it_rejects_a_zip_entry_with_symlink_mode_bits(tmp_path: Path) -> None:
    info = zipfile.ZipInfo("settings.py")
    info.create_system = 3  # Unix, so external_attr carries a file type
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    source = make_zip_with_info(tmp_path / "pack.zip", info, b"/app/settings.py")

    message = reject(source, tmp_path)

    assert message == "pack.zip contains a link or special file: 'settings.py'"


def test_it_rejects_a_tar_sparse_file(tmp_path: Path) -> None:
    info, data = tar_member("holes.bin", kind=tarfile.GNUTYPE_SPARSE)
    source = make_tar(tmp_path / "pack.tar", [(info, data)], mode="w")

    message = reject(source, tmp_path)

    assert message == "pack.tar contains a link or special file: 'holes.bin'"


# --- counts, sizes and bombs -------------------------------------------------------------


def test_it_rejects_a_zip_with_too_many_members(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {f"f{i}.txt": b"" for i in range(4)})

    message = reject(source, tmp_path, limits=ArchiveLimits(max_members=3))

    assert message == "pack.zip has more than 3 members"


def test_it_rejects_a_tar_with_too_many_members(tmp_path: Path) -> None:
    source = make_tar(tmp_path / "pack.tgz", [tar_member(f"f{i}.txt") for i in range(4)])

    message = reject(source, tmp_path, limits=ArchiveLimits(max_members=3))

    assert message == "pack.tgz has more than 3 members"


def test_it_rejects_an_archive_file_over_the_upload_limit(tmp_path: Path) -> None:
    noise = b"".join(hashlib.sha256(bytes([i])).digest() for i in range(128))  # incompressible
    source = make_zip(tmp_path / "pack.zip", {"big.bin": noise})

    message = reject(source, tmp_path, limits=ArchiveLimits(max_archive_bytes=1024))

    assert message.startswith("pack.zip is ")
    assert message.endswith("larger than the 1 KiB limit")


def test_it_rejects_a_zip_bomb(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"manifest.yaml": b"", "zeros.bin": MEGABYTE_OF_ZEROS})
    assert source.stat().st_size < 10 * 1024

    message = reject(source, tmp_path, limits=SMALL)

    assert message == "pack.zip: member 'zeros.bin' makes the archive expand beyond 100 KiB"


def test_it_rejects_a_gzip_bomb(tmp_path: Path) -> None:
    source = make_tar(tmp_path / "pack.tar.gz", [tar_member("zeros.bin", MEGABYTE_OF_ZEROS)])
    assert source.stat().st_size < 10 * 1024

    message = reject(source, tmp_path, limits=SMALL)

    assert message == "pack.tar.gz: member 'zeros.bin' makes the archive expand beyond 100 KiB"


def test_it_rejects_many_small_members_that_add_up_past_the_limit(tmp_path: Path) -> None:
    members = {f"part{i}.bin": bytes(30 * 1024) for i in range(4)}
    source = make_zip(tmp_path / "pack.zip", members)

    message = reject(source, tmp_path, limits=SMALL)

    assert message == "pack.zip: member 'part3.bin' makes the archive expand beyond 100 KiB"


def test_real_bytes_are_counted_even_if_declared_sizes_were_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Switch off the early check on declared sizes: the running counter must still stop
    # the bomb mid-write and the partial output must be removed.
    monkeypatch.setattr(archive._Plan, "_count_declared", lambda *args: None)
    source = make_zip(tmp_path / "pack.zip", {"a.txt": b"first", "zeros.bin": MEGABYTE_OF_ZEROS})

    message = reject(source, tmp_path, limits=SMALL)

    assert message == "pack.zip: member 'zeros.bin' makes the archive expand beyond 100 KiB"


def test_it_rejects_a_tar_header_that_declares_more_than_the_limit(tmp_path: Path) -> None:
    # The header lies (claims 50 MiB, ships 1 KiB): it is refused before any data is read.
    info, data = tar_member("huge.bin", bytes(1024))
    source = make_tar(tmp_path / "pack.tar", [(info, data)], mode="w")
    raw = bytearray(source.read_bytes())
    _set_tar_size(raw, header_offset=0, size=50 * 1024 * 1024)  # short name: plain ustar
    source.write_bytes(bytes(raw))

    message = reject(source, tmp_path, limits=SMALL)

    assert message == "pack.tar: member 'huge.bin' makes the archive expand beyond 100 KiB"


def test_it_rejects_a_tar_member_with_less_data_than_declared(tmp_path: Path) -> None:
    info, data = tar_member("short.bin", bytes(1024))
    source = make_tar(tmp_path / "pack.tar", [tar_member("a.txt", b"a"), (info, data)], "w")
    raw = bytearray(source.read_bytes())
    offset = raw.index(b"short.bin")
    _set_tar_size(raw, header_offset=offset, size=90 * 1024)
    source.write_bytes(bytes(raw))

    message = reject(source, tmp_path, limits=SMALL)

    assert message.startswith("pack.tar is a damaged .tar archive")


def test_it_rejects_a_zip_member_that_understates_its_size(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"a.txt": b"first", "zeros.bin": MEGABYTE_OF_ZEROS})
    raw = bytearray(source.read_bytes())
    central = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)  # second entry
    struct.pack_into("<I", raw, central + 24, 10)  # uncompressed size: 10 bytes
    source.write_bytes(bytes(raw))

    message = reject(source, tmp_path, limits=SMALL)

    assert message.startswith("pack.zip: member 'zeros.bin' is damaged and cannot be read")


def _set_tar_size(raw: bytearray, *, header_offset: int, size: int) -> None:
    """Rewrite a ustar header's size field and fix its checksum."""
    header = raw[header_offset : header_offset + 512]
    header[124:136] = b"%011o\x00" % size
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\x00 " % sum(header)
    raw[header_offset : header_offset + 512] = header


# --- duplicates --------------------------------------------------------------------------


def test_it_rejects_a_name_that_appears_twice(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile warns about the duplicate
        source = make_zip(tmp_path / "pack.zip", {"a.txt": b"one"})
        with zipfile.ZipFile(source, "a") as zf:
            zf.writestr("a.txt", b"two")

    message = reject(source, tmp_path)

    assert message == "pack.zip: member 'a.txt' appears more than once"


def test_it_rejects_names_that_are_equal_after_normalisation(tmp_path: Path) -> None:
    source = make_tar(
        tmp_path / "pack.tgz", [tar_member("dir/a.txt", b"1"), tar_member("./dir//a.txt", b"2")]
    )

    message = reject(source, tmp_path)

    assert message == "pack.tgz: member './dir//a.txt' appears more than once"


def test_it_rejects_names_that_differ_only_in_case(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "pack.zip", {"README.md": b"1", "readme.md": b"2"})

    message = reject(source, tmp_path)

    assert message == (
        "pack.zip: member 'readme.md' clashes with 'README.md' "
        "(the names differ only in letter case or Unicode form)"
    )


def test_it_rejects_a_file_that_is_also_a_folder(tmp_path: Path) -> None:
    source = make_tar(tmp_path / "pack.tgz", [tar_member("tests", b"x"), tar_member("tests/t.py")])

    message = reject(source, tmp_path)

    assert message == "pack.tgz: member 'tests' is both a file and a folder"


# --- not an archive / damaged ------------------------------------------------------------


def test_it_rejects_a_file_that_is_not_an_archive(tmp_path: Path) -> None:
    source = tmp_path / "pack.bin"
    source.write_bytes(b"id: not-an-archive\n" * 50)

    message = reject(source, tmp_path)

    assert message == "pack.bin is not a .zip or .tar.gz archive"


def test_it_rejects_an_empty_file(tmp_path: Path) -> None:
    source = tmp_path / "pack.zip"
    source.write_bytes(b"")

    assert reject(source, tmp_path) == "pack.zip is not a .zip or .tar.gz archive"


def test_it_rejects_a_bzip2_tar_it_does_not_promise_to_read(tmp_path: Path) -> None:
    plain = make_tar(tmp_path / "plain.tar", [tar_member("a.txt", b"a")], mode="w")
    source = tmp_path / "pack.tar.bz2"
    source.write_bytes(bz2.compress(plain.read_bytes()))

    assert reject(source, tmp_path) == "pack.tar.bz2 is not a .zip or .tar.gz archive"


def test_it_rejects_a_truncated_tar_gz(tmp_path: Path) -> None:
    members = [tar_member(f"f{i}.bin", bytes(range(256)) * 40) for i in range(5)]
    source = make_tar(tmp_path / "pack.tar.gz", members)
    source.write_bytes(source.read_bytes()[:-200])

    message = reject(source, tmp_path)

    assert message.startswith("pack.tar.gz is a damaged .tar archive")


def test_it_removes_files_already_written_when_a_later_member_is_damaged(
    tmp_path: Path,
) -> None:
    source = make_zip(tmp_path / "pack.zip", {"dir/a.txt": b"first", "b.txt": b"second" * 100})
    raw = bytearray(source.read_bytes())
    central = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)
    struct.pack_into("<I", raw, central + 16, 0xDEADBEEF)  # wrong CRC-32 for b.txt
    source.write_bytes(bytes(raw))

    message = reject(source, tmp_path)

    assert message.startswith("pack.zip: member 'b.txt' is damaged and cannot be read")


# --- find_pack_root ----------------------------------------------------------------------


def test_find_pack_root_ignores_macos_metadata_next_to_the_folder(tmp_path: Path) -> None:
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / "manifest.yaml").write_text("id: p\n")
    (tmp_path / "__MACOSX").mkdir()

    assert find_pack_root(tmp_path) == tmp_path / "pack"


def test_find_pack_root_rejects_two_top_level_folders(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.yaml").write_text("id: p\n")

    with pytest.raises(ArchiveError) as excinfo:
        find_pack_root(tmp_path, display_name="pack.zip")

    assert str(excinfo.value) == (
        "pack.zip contains no manifest.yaml at its top level or in a single top-level folder"
    )


def test_find_pack_root_does_not_look_two_levels_down(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "manifest.yaml").write_text("id: p\n")

    with pytest.raises(ArchiveError, match="contains no manifest.yaml"):
        find_pack_root(tmp_path)


def test_find_pack_root_ignores_a_manifest_that_is_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "manifest.yaml").symlink_to("/etc/hostname")

    with pytest.raises(ArchiveError, match="contains no manifest.yaml"):
        find_pack_root(tmp_path)
