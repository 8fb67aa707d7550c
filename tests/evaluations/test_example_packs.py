"""Both example packs score, through the site, as their authors compute.

Each pack and its evaluations are imported as uploaded; artifact runs are submitted with the
candidates the examples' own tests use; every compatible evaluation re-scores them through
the pipeline's calls (`score_results`, `run_scope_score`) in a real sandbox of each backend.
The site's stored numbers must equal, to 1e-9, what the examples' plain-Python calculators
(tests/examples, not the programs' code) count over the same files: for a task-scope
evaluation the run's value is the mean over tasks (evaluations/aggregate.py), for a run-scope
one what the program reported. Re-scoring with w2s-exact-match@2 leaves @1's numbers as they
were, and each evaluation's board shows its own numbers ranked by its metric's direction.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from runs.models import Evaluation, ResultStatus, Run, TaskResult
from runs.selectors import leaderboard
from tests.evaluations.example_packs import (
    W2S_EVALUATIONS,
    import_evaluation,
    import_pack,
    metric_value,
    rescore,
    submit_artifacts,
)
from tests.evaluations.test_scoring import backend, sandbox_image_env  # noqa: F401 - fixtures
from tests.examples import test_nim_arena as nim
from tests.examples import test_w2s_evaluations as w2s
from tests.examples.harness import load_module

# Heavy (arena games on both backends); their database part is test_scoring.py's, which the
# PostgreSQL pass runs.
pytestmark = [pytest.mark.django_db, pytest.mark.embedded_only]

TOLERANCE = 1e-9


# --- W2S ------------------------------------------------------------------------------------


def split_of(task_id: str) -> str:
    return task_id.split("/", 1)[1]


def task_ids() -> list[str]:
    return [row["id"] for row in w2s.ROWS]


def expected_exact(files_by_split: dict[str, dict[str, str]]) -> dict[str, list[float]]:
    """Per task (pack order): v1's strict accuracy, v2's value-equal accuracy, coverage —
    counted as tests/examples/test_w2s_evaluations.py counts them."""
    found: dict[str, list[float]] = {"v1": [], "v2": [], "coverage": []}
    for split in w2s.SPLITS:
        labels, predictions = w2s.strong(split), w2s.first_predictions(files_by_split[split])
        strict = sum(predictions.get(item) == label for item, label in labels.items())
        loose = sum(w2s.loose_equal(predictions.get(item), label) for item, label in labels.items())
        found["v1"].append(strict / len(labels))
        found["v2"].append(loose / len(labels))
        found["coverage"].append(sum(item in predictions for item in labels) / len(labels))
    return found


def stated_interval(points: list[float], seed: str) -> tuple[float, float]:
    """The interval the page states: the percentile bootstrap of the mean over tasks, 2000
    resamples drawn with random.Random(seed).choices, the 2.5th and 97.5th percentiles."""
    rng = random.Random(seed)  # noqa: S311 - the stated seed
    means = sorted(sum(rng.choices(points, k=len(points))) / len(points) for _ in range(2000))
    return means[50], means[1949]


def assert_task_mean(evaluation: Evaluation, name: str, per_task: list[float]) -> None:
    stored = evaluation.metrics[name]
    assert stored["value"] == pytest.approx(sum(per_task) / len(per_task), abs=TOLERANCE), name
    seed = f"{evaluation.evaluator}:run-{evaluation.run_id}:{name}"
    low, high = stated_interval(per_task, seed)
    assert (stored["ci_low"], stored["ci_high"]) == pytest.approx((low, high), abs=TOLERANCE)
    assert f"seed '{seed}'" in stored["interval"]


def assert_task_values(evaluation: Evaluation, name: str, per_task: list[float]) -> None:
    """Each task's own stored value is the program's for that task."""
    stored = dict(
        TaskResult.objects.filter(evaluation=evaluation).values_list("task__task_id", "metrics")
    )
    for task_id, expected in zip(task_ids(), per_task, strict=True):
        assert stored[task_id][name]["value"] == pytest.approx(expected, abs=TOLERANCE), task_id


def assert_pgr(evaluation: Evaluation, files_by_split: dict[str, dict[str, str]]) -> None:
    expected = w2s.expected_pgr(w2s.pooled_pairs(files_by_split, w2s.SPLITS), w2s.CEILING)
    assert evaluation.program_outcome["status"] == "ok"
    assert evaluation.program_outcome["tasks"] == len(w2s.SPLITS)
    assert set(evaluation.metrics) == set(expected)
    for name, value in expected.items():
        parts = value if isinstance(value, dict) else {"value": value}
        for part, number in parts.items():
            assert evaluation.metrics[name][part] == pytest.approx(number, abs=TOLERANCE), (
                name,
                part,
            )
    assert evaluation.score == pytest.approx(expected["pgr"]["value"], abs=TOLERANCE)


def board_values(version, key: str, metric: str) -> list[tuple[int, float]]:
    board = leaderboard(version, evaluator=key, metric=metric)
    return [(row.run.pk, row.value) for row in board.ranked]


def assert_board(version, key: str, metric: str, expected: dict[Run, float], lower: bool) -> None:
    """The board's ranked runs are the valid ones, each with its own number, best first."""
    shown = board_values(version, key, metric)
    assert {run_id for run_id, _ in shown} == {run.pk for run in expected}
    for run_id, value in shown:
        run = next(run for run in expected if run.pk == run_id)
        assert value == pytest.approx(expected[run], abs=TOLERANCE), (key, metric, run.agent_name)
    values = [value for _, value in shown]
    assert values == sorted(values, reverse=not lower), (key, metric, values)


