"""Several candidates per task (samples, issue 13 §3): what a bundle or an API batch may carry,
every refusal naming file, line and field with nothing stored, one verified result per
sample, per-task passes on the run page, and what reads one verdict per task do with them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs import comparison, samples, selectors
from runs.bundle import BundleRejected, parse_bundle_file, parse_candidate_objects
from runs.models import Candidate, Evaluation, Run, TaskResult
from runs.pipeline import score_results
from runs.services import (
    RunMetadata,
    run_add_candidates,
    run_create,
    run_submit_bundle,
)
from tests.conftest import EXAMPLES, make_user, mc_row

pytestmark = pytest.mark.django_db

MC = "arithmetic-mc"
PRODUCT = "arithmetic-mc/product"  # answer B
LINEAR = "arithmetic-mc/linear-equation"  # answer C


@pytest.fixture(autouse=True)
def _broker(broker: Any) -> None:
    """Submissions send Celery messages on commit; keep them in a broker of the test's own."""


def _mc_version() -> ContractVersion:
    return pack_import_folder(folder=EXAMPLES / MC, source_name=MC).contract_version


def _line(task_id: str, text: str, sample: Any = None) -> dict[str, Any]:
    line: dict[str, Any] = {"task_id": task_id, "candidate": {"kind": "text", "text": text}}
    if sample is not None:
        line["sample"] = sample
    return line


def _jsonl(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    path = tmp_path / "candidates.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _submit(version: ContractVersion, path: Path) -> tuple[Run, Evaluation]:
    return run_submit_bundle(
        contract_version=version,
        bundle=parse_bundle_file(path, display_name=path.name),
        metadata=RunMetadata(agent_name="sampler"),
        source="form",
    )


def _refusals(version: ContractVersion, tmp_path: Path, lines: list[dict[str, Any]]) -> list[str]:
    with pytest.raises(BundleRejected) as excinfo:
        _submit(version, _jsonl(tmp_path, lines))
    assert Run.objects.count() == 0 and Candidate.objects.count() == 0
    assert TaskResult.objects.count() == 0
    return [str(problem) for problem in excinfo.value.problems]


def _score_everything(evaluation: Evaluation) -> None:
    """What a text worker does with the evaluation's queued results, in this process."""
    queued = list(evaluation.results.filter(status="queued").values_list("pk", flat=True))
    assert score_results(queued, worker="test") == len(queued)
    evaluation.refresh_from_db()


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, "1", True, 1.5, None])
def test_a_sample_that_is_not_a_non_negative_integer_is_refused(tmp_path, value) -> None:
    version = _mc_version()
    line = {**_line(PRODUCT, "B"), "sample": value}
    assert _refusals(version, tmp_path, [line]) == [
        "candidates.jsonl line 1, sample: must be a non-negative integer (0 is the first sample)"
    ]


def test_a_sample_past_the_site_cap_is_out_of_range(tmp_path, settings) -> None:
    settings.SECUREBENCH_MAX_SAMPLES = 3
    version = _mc_version()
    lines = [_line(PRODUCT, "B", 2), _line(PRODUCT, "B", 3)]
    assert _refusals(version, tmp_path, lines) == [
        "candidates.jsonl line 2, sample: 3 is out of range: samples are numbered 0 to 2"
    ]


def test_a_duplicate_task_and_sample_names_both_lines(tmp_path) -> None:
    version = _mc_version()
    lines = [_line(PRODUCT, "B", 0), _line(PRODUCT, "A", 1), _line(PRODUCT, "C", 1)]
    assert _refusals(version, tmp_path, lines) == [
        "candidates.jsonl line 3, sample: 'arithmetic-mc/product' sample 1 already has a "
        "candidate on line 2"
    ]


def test_samples_past_the_contracts_attempts_budget_are_refused(tmp_path, make_pack) -> None:
    folder = make_pack(
        {"id": "two-tries", "version": 1, "contract": {"budgets": {"attempts": 2}}},
        [mc_row("q1", "B"), mc_row("q2", "A")],
    )
    version = pack_import_folder(folder=folder).contract_version
    lines = [_line("q1", "B", 0), _line("q1", "A", 1), _line("q2", "A"), _line("q1", "C", 2)]
    assert _refusals(version, tmp_path, lines) == [
        "candidates.jsonl line 4, sample: sample 2 of 'q1' is past the contract's budget of 2 "
        "attempts per task (samples 0 to 1)"
    ]
    # Within the budget the same bundle is stored, two samples for q1; q2's missing second
    # sample is a result of its own.
    run, evaluation = _submit(version, _jsonl(tmp_path, lines[:3]))
    assert run.candidate_count == 3 and evaluation.total == 4


