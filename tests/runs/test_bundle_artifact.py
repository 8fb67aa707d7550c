"""Artifact candidates on bundle lines: ``{"kind": "artifact", "files": {PATH: TEXT |
{"base64": STR}}}``, stored like a workspace, and every hostile path refused by line and field
before anything is stored."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runs.bundle import BundleLimits, BundleRejected, parse_bundle_file
from runs.bundle_artifact import MAX_ARTIFACT_FILES
from runs.candidates import stored_files, verifier_candidate
from runs.models import Candidate as StoredCandidate
from verifiers.task import Candidate, WorkspaceFile

pytestmark = pytest.mark.database_independent

LIMITS = BundleLimits(max_bundle_bytes=1 << 22, max_candidate_bytes=4096, max_line_bytes=1 << 21)


def line(candidate: dict[str, Any], task_id: str = "art/t1") -> str:
    return json.dumps({"task_id": task_id, "candidate": {"kind": "artifact", **candidate}}) + "\n"


def bundle_of(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("".join(lines))
    return path


def problems_of(path: Path, limits: BundleLimits = LIMITS) -> list[str]:
    with pytest.raises(BundleRejected) as caught:
        parse_bundle_file(path, display_name=path.name, limits=limits)
    return [str(problem) for problem in caught.value.problems]


def test_an_artifact_line_becomes_an_artifact_candidate_stored_like_a_workspace(tmp_path):
    raw = b"\x00\x01\xfe"
    files = {
        "predictions.jsonl": '{"id": 1}\n',
        "ckpt/w.bin": {"base64": base64.b64encode(raw).decode()},
    }

    parsed = parse_bundle_file(
        bundle_of(tmp_path, line({"files": files})), display_name="c.jsonl", limits=LIMITS
    )

    candidate = parsed.lines[0].candidate
    assert candidate == Candidate.of_artifact(
        {"predictions.jsonl": '{"id": 1}\n', "ckpt/w.bin": raw}
    )
    stored = stored_files(candidate.files)
    assert stored["ckpt/w.bin"] == {"content_b64": "AAH+", "mode": 0o644}
    row = StoredCandidate(kind="artifact", files=stored)
    assert verifier_candidate(row) == candidate


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../escape.txt", "escapes the workspace"),
        ("out/../../escape.txt", "escapes the workspace"),
        ("/etc/passwd", "absolute path"),
        ("/dev/null", "absolute path"),
        ("dev/null", "names a system folder"),
        ("CON", "device name"),
        ("out/nul.txt", "device name"),
        ("a\\b", "backslash or control character"),
        ("a\tb", "backslash or control character"),
    ],
)
def test_a_hostile_path_is_refused_by_line_and_field(tmp_path, path, message):
    bundle = bundle_of(
        tmp_path, line({"files": {"ok.txt": "fine"}}), line({"files": {path: "x"}}, "art/t2")
    )

    problems = problems_of(bundle)

    assert len(problems) == 1, problems
    assert problems[0].startswith(f"c.jsonl line 2, candidate.files.{path}: ")
    assert message in problems[0]


def test_a_nul_in_a_path_is_refused_with_its_line(tmp_path):
    problems = problems_of(bundle_of(tmp_path, line({"files": {"a\u0000b": "x"}})))

    assert problems == [
        "c.jsonl line 1: contains a NUL character (\\u0000), which text cannot hold"
    ]


def test_a_name_may_not_be_a_file_and_a_folder_at_once(tmp_path):
    problems = problems_of(bundle_of(tmp_path, line({"files": {"out": "x", "out/a.json": "{}"}})))

    assert problems == [
        "c.jsonl line 1, candidate.files.out/a.json: is under out, which is a file too"
    ]


def test_more_than_the_file_cap_is_refused_before_anything_is_decoded(tmp_path):
    files = {f"f{index}": "" for index in range(MAX_ARTIFACT_FILES + 1)}

    problems = problems_of(bundle_of(tmp_path, line({"files": files})))

    assert problems == [
        f"c.jsonl line 1, candidate.files: holds {MAX_ARTIFACT_FILES + 1} files,"
        f" more than {MAX_ARTIFACT_FILES}"
    ]


def test_the_file_cap_itself_is_allowed(tmp_path):
    files = {f"f{index}": "" for index in range(MAX_ARTIFACT_FILES)}

    parsed = parse_bundle_file(
        bundle_of(tmp_path, line({"files": files})), display_name="c", limits=LIMITS
    )

    assert len(parsed.lines[0].candidate.files) == MAX_ARTIFACT_FILES


def test_an_artifact_over_the_candidate_size_cap_is_refused(tmp_path):
    one_file = {"big.bin": {"base64": base64.b64encode(b"x" * 4097).decode()}}
    two_files = {"a.txt": "a" * 3000, "b.txt": "b" * 3000}

    for files in (one_file, two_files):
        problems = problems_of(bundle_of(tmp_path, line({"files": files})))

        assert problems == ["c.jsonl line 1, candidate.files: add up to more than 4 KiB"], problems


def test_a_file_entry_is_text_or_base64_only(tmp_path):
    files = {"a.bin": {"base64": "not base64!"}, "b.txt": {"content": "x"}, "c.txt": 3}

    problems = problems_of(bundle_of(tmp_path, line({"files": files})))

    assert problems == [
        "c.jsonl line 1, candidate.files.a.bin.base64: is not valid base64",
        'c.jsonl line 1, candidate.files.b.txt: must be the file\'s text or {"base64": "..."}',
        'c.jsonl line 1, candidate.files.c.txt: must be the file\'s text or {"base64": "..."}',
    ]


def test_an_artifact_has_one_source_and_no_stray_keys(tmp_path):
    problems = problems_of(
        bundle_of(tmp_path, line({"files": {}, "text": "x"}), line({}, "art/t2"))
    )

    assert problems == [
        "c.jsonl line 1, candidate.text: is not a key of an artifact candidate",
        "c.jsonl line 2, candidate: an artifact candidate has exactly one of files, archive,"
        " directory",
    ]


# --- artifacts as archives inside a bundle archive ------------------------------------------------


# A tar archive is at least 10 KiB (its blocks): room for one.
ARCHIVE_LIMITS = BundleLimits(
    max_bundle_bytes=1 << 22, max_candidate_bytes=1 << 16, max_line_bytes=1 << 21
)


def bundle_zip(tmp_path: Path, inner: bytes, name: str = "artifact.tar") -> Path:
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("candidates.jsonl", line({"archive": name}))
        archive.writestr(name, inner)
    return path


def tar_with(*members: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return buffer.getvalue()


def test_an_artifact_archive_is_read_into_files(tmp_path):
    member = tarfile.TarInfo("out/predictions.jsonl")
    member.size = 3
    bundle = bundle_zip(tmp_path, tar_with(member, data=b"{}\n"))

    parsed = parse_bundle_file(bundle, display_name="bundle.zip", limits=ARCHIVE_LIMITS)

    assert parsed.lines[0].candidate == Candidate(
        kind="artifact", files={"out/predictions.jsonl": WorkspaceFile(b"{}\n")}
    )


@pytest.mark.parametrize(
    "kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE]
)
def test_an_artifact_archive_may_not_carry_links_or_devices(tmp_path, kind):
    member = tarfile.TarInfo("out/evil")
    member.type = kind
    member.linkname = "/etc/passwd"

    problems = problems_of(bundle_zip(tmp_path, tar_with(member)), ARCHIVE_LIMITS)

    assert problems == [
        "bundle.zip:candidates.jsonl line 1, candidate.archive: artifact.tar contains a link or"
        " special file: 'out/evil'"
    ]


def test_an_artifact_archive_is_held_to_the_artifact_path_rules(tmp_path):
    member = tarfile.TarInfo("dev/sda")
    member.size = 1

    problems = problems_of(bundle_zip(tmp_path, tar_with(member, data=b"x")), ARCHIVE_LIMITS)

    assert problems == [
        "bundle.zip:candidates.jsonl line 1, candidate.archive: path 'dev/sda' names a system"
        " folder (dev/)"
    ]