def test_the_w2s_pack_scores_as_its_authors_compute(backend):  # noqa: F811 - the fixture
    version = import_pack("w2s-predictions")
    for name in W2S_EVALUATIONS:
        import_evaluation(name)
    runs: dict[str, Run] = {}
    for name, by_split in w2s.CANDIDATES.items():
        runs[name] = submit_artifacts(
            version, {task_id: by_split[split_of(task_id)] for task_id in task_ids()}, name
        )
    first: dict[str, Evaluation] = {}
    for name, run in runs.items():
        expected = expected_exact(w2s.CANDIDATES[name])
        first[name] = rescore(run, "w2s-exact-match@1")
        assert_task_mean(first[name], "accuracy", expected["v1"])
        assert_task_mean(first[name], "coverage", expected["coverage"])
        if name != "null":  # the null broke the contract: its tasks were never called
            assert_task_values(first[name], "accuracy", expected["v1"])
        assert first[name].score == pytest.approx(metric_value(first[name], "accuracy"))
    frozen = {name: Evaluation.objects.values().get(pk=e.pk) for name, e in first.items()}

    second: dict[str, Evaluation] = {}
    for name, run in runs.items():
        expected = expected_exact(w2s.CANDIDATES[name])
        second[name] = rescore(run, "w2s-exact-match@2")
        assert_task_mean(second[name], "accuracy", expected["v2"])
        assert_task_mean(second[name], "coverage", expected["coverage"])
        assert_pgr(rescore(run, "w2s-pgr@1"), w2s.CANDIDATES[name])
    # The same artifact, two versions, two numbers; @1's row is exactly as it was stored.
    assert metric_value(first["weak-copy"], "accuracy") < metric_value(
        second["weak-copy"], "accuracy"
    )
    assert {name: Evaluation.objects.values().get(pk=e.pk) for name, e in first.items()} == frozen

    # The null's artifact breaks the contract (no outputs): scored, shown as invalid, unranked.
    assert not Run.objects.get(pk=runs["null"].pk).valid
    assert metric_value(first["null"], "accuracy") == 0.0
    valid = {run: name for name, run in runs.items() if name != "null"}
    for key, evaluations in (("w2s-exact-match@1", first), ("w2s-exact-match@2", second)):
        shown = {run: metric_value(evaluations[name], "accuracy") for run, name in valid.items()}
        assert_board(version, key, "accuracy", shown, lower=False)
    pgr = {
        run: w2s.expected_pgr(w2s.pooled_pairs(w2s.CANDIDATES[name], w2s.SPLITS), w2s.CEILING)
        for run, name in valid.items()
    }
    points = {run: value["pgr"]["value"] for run, value in pgr.items()}
    assert_board(version, "w2s-pgr@1", "pgr", points, lower=False)
    weak_shares = {run: value["weak_accuracy"] for run, value in pgr.items()}
    assert_board(version, "w2s-pgr@1", "weak_accuracy", weak_shares, lower=False)
    oracle = Evaluation.objects.get(run=runs["oracle"], evaluator="w2s-exact-match@1")
    assert oracle.metrics["accuracy"]["value"] == 1.0
    assert (oracle.passed, oracle.failed, oracle.errored) == (3, 0, 0)


