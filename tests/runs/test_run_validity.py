"""Runs against their contract (issue 13 §1): a patch or workspace candidate that breaks a rule
(read_only, allowed_to_modify, required_outputs) fails with ``contract_violation`` before any
verifier runs — even one the verifier would pass — the run is invalid with a reason per
broken rule, and pages, leaderboards, the API and ``submit_run --json`` say so."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from packs.models import ContractVersion, Task
from packs.selectors import evaluator_lanes_for_tasks
from packs.services import pack_import_folder
from runs import selectors
from runs.bundle import parse_bundle_file
from runs.candidates import verifier_candidate
from runs.models import CandidateOrigin, Evaluation, Run, TaskResult
from runs.pipeline import score_results
from runs.services import (
    LiveRefusal,
    RunMetadata,
    run_close_live,
    run_open_live,
    run_record_live_candidate,
    run_submit_bundle,
    run_submit_reference,
)
from tests.conftest import EXAMPLES, make_user, sandbox_or_skip
from verifiers.scoring import VerifierSettings, verify
from verifiers.task import Candidate as VerifierCandidate
from verifiers.verdict import Reason

pytestmark = pytest.mark.django_db

PATCH_TASK = "tiny-repo-patch/median-even-count"
VERSION_TASK = "terminal-files/version-file"


@pytest.fixture(autouse=True)
def _broker(broker: Any) -> None:
    """Submissions send Celery messages on commit; keep them in a broker of the test's own."""


def _pack_with_contract(
    tmp_path: Path, example: str, contract: dict[str, Any], *, keep: str | None = None
) -> ContractVersion:
    """The example pack as version 2, with a contract block (and only task ``keep``)."""
    folder = tmp_path / f"{example}-v2"
    shutil.copytree(EXAMPLES / example, folder)
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    manifest.update(version=2, contract=contract)
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    if keep is not None:
        rows = (folder / "tasks.jsonl").read_text().splitlines()
        kept = [row for row in rows if json.loads(row)["id"] == keep]
        (folder / "tasks.jsonl").write_text("\n".join(kept) + "\n")
    return pack_import_folder(folder=folder).contract_version


def _plain(example: str) -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / example, source_name=example).contract_version


def _gold_patch() -> str:
    for row in (EXAMPLES / "tiny-repo-patch" / "tasks.jsonl").read_text().splitlines():
        task = json.loads(row)
        if task["id"] == PATCH_TASK:
            return task["eval"]["gold_patch"]
    raise AssertionError("the example lost its gold patch")


def _submit(
    version: ContractVersion, tmp_path: Path, lines: list[dict[str, Any]], name: str = "c.jsonl"
) -> tuple[Run, Evaluation]:
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_submit_bundle(
        contract_version=version,
        bundle=parse_bundle_file(path, display_name=path.name),
        metadata=RunMetadata(agent_name="rule-breaker"),
        source="form",
    )


def _patch_line() -> dict[str, Any]:
    return {"task_id": PATCH_TASK, "candidate": {"kind": "patch", "patch": _gold_patch()}}


def _read_only_run(tmp_path: Path) -> tuple[ContractVersion, Run, TaskResult]:
    version = _pack_with_contract(
        tmp_path, "tiny-repo-patch", {"read_only": ["src/calc/stats.py", "tests/"]}, keep=PATCH_TASK
    )
    run, evaluation = _submit(version, tmp_path, [_patch_line()])
    return version, run, evaluation.results.get()


def _never_verified(result: TaskResult) -> None:
    """Final from the start: never dispatched, never claimed, and a worker handed it anyway
    (a duplicate message) claims nothing."""
    assert result.dispatched_at is None and result.attempts == 0 and result.worker == ""
    assert score_results([result.pk], worker="test") == 0
    result.refresh_from_db()
    assert result.attempts == 0 and result.sandbox_backend == ""


# --- patch candidates ------------------------------------------------------------------------


