"""Tar headers that tarfile would parse slowly or out of step, refused before it reads them.

tarfile (before Python 3.12.6) searches pax data with a regex that backtracks over runs of
digits (CVE-2024-6232): one 200 KiB pax header kept an upload busy for minutes. Our guard
walks the header blocks first; honest pax and GNU archives with long paths still import.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from packs.compiler.archive import ArchiveError, extract_archive
from packs.models import Pack
from tests.conftest import make_user

LONG_DIR = "deeply/" + "/".join(f"folder-{i:02d}-with-a-long-name" for i in range(6))
LONG_PATH = f"{LONG_DIR}/notes.txt"  # well over tar's 100-byte name field


def _member(name: str, data: bytes, pax: dict[str, str] | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.pax_headers = pax or {}
    return info


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], fmt: int, mode: str) -> Path:
    with tarfile.open(path, mode, format=fmt) as archive:  # type: ignore[call-overload]
        for info, data in members:
            archive.addfile(info, io.BytesIO(data))
    return path


def _reject(source: Path, tmp_path: Path) -> str:
    destination = tmp_path / "out"
    with pytest.raises(ArchiveError) as excinfo:
        extract_archive(source, destination)
    assert list(destination.iterdir()) == []
    return str(excinfo.value)


def _set_size_field(raw: bytearray, header_offset: int, field: bytes) -> None:
    """Write a raw size field and a correct checksum, so only the size is wrong."""
    raw[header_offset + 124 : header_offset + 136] = field.ljust(12, b"\0")
    raw[header_offset + 148 : header_offset + 156] = b" " * 8
    checksum = sum(raw[header_offset : header_offset + 512])
    raw[header_offset + 148 : header_offset + 156] = b"%06o\0 " % checksum


# --- through the upload form ------------------------------------------------------------


@pytest.mark.django_db
def test_an_upload_with_a_200_kib_digit_pax_header_is_refused_at_once(client, tmp_path) -> None:
    client.force_login(make_user("author", "pack maintainer"))
    digits = _member("manifest.yaml", b"id: x\n", pax={"comment": "1" * (200 * 1024)})
    source = _tar(tmp_path / "pack.tar.gz", [(digits, b"id: x\n")], tarfile.PAX_FORMAT, "w:gz")

    response = client.post(
        reverse("pack-upload"), {"archive": SimpleUploadedFile("pack.tar.gz", source.read_bytes())}
    )

    body = response.content.decode()
    assert response.status_code == 400
    assert "The pack was not stored." in body
    assert (
        escape(
            "pack.tar.gz: member 1 has a pax extended header of 200 KiB, "
            "larger than the 64 KiB limit for such headers"
        )
        in body
    )
    assert not Pack.objects.exists()


@pytest.mark.django_db
def test_an_honest_pax_tar_gz_from_gnu_tar_imports_through_the_form(
    client, tmp_path, make_pack
) -> None:
    client.force_login(make_user("author", "pack maintainer"))
    folder = make_pack(files={LONG_PATH: "long paths need pax records\n"})
    source = tmp_path / "pack.tar.gz"
    subprocess.run(["tar", "--format=pax", "-czf", str(source), "-C", str(folder), "."], check=True)

    response = client.post(
        reverse("pack-upload"), {"archive": SimpleUploadedFile("pack.tar.gz", source.read_bytes())}
    )

    assert response.status_code == 302, response.content.decode()
    assert Pack.objects.filter(pack_id="demo").exists()


# --- the guard on its own ---------------------------------------------------------------


def test_a_plain_tar_starting_with_a_digit_pax_header_is_refused(tmp_path: Path) -> None:
    # A plain tar is recognised by its first header block only: opening it with tarfile
    # to find out would already parse the hostile pax data.
    digits = _member("manifest.yaml", b"", pax={"comment": "7" * (200 * 1024)})
    source = _tar(tmp_path / "pack.tar", [(digits, b"")], tarfile.PAX_FORMAT, "w")

    assert _reject(source, tmp_path) == (
        "pack.tar: member 1 has a pax extended header of 200 KiB, "
        "larger than the 64 KiB limit for such headers"
    )


def test_a_plain_tar_is_recognised_without_letting_tarfile_parse_its_first_header(
    tmp_path: Path,
) -> None:
    # A record of length 0 makes tarfile give up on the whole file ("not an archive");
    # the guard must get to the oversized header first and say what is wrong with it.
    pax_data = b"0 a=b\n" + b"x" * (70 * 1024)
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type = tarfile.XHDTYPE
    pax.size = len(pax_data)
    manifest = _member("manifest.yaml", b"id: x\n")
    source = tmp_path / "pack.tar"
    source.write_bytes(
        pax.tobuf(tarfile.USTAR_FORMAT)
        + pax_data.ljust(71 * 1024, b"\0")
        + manifest.tobuf(tarfile.USTAR_FORMAT)
        + b"id: x\n".ljust(512, b"\0")
        + bytes(1024)
    )

    assert _reject(source, tmp_path) == (
        "pack.tar: member 1 has a pax extended header of 70.01 KiB, "
        "larger than the 64 KiB limit for such headers"
    )


def test_a_one_mib_gnu_long_name_is_refused(tmp_path: Path) -> None:
    members = [(_member("a.txt", b"a"), b"a"), (_member("b" * (1024 * 1024), b"b"), b"b")]
    source = _tar(tmp_path / "pack.tar.gz", members, tarfile.GNU_FORMAT, "w:gz")

    assert _reject(source, tmp_path) == (
        "pack.tar.gz: member 2 has a GNU long name header of 1 MiB, "
        "larger than the 64 KiB limit for such headers"
    )


def test_a_pax_header_under_the_size_cap_with_a_long_digit_run_is_refused(
    tmp_path: Path,
) -> None:
    # 5,000 digits fit in 64 KiB; tarfile's regex would still spend n*n/2 steps on them.
    digits = _member("a.txt", b"a", pax={"comment": "9" * 5000})
    source = _tar(tmp_path / "pack.tar.gz", [(digits, b"a")], tarfile.PAX_FORMAT, "w:gz")

    assert _reject(source, tmp_path) == (
        "pack.tar.gz: member 1 has a pax header with a run of more than 32 digits"
    )


def test_a_non_numeric_size_field_is_refused_not_read_as_the_end(tmp_path: Path) -> None:
    # tarfile takes a header it cannot parse past the first member as the end of the
    # archive, so the members after it would silently disappear.
    members = [(_member(name, b"x"), b"x") for name in ("a.txt", "b.txt", "c.txt")]
    source = _tar(tmp_path / "pack.tar", members, tarfile.USTAR_FORMAT, "w")
    raw = bytearray(source.read_bytes())
    _set_size_field(raw, raw.index(b"b.txt"), b"00000000x01")
    source.write_bytes(bytes(raw))

    assert _reject(source, tmp_path) == (
        "pack.tar: member 2 has a tar header with an invalid size field"
    )


def test_a_pax_size_record_that_would_move_the_next_header_is_refused(tmp_path: Path) -> None:
    # With "size=0" tarfile reads the next header from a.txt's data, where the guard saw
    # only data: anything could hide there. Honest archives write it only past 8 GiB.
    hidden_info = _member("hidden.txt", b"boo!\n")
    hidden = hidden_info.tobuf(tarfile.USTAR_FORMAT) + b"boo!\n".ljust(512, b"\0")
    carrier = _member("a.txt", hidden, pax={"size": "0"})
    source = _tar(tmp_path / "pack.tar.gz", [(carrier, hidden)], tarfile.PAX_FORMAT, "w:gz")

    assert _reject(source, tmp_path) == (
        "pack.tar.gz: member 1 has a pax header that overrides its size"
    )


# --- honest archives --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT])
def test_long_paths_from_python_tarfile_extract(tmp_path: Path, fmt: int) -> None:
    members = [
        (_member("manifest.yaml", b"id: x\n"), b"id: x\n"),
        (_member(LONG_PATH, b"long\n", pax={"comment": "made by tarfile"}), b"long\n"),
        (_member("data/2024-06-01T12:00:00.123456789.json", b"{}"), b"{}"),
    ]
    source = _tar(tmp_path / "pack.tar.gz", members, fmt, "w:gz")

    extract_archive(source, tmp_path / "out")

    assert (tmp_path / "out" / LONG_PATH).read_bytes() == b"long\n"
    assert (tmp_path / "out" / "data/2024-06-01T12:00:00.123456789.json").read_bytes() == b"{}"


@pytest.mark.parametrize("fmt", ["pax", "gnu"])
def test_long_paths_from_gnu_tar_extract(tmp_path: Path, fmt: str) -> None:
    folder = tmp_path / "src"
    (folder / LONG_DIR).mkdir(parents=True)
    (folder / LONG_PATH).write_text("from GNU tar\n")
    (folder / "manifest.yaml").write_text("id: x\n")
    source = tmp_path / "pack.tar"
    subprocess.run(
        ["tar", f"--format={fmt}", "-cf", str(source), "-C", str(folder), "."], check=True
    )

    extract_archive(source, tmp_path / "out")

    assert (tmp_path / "out" / LONG_PATH).read_text() == "from GNU tar\n"
    assert (tmp_path / "out" / "manifest.yaml").read_text() == "id: x\n"