# --- Nim arena ------------------------------------------------------------------------------


def choose_of(tmp_path, name: str, files: dict[str, str]):
    folder = tmp_path / "module"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}_player.py").write_text(files["player.py"])
    return load_module(folder / f"{name}_player.py").choose_move


def assert_arena(evaluation: Evaluation, expected: dict[str, Any]) -> None:
    """The one task's values are the run's; its interval the program's Wilson interval."""
    assert set(evaluation.metrics) == set(expected)
    for name, value in expected.items():
        parts = value if isinstance(value, dict) else {"value": value}
        for part, number in parts.items():
            assert evaluation.metrics[name][part] == pytest.approx(number, abs=TOLERANCE), (
                name,
                part,
            )
    assert evaluation.metrics["win_rate"]["interval"] == "the evaluation's own (one task)"


# Every answer is illegal: every game forfeited at once (a quick third player, so that the
# board's lower-is-better forfeit_rate has two values to order).
ILLEGAL = {
    "player.py": "import sys\nfor line in sys.stdin:\n    print('7 99', flush=True)\n",
    "load_player_command.txt": nim.COMMAND,
}


def test_the_nim_arena_scores_as_its_authors_compute(backend, tmp_path):  # noqa: F811
    version = import_pack("nim-arena")
    import_evaluation("nim-arena")
    task_id = nim.ROW["id"]
    players = {"reference": nim.REFERENCE, "example": nim.EXAMPLE_PLAYER, "illegal": ILLEGAL}
    runs, expected = {}, {}
    for name, files in players.items():
        choose = None if name == "illegal" else choose_of(tmp_path, name, files)
        expected[name] = nim.expected_metrics(nim.replay(choose)[0])
        runs[name] = submit_artifacts(version, {task_id: files}, name)
        evaluation = rescore(runs[name], "nim-arena@1")
        assert_arena(evaluation, expected[name])
        result = TaskResult.objects.get(evaluation=evaluation)
        passed = expected[name]["win_rate"]["value"] >= 0.7
        assert result.status == (ResultStatus.PASSED if passed else ResultStatus.FAILED)
    assert expected["reference"]["win_rate"]["value"] > expected["example"]["win_rate"]["value"]
    assert expected["illegal"]["forfeit_rate"] == 1.0

    def values(metric: str) -> dict[Run, float]:
        return {
            runs[name]: (value["value"] if isinstance(value, dict) else value)
            for name in runs
            for value in [expected[name][metric]]
        }

    assert_board(version, "nim-arena@1", "win_rate", values("win_rate"), lower=False)
    assert_board(version, "nim-arena@1", "forfeit_rate", values("forfeit_rate"), lower=True)
    ranked = board_values(version, "nim-arena@1", "forfeit_rate")
    assert ranked[-1] == (runs["illegal"].pk, 1.0)  # lowest is best: the forfeiter is last