def test_a_patch_touching_a_read_only_path_fails_before_any_verifier(tmp_path) -> None:
    _, run, result = _read_only_run(tmp_path)

    assert (result.status, result.failure_reason) == ("failed", Reason.CONTRACT_VIOLATION)
    violations = result.details["contract_violations"]
    assert [(v["rule"], v["paths"]) for v in violations] == [("read_only", ["src/calc/stats.py"])]
    _never_verified(result)
    assert result.evaluation.is_done  # nothing left for a worker
    assert run.valid is False
    assert run.invalid_reasons == [f"task {PATCH_TASK} sample 0: read_only: src/calc/stats.py"]


def test_the_same_patch_would_pass_its_verifier(tmp_path) -> None:
    """The candidate refused above is the reference fix: on the version without the rule it is
    queued for the verifier, and the verifier passes it."""
    sandbox = sandbox_or_skip("bwrap")
    run, evaluation = _submit(_plain("tiny-repo-patch"), tmp_path, [_patch_line()])
    result = evaluation.results.select_related("candidate", "task").get(task__task_id=PATCH_TASK)
    assert result.status == "queued" and run.valid

    lanes = evaluator_lanes_for_tasks([result.task])[result.task_id]
    verdict = verify(lanes, verifier_candidate(result.candidate), VerifierSettings(sandbox))
    assert verdict.status == "passed", verdict


def test_a_patch_must_produce_the_required_outputs(tmp_path) -> None:
    version = _pack_with_contract(
        tmp_path, "tiny-repo-patch", {"required_outputs": ["CHANGELOG.md"]}, keep=PATCH_TASK
    )
    run, evaluation = _submit(version, tmp_path, [_patch_line()])
    result = evaluation.results.get()

    assert (result.status, result.failure_reason) == ("failed", "contract_violation")
    assert [v["rule"] for v in result.details["contract_violations"]] == ["required_outputs"]
    _never_verified(result)
    assert run.invalid_reasons == [f"task {PATCH_TASK} sample 0: required_outputs: CHANGELOG.md"]


# --- workspace candidates ----------------------------------------------------------------------


def _workspace(files: dict[str, str], sample: int) -> dict[str, Any]:
    return {
        "task_id": VERSION_TASK,
        "sample": sample,
        "candidate": {"kind": "workspace", "files": files},
    }


def test_workspace_candidates_outside_the_surfaces_or_missing_outputs_fail(tmp_path) -> None:
    contract = {"allowed_to_modify": ["build/"], "required_outputs": ["build/VERSION"]}
    version = _pack_with_contract(tmp_path, "terminal-files", contract, keep=VERSION_TASK)
    run, evaluation = _submit(
        version,
        tmp_path,
        [
            # Right answer, plus a file outside the allowed surface.
            _workspace({"build/VERSION": "1.4.2\n", "scratch.txt": "x"}, 0),
            # Inside the surface, but the required output is missing.
            _workspace({"build/VERSON": "1.4.2\n"}, 1),
            _workspace({"build/VERSION": "1.4.2\n"}, 2),
        ],
    )
    results = {r.sample: r for r in evaluation.results.all()}

    outside, missing, kept = results[0], results[1], results[2]
    assert (outside.status, outside.failure_reason) == ("failed", "contract_violation")
    assert [(v["rule"], v["paths"]) for v in outside.details["contract_violations"]] == [
        ("allowed_to_modify", ["scratch.txt"])
    ]
    assert [(v["rule"], v["paths"]) for v in missing.details["contract_violations"]] == [
        ("required_outputs", ["build/VERSION"])
    ]
    _never_verified(outside)
    _never_verified(missing)
    assert kept.status == "queued" and kept.failure_reason == ""
    assert run.valid is False
    assert run.invalid_reasons == [
        f"task {VERSION_TASK} sample 0: allowed_to_modify: scratch.txt",
        f"task {VERSION_TASK} sample 1: required_outputs: build/VERSION",
    ]


def test_a_workspace_writing_a_read_only_path_fails_though_its_checker_would_pass(
    tmp_path,
) -> None:
    sandbox = sandbox_or_skip("bwrap")
    version = _pack_with_contract(
        tmp_path, "terminal-files", {"read_only": ["NOTES.md"]}, keep=VERSION_TASK
    )
    run, evaluation = _submit(
        version, tmp_path, [_workspace({"build/VERSION": "1.4.2\n", "NOTES.md": "hi\n"}, 0)]
    )
    result = evaluation.results.select_related("candidate", "task").get()
    assert result.failure_reason == "contract_violation"
    _never_verified(result)
    # The trusted checker, run on the same candidate, would have passed it.
    lanes = evaluator_lanes_for_tasks([result.task])[result.task_id]
    verdict = verify(lanes, verifier_candidate(result.candidate), VerifierSettings(sandbox))
    assert verdict.status == "passed", verdict


