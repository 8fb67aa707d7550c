"""Where pack files live: the data folder (the default) or an S3-compatible bucket.

Settings call ``pack_storages`` once with what the environment says. Public and sealed files
always get storages of their own (two folders, or two prefixes that may sit in two buckets),
so a credential or a policy can cover one without the other. No backend here is ever asked
for a URL: downloads stream through the site's access checks, and workers read through their
local cache (``packs.blobs``), so a bucket's address never reaches a browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

STORAGE_KINDS = ("local", "s3")
S3_BACKEND = "storages.backends.s3.S3Storage"
LOCAL_BACKEND = "django.core.files.storage.FileSystemStorage"


@dataclass(frozen=True)
class S3Location:
    """A bucket and the prefixes of both roots; credentials come from boto3's own chain
    (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, an instance role, a profile)."""

    bucket: str
    sealed_bucket: str
    prefix: str
    endpoint_url: str | None
    region: str | None


def pack_storages(kind: str, local_root: Path, s3: S3Location | None) -> dict[str, dict]:
    """The ``pack_public`` and ``pack_sealed`` entries of STORAGES."""
    if kind not in STORAGE_KINDS:
        raise ImproperlyConfigured(
            f"SECUREBENCH_STORAGE must be one of {', '.join(STORAGE_KINDS)}, got {kind!r}"
        )
    if kind == "local":
        return {
            name: {"BACKEND": LOCAL_BACKEND, "OPTIONS": {"location": folder, "base_url": None}}
            for name, folder in (
                ("pack_public", local_root / "public"),
                ("pack_sealed", local_root / "sealed"),
            )
        }
    if s3 is None or not s3.bucket:
        raise ImproperlyConfigured("SECUREBENCH_STORAGE=s3 needs SECUREBENCH_S3_BUCKET")
    return {
        "pack_public": {"BACKEND": S3_BACKEND, "OPTIONS": s3_options(s3, s3.bucket, "public")},
        "pack_sealed": {
            "BACKEND": S3_BACKEND,
            "OPTIONS": s3_options(s3, s3.sealed_bucket or s3.bucket, "sealed"),
        },
    }


def s3_options(s3: S3Location, bucket: str, root: str) -> dict[str, Any]:
    prefix = "/".join(part for part in (s3.prefix.strip("/"), root) if part)
    options: dict[str, Any] = {
        "bucket_name": bucket,
        "location": prefix,
        # Private objects: no ACL is granted, and a URL (never asked for) would be signed.
        "default_acl": None,
        "querystring_auth": True,
        # Blobs are named by their sha256: the same name is the same content.
        "file_overwrite": True,
        "signature_version": "s3v4",
    }
    if s3.endpoint_url:
        # Self-hosted stores (MinIO, SeaweedFS, Ceph) answer on one host name: path style.
        options["endpoint_url"] = s3.endpoint_url
        options["addressing_style"] = "path"
    if s3.region:
        options["region_name"] = s3.region
    return options
