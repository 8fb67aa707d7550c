"""The site with its pack files in an S3-compatible bucket (SECUREBENCH_STORAGE=s3).

The leak suites' world (packs of every family with marked sealed values and files, uploaded
through the form, scored by the real pipeline code) is built once more with its storages on a
real S3 server (SeaweedFS), public and sealed files in buckets of their own. Then: the files
are in the buckets and nowhere on the web host's disk; downloads, the agent bundle and
debug-mode reveals still show the right bytes; and no page, partial, download or API answer
of any role names a bucket, the store's address or a signed URL.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.urls import reverse

from packs.models import FileRoot, PackFile, blob_name
from tests.security.leak_crawl import crawl, schema_get_urls
from tests.security.leak_markers import LABELS, labels_in, leaks_in
from tests.security.leak_world import LeakWorld, leak_world_fixture, pack_files
from tests.storage.s3_server import BucketPair, S3Server, new_buckets

# The bucket is the subject; the PostgreSQL pass covers storage through test_multi_host.py.
pytestmark = [pytest.mark.django_db, pytest.mark.embedded_only]
REASON = "storage test: sealed files from the bucket"


@pytest.fixture(scope="module")
def buckets(s3_server: S3Server) -> BucketPair:
    return new_buckets(s3_server)


@pytest.fixture(scope="module")
def leak_world(
    django_db_setup, django_db_blocker, tmp_path_factory, buckets: BucketPair
) -> Iterator[LeakWorld]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in buckets.server.credentials_env.items():
            patch.setenv(name, value)
        root = tmp_path_factory.mktemp("s3-world")
        yield from leak_world_fixture(django_db_blocker, root, buckets.storages())


@pytest.fixture(autouse=True)
def isolated_data_dir(leak_world):
    cache.clear()
    yield leak_world.root
    cache.clear()


def forbidden_strings(buckets: BucketPair) -> list[str]:
    """What would tell a reader where the files are, or hand them a way in."""
    host = buckets.server.endpoint.removeprefix("http://")
    return [buckets.public, buckets.sealed, host, "X-Amz-", "AWSAccessKeyId", "amazonaws"]


def named(bodies: dict[str, str], buckets: BucketPair) -> list[str]:
    return [
        f"{where}: {text}"
        for where, body in bodies.items()
        for text in forbidden_strings(buckets)
        if text in body
    ]


def test_pack_files_are_in_their_buckets_and_not_on_the_web_hosts_disk(leak_world, buckets):
    stored = list(PackFile.objects.filter(contract_version__pack__pack_id="leaky"))
    assert {f.root for f in stored} == {FileRoot.PUBLIC, FileRoot.EVAL}
    public_keys = set(buckets.server.keys(buckets.public))
    sealed_keys = set(buckets.server.keys(buckets.sealed))
    for pack_file in stored:
        public_key = f"site/public/{blob_name(pack_file.sha256)}"
        sealed_key = f"site/sealed/{blob_name(pack_file.sha256)}"
        if pack_file.root == FileRoot.PUBLIC:
            assert public_key in public_keys, pack_file.path
        else:
            assert sealed_key in sealed_keys, pack_file.path
            assert public_key not in public_keys, f"{pack_file.path} is in the public bucket"
    assert not (leak_world.root / "pack-files").exists()


def test_downloads_bundle_and_reveals_work_and_no_answer_names_the_bucket(leak_world, buckets):
    reviewer = leak_world.client_for("reviewer")
    response = reviewer.post("/debug-mode/", {"reason": REASON, "next": "/packs/"})
    assert response.status_code == 302

    seen = crawl(reviewer, schema_get_urls(leak_world), expect_markers=True)

    assert all(status < 500 for status in seen.statuses.values())
    # Every marked sealed value and file showed, read from the sealed bucket.
    shown = html.unescape(re.sub(r"<[^>]+>", "", "\n".join(seen.bodies.values())))
    assert set(LABELS) <= labels_in(shown)
    assert any("/privileged/" in url and "/file/" in url for url in seen.statuses)
    assert not named(seen.bodies, buckets)


def test_a_public_file_and_the_agent_bundle_stream_the_stored_bytes(leak_world, buckets):
    client = leak_world.client_for("submitter")
    version = leak_world.contract_version
    expected = pack_files()["assets/readme.txt"].encode()

    readme = version.files.get(root=FileRoot.PUBLIC, path__endswith="readme.txt").path
    download = client.get(reverse("packs:public-file", args=["leaky", version.version, readme]))
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == expected

    bundle = client.get(reverse("api-agent-bundle", args=["leaky", version.version]))
    assert bundle.status_code == 200, bundle.content[:500]
    with zipfile.ZipFile(io.BytesIO(b"".join(bundle.streaming_content))) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    assert expected in members.values()
    assert not any(leaks_in(data.decode("utf-8", "replace")) for data in members.values())


@pytest.mark.parametrize("role", ["anonymous", "submitter"])
def test_no_role_is_shown_a_bucket_or_a_sealed_value(leak_world, buckets, role):
    seen = crawl(leak_world.client_for(role), schema_get_urls(leak_world), expect_markers=True)

    assert not named(seen.bodies, buckets)
    assert not {url: found for url, body in seen.bodies.items() if (found := leaks_in(body))}