def test_a_contract_without_surfaces_or_outputs_binds_nothing(tmp_path) -> None:
    version = _pack_with_contract(
        tmp_path, "terminal-files", {"budgets": {"tokens": 1000}}, keep=VERSION_TASK
    )
    run, evaluation = _submit(version, tmp_path, [_workspace({"anything/at/all": "x"}, 0)])
    assert run.valid and run.invalid_reasons == []
    assert evaluation.results.get().status == "queued"


# --- reference and live runs -----------------------------------------------------------------


def test_an_oracle_run_breaking_the_contract_is_invalid_without_naming_its_paths(
    tmp_path,
) -> None:
    version = _pack_with_contract(
        tmp_path, "tiny-repo-patch", {"read_only": ["src/calc/"]}, keep=PATCH_TASK
    )
    run, evaluation = run_submit_reference(
        contract_version=version,
        origin=CandidateOrigin.ORACLE,
        metadata=RunMetadata(agent_name="oracle"),
        source="command",
    )
    assert evaluation.results.get().failure_reason == "contract_violation"
    assert run.valid is False
    # The reference fix's files are part of its answer: the reason names the rule only.
    assert run.invalid_reasons == [f"task {PATCH_TASK} sample 0: read_only"]


def test_a_live_refusal_is_stored_on_the_candidate_and_makes_the_run_invalid(tmp_path) -> None:
    version = _pack_with_contract(
        tmp_path, "terminal-files", {"read_only": ["logs/"]}, keep=VERSION_TASK
    )
    run, _ = run_open_live(
        contract_version=version, metadata=RunMetadata(agent_name="live"), source="api"
    )
    task = Task.objects.get(contract_version=version, task_id=VERSION_TASK)
    refusal = LiveRefusal(
        reason=Reason.CONTRACT_VIOLATION,
        details={
            "contract_violations": ["logs/a.log: read-only (matches 'logs/')"],
            "changed_paths": 2,
        },
    )
    candidate = VerifierCandidate.of_workspace({"build/VERSION": "1.4.2\n"})
    result = run_record_live_candidate(run, task, candidate, usage={}, refusal=refusal)

    assert (result.status, result.failure_reason) == ("failed", "contract_violation")
    assert result.candidate.contract_violations == [
        {
            "rule": "read_only",
            "paths": ["logs/a.log"],
            "message": "logs/a.log: read-only (matches 'logs/')",
        }
    ]
    run_close_live(run)
    assert run.valid is False
    assert run.invalid_reasons == [f"task {VERSION_TASK} sample 0: read_only: logs/a.log"]


# --- pages, leaderboard, API, command line -----------------------------------------------------


def test_pages_say_which_rule_each_invalid_candidate_broke(tmp_path, client) -> None:
    _, run, result = _read_only_run(tmp_path)
    # Another user, who may see the run but not its candidates: the violated paths are the
    # candidate's own and the rule the public contract's, nothing sealed.
    client.force_login(make_user("onlooker", "viewer"))

    run_page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "Invalid run." in run_page and "not eligible for the leaderboard" in run_page
    assert f"task {PATCH_TASK} sample 0: read_only: src/calc/stats.py" in run_page

    listing = client.get(reverse("runs:list")).content.decode()
    row = listing[listing.index(f"#{run.pk}</a>") :].split("</tr>")[0]
    assert "⚠ invalid" in row and "over budget" not in row

    result_page = client.get(reverse("runs:result", args=[run.pk, result.pk])).content.decode()
    violations = result_page[result_page.index("<h2>Contract violations</h2>") :]
    assert "read_only" in violations and "src/calc/stats.py" in violations
    assert "Candidates are visible to the run's submitter only." in result_page


