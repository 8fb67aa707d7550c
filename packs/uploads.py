"""Uploads (packs, candidate bundles): their size capped while the request body streams in,
then saved to a scratch file and named by their client's file name, made safe to show.

Django writes large uploads to temp files but does not cap their size itself; without a cap a
client could fill the disk with one request.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest

from packs.compiler.errors import Problem, more_problems_text

# Multipart boundaries and the small form fields around the files.
ENVELOPE_BYTES = 1024 * 1024


def upload_declared_too_large(request: HttpRequest, limit: int | None = None) -> bool:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return True
    return declared > _limit(limit) + ENVELOPE_BYTES


def _limit(limit: int | None) -> int:
    return settings.SECUREBENCH_MAX_UPLOAD_BYTES if limit is None else limit


class SizeCappedUploadHandler(FileUploadHandler):
    """Stops storing file data once the request's files pass the cap (a chunked or lying body)."""

    def __init__(self, request: HttpRequest | None = None, limit: int | None = None) -> None:
        super().__init__(request)
        self.total = 0
        self.limit = _limit(limit)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.total += len(raw_data)
        if self.total > self.limit:
            if self.request is not None:
                self.request.upload_too_large = True  # type: ignore[attr-defined]
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def cap_uploads(request: HttpRequest, limit: int | None = None) -> None:
    """Put the cap in front of Django's own handlers, before the body is parsed."""
    request.upload_handlers.insert(0, SizeCappedUploadHandler(request, limit))


class DigestingUploadHandler(FileUploadHandler):
    """Records each file's sha256 and size as its chunks stream past, on its way to the
    handlers that store it: ``request.upload_digests`` maps a field name to its files'
    ``(sha256, size)``, in order."""

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.digest = hashlib.sha256()
        self.size = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.digest.update(raw_data)
        self.size += len(raw_data)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        if self.request is not None:
            found = upload_digests(self.request)
            found.setdefault(self.field_name, []).append((self.digest.hexdigest(), self.size))
            self.request.upload_digests = found  # type: ignore[attr-defined]
        return None


def digest_uploads(request: HttpRequest) -> None:
    """Hash every uploaded file while it streams in (call before ``cap_uploads``, which then
    goes in front of it)."""
    request.upload_handlers.insert(0, DigestingUploadHandler(request))


def upload_digests(request: HttpRequest) -> dict[str, list[tuple[str, int]]]:
    return dict(getattr(request, "upload_digests", {}))


def upload_was_too_large(request: HttpRequest) -> bool:
    return bool(getattr(request, "upload_too_large", False))


def save_upload(upload: UploadedFile, destination: Path) -> Path:
    """Write the upload to ``destination`` chunk by chunk (never whole in memory)."""
    with destination.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return destination


def upload_display_name(upload: UploadedFile, default: str = "upload") -> str:
    """The client's file name, to show in messages; ``default`` when it has none."""
    # The client's file name is data: keep only its last component, printable, bounded.
    name = Path((upload.name or default).replace("\\", "/")).name
    return "".join(ch for ch in name if ch.isprintable())[:120] or default


def problems_context(
    problems: list[Problem] | None, unlisted: int = 0, error: str = ""
) -> dict[str, Any]:
    """What an upload page's problem list shows (packs and evaluations alike): the problems
    kept, how many there were in all, the line for those past the cap, and a form error."""
    problems = problems or []
    return {
        "problems": problems,
        "problem_total": len(problems) + unlisted,
        "more_problems": more_problems_text(unlisted) if unlisted else "",
        "error": error,
        "max_upload": settings.SECUREBENCH_MAX_UPLOAD_BYTES,
    }
