"""Archive bombs and disguises the member checks alone would not see.

A tar stream can hide megabytes in what is not a member's data (a pax extended header is read
into memory whole before the member it describes is even seen), and a zip member can be
encrypted. Both must be refused with a clear reason, before anything is written.
"""

from __future__ import annotations

import io
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from packs.compiler.archive import ArchiveError, ArchiveLimits, extract_archive

# Room for 100 KiB of files in at most 10 members: the decompressed tar stream may then hold
# only those bytes plus a few headers per member.
SMALL = ArchiveLimits(max_unpacked_bytes=100 * 1024, max_members=10)


def test_pax_headers_past_the_stream_cap_are_refused_before_they_are_read(
    tmp_path: Path,
) -> None:
    # Each member's own size is 2 bytes; each pax header holds 60 KiB (under the cap on one
    # such header, tests/security/test_tar_header_bombs.py), which tarfile reads whole into
    # memory. Eight of them pass no per-header check: only the cap on the decompressed stream
    # sees what they add up to.
    source = tmp_path / "pack.tar.gz"
    with tarfile.open(source, "w:gz", format=tarfile.PAX_FORMAT) as archive:
        for number in range(8):
            info = tarfile.TarInfo(f"file-{number}.yaml")
            info.size = 2
            info.pax_headers = {"comment": "x" * (60 * 1024)}
            archive.addfile(info, io.BytesIO(b"{}"))
    assert source.stat().st_size < 64 * 1024
    destination = tmp_path / "out"

    with pytest.raises(ArchiveError) as excinfo:
        extract_archive(source, destination, limits=SMALL)

    assert str(excinfo.value) == "pack.tar.gz expands beyond 100 KiB"
    assert list(destination.iterdir()) == []


def _encrypted_zip(path: Path) -> Path:
    """A zip whose member says it is encrypted (bit 0 of its flags, in both headers)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("manifest.yaml", "id: x\n")
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.index(signature) + offset
        (flags,) = struct.unpack_from("<H", data, at)
        struct.pack_into("<H", data, at, flags | 0x1)
    path.write_bytes(bytes(data))
    return path


def test_an_encrypted_zip_member_is_refused_by_name(tmp_path: Path) -> None:
    source = _encrypted_zip(tmp_path / "pack.zip")
    destination = tmp_path / "out"

    with pytest.raises(ArchiveError) as excinfo:
        extract_archive(source, destination)

    assert str(excinfo.value) == "pack.zip: member 'manifest.yaml' is encrypted"
    assert list(destination.iterdir()) == []
