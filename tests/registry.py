"""A container registry of our own on loopback, for the image-pull tests: no registry is
reachable from these machines, so the tests publish a local image to this one and let the
Docker engine pull it back under another name, as it would from any registry (the engine
speaks plain HTTP to 127.0.0.0/8 registries without configuration).

It serves the read side of the distribution API (`/v2/`, manifests and blobs, GET and HEAD)
from an image written by `docker save`: the layers as they are (uncompressed tar, an OCI
media type the engine accepts), the config, and an OCI manifest naming them. A delay
on manifests makes a pull take a while (the engine asks for the manifest whatever it
already has), so that a test can watch a verification wait for it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"


@dataclass
class LocalRegistry:
    folder: Path
    blobs: dict[str, Path] = field(default_factory=dict)
    manifests: dict[tuple[str, str], bytes] = field(default_factory=dict)
    manifest_delay: float = 0.0
    requests: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def host(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.server_address[1]}"

    def publish(self, local_image: str, repository: str, tag: str) -> str:
        """Serve ``local_image`` as ``<host>/<repository>:<tag>``; returns that reference."""
        archive = self.folder / f"{tag}.tar"
        subprocess.run(["docker", "save", local_image, "-o", str(archive)], check=True)
        unpacked = self.folder / tag
        with tarfile.open(archive) as saved:
            saved.extractall(unpacked, filter="data")
        archive.unlink()
        (entry,) = json.loads((unpacked / "manifest.json").read_text())
        config = self._blob(unpacked / entry["Config"])
        layers = [self._blob(unpacked / layer) for layer in entry["Layers"]]
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, **config},
            "layers": [{"mediaType": LAYER_TYPE, **layer} for layer in layers],
        }
        data = json.dumps(manifest).encode()
        # Asked for by tag first, then by the digest the first answer named.
        self.manifests[(repository, tag)] = data
        self.manifests[(repository, f"sha256:{hashlib.sha256(data).hexdigest()}")] = data
        return f"{self.host}/{repository}:{tag}"

    def _blob(self, path: Path) -> dict[str, object]:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        name = f"sha256:{digest.hexdigest()}"
        self.blobs[name] = path
        return {"digest": name, "size": path.stat().st_size}

    def start(self) -> None:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:  # noqa: N802 - the http.server interface
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

            def _answer(self, *, body: bool) -> None:
                registry.requests.append(f"{self.command} {self.path}")
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts == ["v2"]:
                    return self._send(200, b"{}", "application/json", body)
                if len(parts) >= 4 and parts[0] == "v2" and parts[-2] == "manifests":
                    manifest = registry.manifests.get(("/".join(parts[1:-2]), parts[-1]))
                    if manifest is None:
                        return self._send(404, b'{"errors":[]}', "application/json", body)
                    time.sleep(registry.manifest_delay)
                    return self._send(200, manifest, MANIFEST_TYPE, body, digest=manifest)
                if len(parts) >= 4 and parts[0] == "v2" and parts[-2] == "blobs":
                    path = registry.blobs.get(parts[-1])
                    if path is None:
                        return self._send(404, b'{"errors":[]}', "application/json", body)
                    return self._send_file(path, body)
                return self._send(404, b"{}", "application/json", body)

            def _send(
                self, status: int, data: bytes, kind: str, body: bool, digest: bytes | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                if digest is not None:
                    name = f"sha256:{hashlib.sha256(digest).hexdigest()}"
                    self.send_header("Docker-Content-Digest", name)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def _send_file(self, path: Path, body: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(path.stat().st_size))
                self.end_headers()
                if body:
                    with path.open("rb") as handle:
                        while chunk := handle.read(1 << 20):
                            self.wfile.write(chunk)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def remove_image(reference: str) -> None:
    subprocess.run(["docker", "image", "rm", "-f", reference], capture_output=True, check=False)


def pack_with_image(folder: Path, image: str) -> Path:
    """examples/python-functions, its tasks naming ``image`` instead of python:3.12-slim."""
    from tests.conftest import EXAMPLES  # noqa: PLC0415 - conftest imports Django settings

    shutil.copytree(EXAMPLES / "python-functions", folder)
    manifest = folder / "manifest.yaml"
    manifest.write_text(manifest.read_text().replace("python:3.12-slim", image))
    return folder
