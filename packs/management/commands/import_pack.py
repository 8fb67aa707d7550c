"""python manage.py import_pack PATH [--json] — import a pack folder or archive."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from packs.services import (
    ImportOutcome,
    UploadRejected,
    pack_import_archive,
    pack_import_folder,
    rejecting_bad_input,
)


class Command(BaseCommand):
    help = "Validate, compile and store a benchmark pack (a folder or a .zip/.tar.gz archive)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="pack folder or archive")
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args: object, path: Path, json: bool = False, **options: object) -> None:
        try:
            outcome = import_path(path)
        except UploadRejected as rejected:
            if json:
                # The problems on stdout for a script to read; the failure still exits 1.
                self.stdout.write(rejected_json(rejected))
                raise CommandError(f"{path}: pack not stored") from rejected
            raise CommandError(f"{path}: {not_stored_heading(rejected)}\n{rejected}") from rejected
        if json:
            self.stdout.write(outcome_json(outcome))
        else:
            self.stdout.write(outcome.message)


def import_path(path: Path) -> ImportOutcome:
    if not path.exists():
        raise CommandError(f"{path}: no such file or folder")
    with rejecting_bad_input():
        if path.is_dir():
            return pack_import_folder(folder=path.resolve(), source_name=path.name)
        return pack_import_archive(archive=path, display_name=path.name)


def outcome_json(outcome: ImportOutcome) -> str:
    cv = outcome.contract_version
    return json.dumps(
        {
            "pack": cv.pack.pack_id,
            "version": cv.version,
            "digest": cv.digest,
            "tasks": cv.task_count,
            "created": outcome.created,
        }
    )


def rejected_json(rejected: UploadRejected) -> str:
    return json.dumps({"stored": False, **rejected.as_json()})


def not_stored_heading(rejected: UploadRejected) -> str:
    """'pack not stored, 3 problems:' — then one line per problem."""
    count = rejected.total
    return f"pack not stored, {count} problem{'' if count == 1 else 's'}:"