def test_api_batches_take_samples_and_refuse_one_already_stored() -> None:
    version = _mc_version()
    run = run_create(contract_version=version, metadata=RunMetadata("api"), source="api")
    run_add_candidates(run, parse_candidate_objects([_line(PRODUCT, "B"), _line(PRODUCT, "A", 1)]))
    with pytest.raises(BundleRejected) as excinfo:
        run_add_candidates(
            run, parse_candidate_objects([_line(PRODUCT, "C", 2), _line(PRODUCT, "C", 1)])
        )
    assert [str(p) for p in excinfo.value.problems] == [
        "request line 2, sample: 'arithmetic-mc/product' sample 1 already has a candidate in "
        "this run"
    ]
    assert sorted(Candidate.objects.filter(run=run).values_list("sample", flat=True)) == [0, 1]


# --- results per sample --------------------------------------------------------------------


MISSING_TASKS = (
    "arithmetic-mc/decimal-to-fraction",
    "arithmetic-mc/least-common-multiple",
    "arithmetic-mc/power-remainder",
)


def _three_samples_run(tmp_path: Path) -> tuple[Run, Evaluation]:
    version = _mc_version()
    lines = [
        _line(PRODUCT, "B", 0),
        _line(PRODUCT, "A", 1),
        _line(PRODUCT, "Answer: B", 2),
        _line(LINEAR, "C"),
    ]
    return _submit(version, _jsonl(tmp_path, lines))


def test_every_sample_gets_its_own_verified_result(tmp_path) -> None:
    run, evaluation = _three_samples_run(tmp_path)

    # Three samples per task, as the run's most sampled task has: four candidates, and every
    # (task, sample) the run left out fails as missing, so each task has n = 3 for pass@k.
    assert evaluation.total == 15 == evaluation.results.count()
    _score_everything(evaluation)

    verdicts = {
        (task_id, sample): (status, reason)
        for task_id, sample, status, reason in evaluation.results.values_list(
            "task__task_id", "sample", "status", "failure_reason"
        )
    }
    assert verdicts[(PRODUCT, 0)][0] == "passed"
    assert verdicts[(PRODUCT, 1)][0] == "failed"
    assert verdicts[(PRODUCT, 2)][0] == "passed"
    assert verdicts[(LINEAR, 0)][0] == "passed"
    missing = [key for key, verdict in verdicts.items() if verdict[1] == "missing_candidate"]
    assert sorted(missing) == sorted(
        [
            *((task_id, sample) for task_id in MISSING_TASKS for sample in range(3)),
            (LINEAR, 1),
            (LINEAR, 2),
        ]
    )
    # Each result is scored with its own candidate.
    for result in evaluation.results.exclude(candidate=None).select_related("candidate"):
        assert result.candidate.sample == result.sample
    assert evaluation.is_done


def test_the_run_page_shows_samples_and_passes_out_of_n_per_task(tmp_path, client) -> None:
    run, evaluation = _three_samples_run(tmp_path)
    _score_everything(evaluation)
    client.force_login(make_user("viewer-1", "viewer"))

    body = client.get(reverse("runs:detail", args=[run.pk])).content.decode()

    assert "Passes per task" in body and "Passed / samples" in body
    per_task = body[body.index('id="per-task"') : body.index("<h2>Results</h2>")]
    product_row = per_task[per_task.index(PRODUCT) :].split("</tr>")[0]
    assert "2 / 3" in product_row
    linear_row = per_task[per_task.index(LINEAR) :].split("</tr>")[0]
    assert "1 / 3" in linear_row
    results = body[body.index("<h2>Results</h2>") :]
    assert '<th class="num">Sample</th>' in results
    rows = [row for row in results.split("<tr>") if PRODUCT in row]
    assert len(rows) == 3


def test_a_single_sample_run_page_has_no_sample_column(tmp_path, client) -> None:
    version = _mc_version()
    run, _ = _submit(version, _jsonl(tmp_path, [_line(PRODUCT, "B")]))
    client.force_login(make_user("viewer-2", "viewer"))

    body = client.get(reverse("runs:detail", args=[run.pk])).content.decode()

    assert "Passes per task" not in body and '<th class="num">Sample</th>' not in body


def test_result_pages_step_through_every_sample(tmp_path) -> None:
    run, evaluation = _three_samples_run(tmp_path)
    ordered = list(evaluation.results.order_by("position", "sample").values_list("pk", flat=True))
    for before, current, after in zip(ordered, ordered[1:], ordered[2:], strict=False):
        result = TaskResult.objects.get(pk=current)
        assert selectors.result_neighbours(result) == {"previous": before, "next": after}


