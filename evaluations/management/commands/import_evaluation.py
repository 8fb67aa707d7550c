"""python manage.py import_evaluation PATH [--json] — store an evaluation (folder or archive)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.services import (
    EvaluationImport,
    evaluation_import_archive,
    evaluation_import_folder,
)
from packs.services import UploadRejected


class Command(BaseCommand):
    help = (
        "Check and store an evaluation that scores runs: a folder or .zip/.tar.gz archive "
        "with evaluation.yaml, program/ and sealed/."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="evaluation folder or archive")
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args: object, path: Path, json: bool = False, **options: object) -> None:
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder")
        try:
            outcome = _import(path)
        except UploadRejected as rejected:
            if json:
                self.stdout.write(_dumps({"stored": False, **rejected.as_json()}))
                raise CommandError(f"{path}: evaluation not stored") from rejected
            count = rejected.total
            heading = f"evaluation not stored, {count} problem{'' if count == 1 else 's'}:"
            raise CommandError(f"{path}: {heading}\n{rejected}") from rejected
        self.stdout.write(_dumps(outcome_json(outcome)) if json else outcome.message)


def _import(path: Path) -> EvaluationImport:
    if path.is_dir():
        return evaluation_import_folder(folder=path.resolve(), source_name=path.name)
    return evaluation_import_archive(archive=path, display_name=path.name)


def outcome_json(outcome: EvaluationImport) -> dict[str, object]:
    definition = outcome.definition
    return {
        "evaluation": definition.key,
        "digest": definition.digest,
        "scope": definition.scope,
        "metrics": [metric["name"] for metric in definition.manifest["metrics"]],
        "created": outcome.created,
    }


def _dumps(value: object) -> str:
    return json.dumps(value)
