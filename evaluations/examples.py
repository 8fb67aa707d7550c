"""The example evaluations (``examples/evaluations/``), imported with the example packs on a
new site (``setup_site``), so a newcomer's pack pages list evaluations that score them."""

from __future__ import annotations

from pathlib import Path

from evaluations.manifest import MANIFEST_NAME
from evaluations.services import evaluation_import_folder
from packs.services import UploadRejected

EXAMPLES_SUBFOLDER = "evaluations"


def import_example_evaluations(examples: Path) -> list[str]:
    """Each example evaluation stored (or its problems), as lines for setup_site to print."""
    folder = examples / EXAMPLES_SUBFOLDER
    if not folder.is_dir():
        return []
    lines: list[str] = []
    for candidate in sorted(p for p in folder.iterdir() if (p / MANIFEST_NAME).is_file()):
        try:
            outcome = evaluation_import_folder(folder=candidate)
        except UploadRejected as rejected:
            lines.append(f"  example evaluation {candidate.name} not imported:\n{rejected}")
            continue
        lines.append(f"  example: {outcome.message}")
    return lines
