"""The local cache every process reads pack files through (packs/blobs.py): a blob is checked
against its sha256 on every use, a bad copy is fetched again and never handed out, bytes from
storage that are not what the name says are refused, and the cache keeps to its cap."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.core.files.storage import storages

from packs.blobs import BlobUnavailable, blob_cache, file_digest
from packs.models import ContractVersion, FileRoot, PackFile
from packs.selectors import evaluator_lanes_for_tasks
from packs.services import pack_import_folder
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def version() -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / "terminal-files").contract_version


def sealed_file(version: ContractVersion) -> PackFile:
    return version.files.filter(root=FileRoot.EVAL).order_by("path").first()


def task_sources(version: ContractVersion) -> dict[str, bytes]:
    """What a verifier is handed: every task file's bytes, by its path."""
    tasks = list(version.tasks.all())
    return {
        item.path: item.source.read_bytes()
        for lanes in evaluator_lanes_for_tasks(tasks).values()
        for files in lanes.files.values()
        for item in files
    }


def stored_bytes(pack_file: PackFile) -> bytes:
    storage = storages["pack_public" if pack_file.root == FileRoot.PUBLIC else "pack_sealed"]
    with storage.open(pack_file.blob_name, "rb") as handle:
        return handle.read()


def test_a_verifier_gets_every_task_file_from_the_cache_with_its_stored_bytes(version) -> None:
    sources = task_sources(version)
    stored = {f.path: stored_bytes(f) for f in version.files.all()}
    assert sources and all(sources[path] == stored[path] for path in sources)
    cache_root = blob_cache().root
    for lanes in evaluator_lanes_for_tasks(list(version.tasks.all())).values():
        for files in lanes.files.values():
            for item in files:
                assert item.source.is_relative_to(cache_root)
                assert item.source.name == file_digest(item.source)


def test_a_corrupted_cached_blob_is_fetched_again_never_used(version) -> None:
    pack_file = sealed_file(version)
    cached = blob_cache().local_path(pack_file.root, pack_file.sha256)
    good = cached.read_bytes()
    cached.write_bytes(b"def test_anything():\n    assert True  # planted\n")

    sources = task_sources(version)

    assert b"planted" not in b"".join(sources.values())
    assert cached.read_bytes() == good == stored_bytes(pack_file)


def test_bytes_from_storage_that_do_not_match_the_name_are_refused(version) -> None:
    pack_file = sealed_file(version)
    storage = storages["pack_sealed"]
    Path(storage.path(pack_file.blob_name)).write_bytes(b"tampered in the bucket")

    with pytest.raises(BlobUnavailable, match="other bytes"):
        blob_cache().local_path(pack_file.root, pack_file.sha256)
    folder = blob_cache().root / pack_file.sha256[:2]
    assert not any(folder.iterdir()), "nothing half-fetched is left in the cache"


def test_a_blob_missing_from_storage_is_named(version) -> None:
    with pytest.raises(BlobUnavailable, match="missing"):
        blob_cache().local_path(FileRoot.EVAL, "0" * 64)


def test_past_its_cap_the_cache_drops_the_least_recently_used_blobs(version, settings) -> None:
    files = list(version.files.order_by("path"))
    assert len(files) >= 3
    cache = blob_cache()
    paths = [cache.local_path(f.root, f.sha256) for f in files]
    # Used long ago, oldest first; the last one is in use right now.
    for age, path in enumerate(paths[:-1]):
        stamp = time.time() - 3600 * (len(paths) - age)
        os.utime(path, (stamp, stamp))
    keep = sum(path.stat().st_size for path in paths[1:])
    settings.SECUREBENCH_BLOB_CACHE_BYTES = keep

    removed = blob_cache().evict()

    assert removed == [paths[0]]
    assert all(path.exists() for path in paths[1:])
    # Even with no room at all, a blob used a moment ago stays.
    settings.SECUREBENCH_BLOB_CACHE_BYTES = 0
    blob_cache().evict()
    assert paths[-1].exists() and not any(path.exists() for path in paths[:-1])