def test_the_leaderboard_lists_an_invalid_run_apart_with_its_reason(tmp_path, client) -> None:
    version, invalid, _ = _read_only_run(tmp_path)
    honest, evaluation = _submit(
        version, tmp_path, [{"task_id": PATCH_TASK, "candidate": {"kind": "patch", "patch": ""}}]
    )
    # A worker's verdict, written as the pipeline writes it: the honest run is scored.
    TaskResult.objects.filter(evaluation=evaluation).update(
        status="failed", failure_reason="patch_rejected", finished_at=timezone.now()
    )
    from runs.pipeline import evaluation_finish_if_done  # noqa: PLC0415

    evaluation_finish_if_done(evaluation.pk)
    Run.objects.filter(pk=honest.pk).update(agent_name="honest-agent")
    client.force_login(make_user("board-reader", "viewer"))

    body = client.get(reverse("runs:leaderboard", args=["tiny-repo-patch", 2])).content.decode()

    ranked = body[: body.index("<h2>Invalid runs")]
    apart = body[body.index("<h2>Invalid runs") : body.index("<h2>Reference runs")]
    assert "honest-agent" in ranked and "rule-breaker" not in ranked
    assert "rule-breaker" in apart and "read_only: src/calc/stats.py" in apart
    board = selectors.leaderboard(version)
    assert [row.run.pk for row in board.invalid] == [invalid.pk]


def test_the_api_and_submit_run_json_carry_validity(tmp_path) -> None:
    version, run, _ = _read_only_run(tmp_path)
    api = APIClient()
    api.force_authenticate(make_user("api-reader", "viewer"))

    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["valid"] is False
    assert body["invalid_reasons"] == [f"task {PATCH_TASK} sample 0: read_only: src/calc/stats.py"]
    listed = api.get("/api/v1/runs/").json()["results"][0]
    assert (listed["id"], listed["valid"]) == (run.pk, False)
    results = api.get(f"/api/v1/runs/{run.pk}/evaluations/1/results/").json()["results"]
    assert [(r["status"], r["failure_reason"]) for r in results] == [
        ("failed", "contract_violation")
    ]

    bundle = tmp_path / "again.jsonl"
    bundle.write_text(json.dumps(_patch_line()) + "\n")
    out = io.StringIO()
    call_command(
        "submit_run",
        *("--pack", "tiny-repo-patch", "--version", str(version.version)),
        *("--candidates", str(bundle), "--json"),
        stdout=out,
    )
    printed = json.loads(out.getvalue())
    assert printed["valid"] is False
    assert printed["invalid_reasons"] == [
        f"task {PATCH_TASK} sample 0: read_only: src/calc/stats.py"
    ]
    assert printed["results"] == [
        {
            "task_id": PATCH_TASK,
            "sample": 0,
            "status": "failed",
            "score": 0.0,
            "failure_reason": "contract_violation",
        }
    ]

    text = io.StringIO()
    call_command(
        "submit_run",
        *("--pack", "tiny-repo-patch", "--version", "2", "--candidates", str(bundle)),
        stdout=text,
    )
    assert "is invalid (scored, not ranked):" in text.getvalue()
    assert "read_only: src/calc/stats.py" in text.getvalue()


def test_the_api_bundle_upload_answers_with_validity(tmp_path) -> None:
    version = _pack_with_contract(
        tmp_path, "tiny-repo-patch", {"read_only": ["src/"]}, keep=PATCH_TASK
    )
    from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: PLC0415

    api = APIClient()
    api.force_authenticate(make_user("uploader", "submitter"))
    upload = SimpleUploadedFile("c.jsonl", (json.dumps(_patch_line()) + "\n").encode())
    answer = api.post(
        "/api/v1/runs/bundle/",
        {
            "bundle": upload,
            "pack": "tiny-repo-patch",
            "version": version.version,
            "agent_name": "uploader-agent",
        },
        format="multipart",
    )

    assert answer.status_code == 201, answer.content
    assert answer.json()["run"]["valid"] is False
    assert answer.json()["evaluation"]["valid"] is False
    assert answer.json()["evaluation"]["invalid_reasons"] == [
        f"task {PATCH_TASK} sample 0: read_only: src/calc/stats.py"
    ]
    assert answer.json()["run"]["invalid_reasons"] == answer.json()["evaluation"]["invalid_reasons"]