def test_task_passes_count_each_tasks_samples(tmp_path) -> None:
    _, evaluation = _three_samples_run(tmp_path)
    _score_everything(evaluation)

    rows = {row["task__task_id"]: row for row in samples.task_passes(evaluation)}

    assert (rows[PRODUCT]["passed"], rows[PRODUCT]["total"]) == (2, 3)
    assert (rows[LINEAR]["passed"], rows[LINEAR]["total"]) == (1, 3)
    assert len(rows) == 5 and samples.has_samples(evaluation.run)


def test_runs_with_samples_are_compared_on_sample_zero(tmp_path) -> None:
    version = _mc_version()
    # A: sample 0 wrong, sample 1 right. B: one right sample.
    a, evaluation_a = _submit(
        version, _jsonl(tmp_path, [_line(PRODUCT, "A", 0), _line(PRODUCT, "B", 1)])
    )
    b, evaluation_b = _submit(version, _jsonl(tmp_path, [_line(PRODUCT, "B")]))
    _score_everything(evaluation_a)
    _score_everything(evaluation_b)

    compared = comparison.comparison(a, b)

    assert compared.counts == {"both": 0, "only_a": 0, "only_b": 1, "neither": 4}
    pairs = comparison.verdict_pairs(evaluation_a, evaluation_b)
    assert pairs.count() == version.task_count  # one row per task, not per sample


def test_each_sample_is_held_to_the_per_task_budget(tmp_path, make_pack) -> None:
    folder = make_pack(
        {"id": "budgeted", "version": 1, "contract": {"budgets": {"tokens": 200_000}}},
        [mc_row("q1", "B"), mc_row("q2", "A")],
    )
    version = pack_import_folder(folder=folder).contract_version
    lines = [{**_line("q1", "B", n), "usage": {"input_tokens": 150_000}} for n in range(3)]
    run, _ = _submit(version, _jsonl(tmp_path, lines))
    # 450,000 tokens for one task, in three attempts of 150,000: each within the per-task
    # budget, and the run within 200,000 × 2 tasks × 3 samples.
    assert not run.over_budget and run.valid

    over = [{**lines[0], "usage": {"input_tokens": 250_000}}, lines[1]]
    run, _ = _submit(version, _jsonl(tmp_path, over))
    assert run.budget_notes == ["task q1 used 250,000 tokens, over the budget of 200,000 per task"]
    assert not run.valid
    assert run.invalid_reasons == [
        "over budget: task q1 used 250,000 tokens, over the budget of 200,000 per task"
    ]
    sample_one = [{**lines[1], "usage": {"input_tokens": 250_000}}]
    run, _ = _submit(version, _jsonl(tmp_path, sample_one))
    assert run.budget_notes == [
        "task q1 sample 1 used 250,000 tokens, over the budget of 200,000 per task"
    ]


# --- API and command line ------------------------------------------------------------------


def test_api_results_and_submit_run_json_carry_the_sample(tmp_path) -> None:
    run, evaluation = _three_samples_run(tmp_path)
    _score_everything(evaluation)
    api = APIClient()
    api.force_authenticate(make_user("viewer-3", "viewer"))

    page = api.get(f"/api/v1/runs/{run.pk}/evaluations/1/results/").json()
    product = [(r["sample"], r["status"]) for r in page["results"] if r["task_id"] == PRODUCT]
    assert product == [(0, "passed"), (1, "failed"), (2, "passed")]

    out = io.StringIO()
    bundle = _jsonl(tmp_path, [_line(PRODUCT, "B", 0), _line(PRODUCT, "A", 1)])
    call_command("submit_run", "--pack", MC, "--candidates", str(bundle), "--json", stdout=out)
    printed = json.loads(out.getvalue())
    assert printed["valid"] is True and printed["invalid_reasons"] == []
    rows = [(r["task_id"], r["sample"]) for r in printed["results"]]
    assert rows[:2] == [(PRODUCT, 0), (PRODUCT, 1)]
    assert len(rows) == 10  # two samples of each of five tasks: four have no candidate


def test_submit_run_text_output_still_prints_its_summary(tmp_path) -> None:
    out = io.StringIO()
    _mc_version()
    bundle = _jsonl(tmp_path, [_line(PRODUCT, "B", 0), _line(PRODUCT, "A", 1)])
    call_command("submit_run", "--pack", MC, "--candidates", str(bundle), stdout=out)
    assert out.getvalue().startswith("run ") and "evaluation 1: queued" in out.getvalue()
