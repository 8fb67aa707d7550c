"""Workload 1: pack import at scale.

Two generated multiple-choice packs (bench.common.mc_rows: a 200-400 character question, four
choices, a letter answer, source metadata): one the size of MMLU's test split (14,042 rows)
and one of 100,000 rows.

* 14,042 rows over real HTTP: the archive (.zip) is POSTed to ``/api/v1/uploads/`` of the
  site `make run` starts; timed from the POST until the API answered 201 and then the version
  page and the first task's page both answered 200 to a signed-in browser session ("stored
  and browsable"). Each repetition uploads a new ``version`` of the pack (same rows), so every
  one is a real import. Target: median <= 10 s.
* 100,000 rows, server side: ``manage.py import_pack ARCHIVE --json`` (.tar.gz) in a process
  of its own against a fresh, migrated data folder; its peak RSS (the child's own rusage, from
  wait4) and wall time, process start included. Target: peak RSS <= 500 MB.
* The same command on the 14,042-row archive, for comparison with the HTTP figure.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import requests

from bench.common import (
    REPO_ROOT,
    Figure,
    at_most,
    django_env,
    main,
    manage,
    mc_manifest,
    mc_rows,
    median,
)
from bench.site import Site

WORKLOAD = "1 pack import"
FULL = {"small": 14_042, "large": 100_000, "uploads": 5, "commands": 3}
SMOKE = {"small": 200, "large": 1_000, "uploads": 1, "commands": 1}
TARGET_SECONDS = 10.0
TARGET_MB = 500.0
SMALL_ID = "import-mc-small"
LARGE_ID = "import-mc-large"


# --- packs -----------------------------------------------------------------------------------


def write_tasks(path: Path, rows: int, *, pack_id: str) -> Path:
    """The generated rows as tasks.jsonl, once: every version of a pack shares them."""
    with path.open("w", encoding="utf-8") as out:
        for row in mc_rows(rows, pack_id=pack_id):
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
    return path


def zip_pack(folder: Path, tasks: Path, *, pack_id: str, version: int) -> Path:
    path = folder / f"{pack_id}-v{version}.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.yaml", mc_manifest(pack_id, version))
        archive.write(tasks, "tasks.jsonl")
    return path


def tar_pack(folder: Path, tasks: Path, *, pack_id: str, version: int) -> Path:
    path = folder / f"{pack_id}-v{version}.tar.gz"
    manifest = mc_manifest(pack_id, version).encode()
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("manifest.yaml")
        info.size = len(manifest)
        archive.addfile(info, io.BytesIO(manifest))
        archive.add(tasks, "tasks.jsonl", recursive=False)
    return path


# --- over HTTP -------------------------------------------------------------------------------


def upload_until_browsable(
    site: Site, api: requests.Session, browser: requests.Session, archive: Path, *, version: int
) -> tuple[float, float]:
    """Seconds from the POST to its 201, and to the version and task pages answering 200."""
    started = time.perf_counter()
    with archive.open("rb") as handle:
        answer = api.post(
            f"{site.url}/api/v1/uploads/", files={"archive": (archive.name, handle)}, timeout=600
        )
    if answer.status_code != 201:
        raise RuntimeError(f"upload refused: {answer.status_code} {answer.text[:500]}")
    stored = time.perf_counter() - started
    version_url = f"{site.url}/packs/{SMALL_ID}/v{version}/"
    for url in (version_url, f"{version_url}tasks/{SMALL_ID}/0"):
        page = browser.get(url, timeout=120)
        if page.status_code != 200:
            raise RuntimeError(f"{url} answered {page.status_code}")
    return stored, time.perf_counter() - started


def http_figures(folder: Path, tasks: Path, rows: int, uploads: int) -> list[Figure]:
    archives = [
        zip_pack(folder, tasks, pack_id=SMALL_ID, version=version)
        for version in range(1, uploads + 1)
    ]
    stored: list[float] = []
    browsable: list[float] = []
    with Site() as site:
        api = requests.Session()
        api.headers["Authorization"] = f"Token {site.admin_token()}"
        browser = site.admin_session()
        for version, archive in enumerate(archives, start=1):
            to_201, to_pages = upload_until_browsable(site, api, browser, archive, version=version)
            stored.append(to_201)
            browsable.append(to_pages)
    size = archives[0].stat().st_size / 1e6
    note = f"API upload of a {size:.1f} MB .zip to `make run`; median of {uploads}"
    value = median(browsable)
    return [
        Figure(WORKLOAD, f"{rows:,} rows: upload -> 201", median(stored), "s", note=note),
        Figure(
            WORKLOAD,
            f"{rows:,} rows: upload -> browsable",
            value,
            "s",
            target=f"<= {TARGET_SECONDS:.0f} s",
            met=at_most(value, TARGET_SECONDS),
            note="until the version page and a task page answer 200",
        ),
    ]


# --- the management command ------------------------------------------------------------------


def command_import(archive: Path, rows: int) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `manage.py import_pack` in a fresh data folder."""
    with tempfile.TemporaryDirectory(prefix="securebench-import-") as scratch:
        return _command_import(Path(scratch) / "data", archive, rows)


