"""Runs scored by uploaded evaluations, through the pipeline's own scoring calls, in real
sandboxes of both backends: the numbers are the program's, checked against a plain-Python
count; a second version re-scores without touching the first; a broken program is the
evaluation's error, never the candidate's failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluations.services import evaluation_import_folder
from packs.services import pack_import_folder
from runs import pipeline
from runs.bundle import ParsedBundle, parse_candidate_objects
from runs.evaluators import EvaluatorNotAllowed
from runs.models import AuditEvent, Evaluation, ResultStatus, RunSource, TaskResult
from runs.services import RunMetadata, evaluation_create, run_submit_bundle
from tests.conftest import make_user, mc_row
from tests.evaluations.test_import_evaluation import declaration, write_evaluation

pytestmark = pytest.mark.django_db

ANSWERS = {"q1": "B", "q2": "C", "q3": "A", "q4": "B"}
GIVEN = {"q1": "B", "q2": "B", "q3": "A", "q4": "D"}

# Task scope: 1.0 when the candidate's text is the sealed answer.
TASK_PROGRAM = """
import json, pathlib
data = json.load(open('/evaluation/input.json'))
answers = json.load(open('/evaluation/sealed/answers.json'))
task = data['tasks'][0]
text = (pathlib.Path(task['candidate']) / 'candidate.txt').read_text().strip()
print(json.dumps({'metrics': {'accuracy': float(text == answers[task['task_id']])}}))
"""
# Version 2 counts an answer as right when it is a neighbouring letter too (a changed rule).
TASK_PROGRAM_V2 = TASK_PROGRAM.replace(
    "float(text == answers[task['task_id']])",
    "float(abs(ord(text) - ord(answers[task['task_id']])) <= 1)",
)
# Run scope: one call sees every task; reports accuracy and the count of wrong answers.
RUN_PROGRAM = """
import json, pathlib
data = json.load(open('/evaluation/input.json'))
answers = json.load(open('/evaluation/sealed/answers.json'))
right = 0
for task in data['tasks']:
    text = (pathlib.Path(task['candidate']) / 'candidate.txt').read_text().strip()
    right += text == answers[task['task_id']]
n = len(data['tasks'])
print(json.dumps({'metrics': {'accuracy': {'value': right / n, 'ci_low': 0.0, 'ci_high': 1.0},
                              'wrong': n - right}}))
