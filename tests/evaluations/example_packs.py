"""Support for the example-pack tests: the two example packs and their evaluations imported
into the site, artifact runs submitted, and evaluations scored through the pipeline's own
calls (tests.evaluations.test_scoring.score) in a sandbox of the backend under test.

The expected numbers come from the examples' own plain-Python calculators
(tests/examples), never from the evaluation programs' code.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from evaluations.services import evaluation_import_folder
from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.bundle import ParsedBundle, parse_candidate_objects
from runs.models import Evaluation, Run, RunSource
from runs.services import RunMetadata, evaluation_create, run_submit_bundle
from tests.evaluations.test_scoring import score
from tests.examples.harness import EVALUATIONS, EXAMPLES

W2S_EVALUATIONS = ("w2s-exact-match", "w2s-exact-match-v2", "w2s-pgr")


def import_pack(name: str) -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / name).contract_version


def import_evaluation(name: str, *, root: Path | None = None, marker: str = "") -> None:
    """One example evaluation as its authors upload it. With ``marker``: a copy whose sealed
    data and program each carry a unique string (sealed/marker.txt, a comment in every
    program file), so that a leak of either can be searched for."""
    folder = EVALUATIONS / name
    if marker:
        assert root is not None
        folder = root / name
        shutil.copytree(EVALUATIONS / name, folder)
        (folder / "sealed").mkdir(exist_ok=True)
        (folder / "sealed" / "marker.txt").write_text(sealed_marker(marker) + "\n")
        for program in (folder / "program").glob("*.py"):
            text = program.read_text()
            program.write_text(text + f"\n# {program_marker(marker)}\n")
    evaluation_import_folder(folder=folder)


def sealed_marker(marker: str) -> str:
    return f"SEALED-{marker}"


def program_marker(marker: str) -> str:
    return f"PROGRAM-{marker}"


def artifact_line(task_id: str, files: dict[str, str]) -> dict[str, Any]:
    return {"task_id": task_id, "candidate": {"kind": "artifact", "files": files}}


def submit_artifacts(version: ContractVersion, files: dict[str, dict[str, str]], name: str) -> Run:
    """A bundle run: each task id's artifact, as `run_submit_bundle` takes it."""
    objects = [artifact_line(task_id, task_files) for task_id, task_files in files.items()]
    run, _ = run_submit_bundle(
        contract_version=version,
        bundle=ParsedBundle(lines=parse_candidate_objects(objects)),
        metadata=RunMetadata(agent_name=name),
        source=RunSource.API,
    )
    return run


def rescore(run: Run, key: str) -> Evaluation:
    """A new evaluation of the run by ``key``, scored to the end."""
    evaluation = score(evaluation_create(run, evaluator=key))
    assert evaluation.is_done, (key, evaluation.status)
    return evaluation


def metric_value(evaluation: Evaluation, name: str) -> float:
    return evaluation.metrics[name]["value"]