def _command_import(data_dir: Path, archive: Path, rows: int) -> tuple[float, float]:
    data_dir.mkdir()
    manage(data_dir, "migrate", "--noinput")
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "manage.py", "import_pack", str(archive), "--json"],
            cwd=REPO_ROOT,
            env=django_env(data_dir),
            stdout=stdout,
            stderr=stderr,
        )
        # wait4 gives this child's own peak RSS (RUSAGE_CHILDREN would include migrate's).
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"import_pack failed: {stderr.read().decode()[-2000:]}")
        outcome = json.loads(stdout.read())
    if outcome["tasks"] != rows or not outcome["created"]:
        raise RuntimeError(f"unexpected import outcome: {outcome}")
    return seconds, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def command_figures(
    label: str, archive: Path, rows: int, times: int, *, memory_target: bool
) -> list[Figure]:
    runs = [command_import(archive, rows) for _ in range(times)]
    seconds = median([s for s, _ in runs])
    peak = max(mb for _, mb in runs)
    kind = "".join(archive.suffixes).lstrip(".")
    note = f"`manage.py import_pack` of a .{kind}, incl. process start" + (
        f"; median of {times}" if times > 1 else ""
    )
    return [
        Figure(WORKLOAD, f"{label}: command wall", seconds, "s", note=note),
        Figure(
            WORKLOAD,
            f"{label}: command peak RSS",
            peak,
            "MB",
            target=f"<= {TARGET_MB:.0f} MB" if memory_target else "",
            met=at_most(peak, TARGET_MB) if memory_target else None,
            note="the child's own ru_maxrss; max over repetitions",
        ),
        Figure(WORKLOAD, f"{label}: command rate", rows / seconds, "rows/s"),
    ]


# --- the workload ----------------------------------------------------------------------------


def run(*, smoke: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="securebench-import-packs-") as scratch:
        return measure(Path(scratch), SMOKE if smoke else FULL)


def measure(folder: Path, sizes: dict[str, int]) -> list[Figure]:
    small, large = sizes["small"], sizes["large"]
    small_tasks = write_tasks(folder / "small.jsonl", small, pack_id=SMALL_ID)
    large_tasks = write_tasks(folder / "large.jsonl", large, pack_id=LARGE_ID)
    figures = http_figures(folder, small_tasks, small, sizes["uploads"])
    small_zip = folder / f"{SMALL_ID}-v1.zip"
    large_tar = tar_pack(folder, large_tasks, pack_id=LARGE_ID, version=1)
    figures += command_figures(
        f"{small:,} rows", small_zip, small, sizes["commands"], memory_target=False
    )
    figures += command_figures(
        f"{large:,} rows", large_tar, large, sizes["commands"], memory_target=True
    )
    return figures


if __name__ == "__main__":
    main(run)
