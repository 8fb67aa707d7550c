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


def test_a_huge_pax_header_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # The member's own size is 2 bytes; its pax header holds 1 MiB (a few KiB gzipped),
    # which tarfile reads whole into memory. Only the cap on the decompressed stream sees it.
    info = tarfile.TarInfo("manifest.yaml")
    info.size = 2
    info.pax_headers = {"comment": "x" * (1024 * 1024)}
    source = tmp_path / "pack.tar.gz"
    with tarfile.open(source, "w:gz", format=tarfile.PAX_FORMAT) as archive:
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
