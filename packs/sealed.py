"""Privileged reads: one sealed value, or one sealed file, at a time.

Only ``runs.privileged.SealedReader`` calls these, after its privilege check and with an
audit record per read. tests/security/test_sealed_reads.py proves it by mechanism: it
records every statement on the sealed-value table and every open under the sealed file root
while every page, partial and API endpoint is requested, and attributes each to its caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.files.storage import storages
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from packs.models import ContractVersion, FileRoot, PackFile, Resource, Task
from verifiers.lanes import PUBLIC

# Longest file shown in a page; larger files are cut with a note (the size stays known).
MAX_FILE_DISPLAY_BYTES = 512 * 1024


@dataclass(frozen=True)
class SealedResource:
    name: str
    lane: str
    kind: str
    value: Any
    files: list[PackFile]


def sealed_resource(task: Task, name: str) -> SealedResource:
    """The value of one non-public resource of a task, with the sealed files it links."""
    resource = get_object_or_404(
        Resource.objects.select_related("sealed").exclude(lane=PUBLIC), task=task, name=name
    )
    files = [
        link.pack_file
        for link in resource.files.select_related("pack_file").order_by("pack_file__path")
    ]
    return SealedResource(resource.name, resource.lane, resource.kind, resource.sealed.value, files)


def sealed_files(contract_version: ContractVersion) -> QuerySet[PackFile]:
    """Every file under the version's eval root (referenced by a task or not), no content."""
    return contract_version.files.filter(root=FileRoot.EVAL).order_by("path")


@dataclass(frozen=True)
class SealedFileContent:
    pack_file: PackFile
    data: bytes
    truncated: bool


def sealed_file(contract_version: ContractVersion, path: str) -> SealedFileContent:
    pack_file = get_object_or_404(contract_version.files, root=FileRoot.EVAL, path=path)
    with storages["pack_sealed"].open(pack_file.blob_name, "rb") as handle:
        data = handle.read(MAX_FILE_DISPLAY_BYTES + 1)
    return SealedFileContent(
        pack_file, data[:MAX_FILE_DISPLAY_BYTES], len(data) > MAX_FILE_DISPLAY_BYTES
    )