"""


@pytest.fixture(params=["bwrap", "docker"])
def backend(request, monkeypatch, sandbox_image_env):
    monkeypatch.setenv("SECUREBENCH_SANDBOX", request.param)
    monkeypatch.setattr(pipeline, "_worker_sandbox", None)
    if pipeline.worker_sandbox() is None:
        pytest.fail(f"{request.param} sandbox unavailable (CI requires both backends)")
    return request.param


@pytest.fixture
def sandbox_image_env(monkeypatch):
    from tests.conftest import LOCAL_IMAGE  # noqa: PLC0415 - test support

    monkeypatch.setenv("SECUREBENCH_DEFAULT_IMAGE", LOCAL_IMAGE)


@pytest.fixture
def version(make_pack):
    rows = [mc_row(task_id, answer) for task_id, answer in ANSWERS.items()]
    manifest = {
        "id": "demo",
        "version": 1,
        "contract": {
            "compatible_evaluations": ["securebench@1", "exact@1", "exact@2", "whole@1"],
        },
    }
    return pack_import_folder(folder=make_pack(manifest, rows)).contract_version


def store(tmp_path: Path, name: str, program: str, **changes) -> None:
    sealed = json.dumps(ANSWERS)
    folder = write_evaluation(tmp_path / name, declaration(**changes), program=program, sealed="")
    (folder / "sealed" / "labels.txt").unlink()
    (folder / "sealed" / "answers.json").write_text(sealed)
    evaluation_import_folder(folder=folder)


def submit(version) -> Evaluation:
    objects = [{"task_id": t, "candidate": {"kind": "text", "text": a}} for t, a in GIVEN.items()]
    _, evaluation = run_submit_bundle(
        contract_version=version,
        bundle=ParsedBundle(lines=parse_candidate_objects(objects)),
        metadata=RunMetadata(agent_name="scripted"),
        source=RunSource.API,
    )
    return evaluation


def score(evaluation: Evaluation) -> Evaluation:
    ids = list(
        TaskResult.objects.filter(evaluation=evaluation, status=ResultStatus.QUEUED).values_list(
            "pk", flat=True
        )
    )
    for pk in ids:
        pipeline.score_results([pk], worker="test")
    evaluation.refresh_from_db()
    if not evaluation.is_done and evaluation.program_sent_at is not None:
        pipeline.run_scope_score(evaluation.pk)
        evaluation.refresh_from_db()
    return evaluation


def test_task_scope_scores_are_the_programs_and_a_second_version_leaves_the_first(
    tmp_path, version, backend
):
    store(tmp_path, "v1", TASK_PROGRAM)
    store(tmp_path, "v2", TASK_PROGRAM_V2, version=2)
    run = submit(version).run

    first = score(evaluation_create(run, evaluator="exact@1"))
    expected = sum(GIVEN[t] == ANSWERS[t] for t in ANSWERS) / len(ANSWERS)
    assert first.is_done and first.metrics["accuracy"]["value"] == pytest.approx(expected, abs=1e-9)
    assert first.score == pytest.approx(expected, abs=1e-9)
    assert "bootstrap over 4 tasks" in first.metrics["accuracy"]["interval"]
    assert first.ci_low <= first.score <= first.ci_high
    assert (first.passed, first.failed, first.errored) == (2, 2, 0)
    before = Evaluation.objects.values().get(pk=first.pk)

    second = score(evaluation_create(run, evaluator="exact@2"))
    near = sum(abs(ord(GIVEN[t]) - ord(ANSWERS[t])) <= 1 for t in ANSWERS) / len(ANSWERS)
    assert second.metrics["accuracy"]["value"] == pytest.approx(near, abs=1e-9)
    assert near != expected
    assert Evaluation.objects.values().get(pk=first.pk) == before


def test_the_board_ranks_by_an_uploaded_metric_and_says_how_its_interval_was_found(
    tmp_path, version, backend, client
):
    store(tmp_path, "v1", TASK_PROGRAM)
    run = submit(version).run
    score(evaluation_create(run, evaluator="exact@1"))

    client.force_login(make_user("vera", "viewer"))
    board = client.get("/leaderboards/demo/v1/?evaluation=exact@1&metric=accuracy")
    page = board.content.decode()
    assert board.status_code == 200 and "0.50" in page
    assert (
        "95 % interval: bootstrap over 4 tasks, 2000 resamples, "
        f"seed &#x27;exact@1:run-{run.pk}:accuracy&#x27;" in page
    )


def test_run_scope_calls_the_program_once_over_the_whole_run(tmp_path, version, backend):
    store(
        tmp_path,
        "whole",
        RUN_PROGRAM,
        id="whole",
        scope="run",
        metrics=[
            {"name": "accuracy", "direction": "higher", "range": [0, 1], "primary": True},
            {"name": "wrong", "direction": "lower", "range": [0, None]},
        ],
    )
    run = submit(version).run

    evaluation = score(evaluation_create(run, evaluator="whole@1"))

    right = sum(GIVEN[t] == ANSWERS[t] for t in ANSWERS)
    assert evaluation.is_done
    assert evaluation.metrics["accuracy"]["value"] == pytest.approx(right / 4, abs=1e-9)
    assert evaluation.metrics["wrong"]["value"] == 4 - right
    assert evaluation.metrics["accuracy"]["interval"] == "the evaluation's own"
    assert evaluation.program_outcome["status"] == "ok"


@pytest.mark.parametrize(
    ("program", "problem"),
    [
        ("raise SystemExit(3)", "exit"),
        ("print('not json')", "not"),
        ("import json; print(json.dumps({'metrics': {'accuracy': 2.0}}))", "range"),
        ("import json; print(json.dumps({'metrics': {'accuracy': 1, 'bonus': 1}}))", "bonus"),
        ('import json; print(\'{"metrics": {"accuracy": NaN}}\')', "accuracy"),
    ],
)
def test_a_broken_program_is_the_evaluations_error_never_the_candidates(
    tmp_path, version, backend, program, problem
):
    store(tmp_path, "bad", program)
    run = submit(version).run

    evaluation = score(evaluation_create(run, evaluator="exact@1"))

    results = list(TaskResult.objects.filter(evaluation=evaluation))
    assert {r.status for r in results} == {ResultStatus.ERROR}
    assert {r.failure_reason for r in results} == {"evaluation_error"}
    assert all(problem in r.details["problem"].lower() for r in results)
    assert evaluation.failed == 0 and evaluation.score is None


def test_an_evaluation_scores_only_the_packs_it_declares(tmp_path, make_pack, backend):
    other = pack_import_folder(
        folder=make_pack(
            {
                "id": "other",
                "version": 1,
                "contract": {"compatible_evaluations": ["securebench@1", "exact@1"]},
            },
            [mc_row("q1")],
        )
    ).contract_version
    store(tmp_path, "v1", TASK_PROGRAM, scores=[{"pack": "other", "versions": [2]}])
    run = submit_one(other)
    with pytest.raises(EvaluatorNotAllowed, match="does not declare that it scores other"):
        evaluation_create(run, evaluator="exact@1")


def submit_one(version):
    objects = [{"task_id": "q1", "candidate": {"kind": "text", "text": "B"}}]
    run, _ = run_submit_bundle(
        contract_version=version,
        bundle=ParsedBundle(lines=parse_candidate_objects(objects)),
        metadata=RunMetadata(agent_name="scripted"),
        source=RunSource.API,
    )
    return run


CRASHING_RUN_PROGRAM = """
import sys
print('reading sealed-label-5c1e', file=sys.stderr)
raise SystemExit(2)
"""


def test_a_run_scope_programs_failure_is_the_evaluations_and_its_log_is_privileged(
    tmp_path, version, backend, client
):
    store(tmp_path, "whole", CRASHING_RUN_PROGRAM, id="whole", scope="run")
    run = submit(version).run
    evaluation = score(evaluation_create(run, evaluator="whole@1"))

    assert evaluation.is_done and evaluation.metrics == {} and evaluation.score is None
    assert evaluation.program_outcome["status"] == "error"
    assert "exit" in evaluation.program_outcome["problem"].lower()
    statuses = set(
        TaskResult.objects.filter(evaluation=evaluation).values_list("status", "failure_reason")
    )
    assert statuses == {(ResultStatus.ERROR, "evaluation_error")}
    page = f"/runs/{run.pk}/?evaluation={evaluation.number}"
    panel = f"/runs/{run.pk}/evaluations/{evaluation.number}/privileged/program-log/"

    client.force_login(make_user("vera", "viewer"))
    shown = client.get(page).content.decode()
    assert "The evaluation's error, not the run's." in shown and "sealed-label" not in shown
    assert client.get(panel).status_code == 404

    client.force_login(make_user("rita", "reviewer"))
    assert client.get(panel).status_code == 403  # privileged, but debug mode is off
    client.post("/debug-mode/", {"reason": "why did it fail", "next": "/"})
    log = client.get(panel)
    assert log.status_code == 200 and "sealed-label-5c1e" in log.content.decode()
    assert AuditEvent.objects.filter(object_type="evaluation", object_id=evaluation.pk).count() == 1
