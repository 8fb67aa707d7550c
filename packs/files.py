"""Public asset downloads, shared by the page link and the API (both check browse access
first). Only the public root is reachable: sealed files have no URL at all."""

from __future__ import annotations

import mimetypes

from django.core.files.storage import storages
from django.http import FileResponse

from packs import selectors
from packs.models import ContractVersion


def public_file_response(contract_version: ContractVersion, path: str) -> FileResponse:
    pack_file = selectors.public_file_get(contract_version, path)
    handle = storages["pack_public"].open(pack_file.blob_name, "rb")
    filename = path.rsplit("/", 1)[-1]
    # Always a download, never rendered inline: pack files are not trusted HTML.
    response = FileResponse(handle, as_attachment=True, filename=filename)
    response["Content-Type"] = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    if response["Content-Type"].startswith(("text/html", "image/svg", "application/xhtml")):
        response["Content-Type"] = "application/octet-stream"
    return response
