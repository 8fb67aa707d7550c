"""Attacks on the example packs' evaluations, through the site, in real sandboxes of both
backends: each ends as named, nothing is lost, and no byte of an evaluation's sealed data or
program reaches a stored column or anything an agent can read.

The evaluations are the examples' own, uploaded from copies that carry unique markers in
their sealed data and programs (tests.evaluations.example_packs.import_evaluation).
"""

from __future__ import annotations

import io
import json
import shutil
import uuid
import zipfile
from typing import Any

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from episodes import services as episodes
from episodes.services import episode_run_open
from evaluations.services import evaluation_import_folder
from runs.models import Evaluation, ResultStatus, Run, TaskResult
from runs.selectors import leaderboard
from runs.services import RunMetadata
from tests.conftest import make_user
from tests.evaluations.example_packs import (
    W2S_EVALUATIONS,
    import_evaluation,
    import_pack,
    program_marker,
    rescore,
    sealed_marker,
    submit_artifacts,
)
from tests.evaluations.test_example_packs import (
    expected_exact,
    split_of,
    task_ids,
)
from tests.evaluations.test_scoring import backend, sandbox_image_env  # noqa: F401 - fixtures
from tests.examples import test_nim_arena as nim
from tests.examples import test_w2s_evaluations as w2s
from tests.examples.harness import EVALUATIONS

# Heavy (sandboxed attacks on both backends); their database part is test_scoring.py's, which
# the PostgreSQL pass runs.
pytestmark = [pytest.mark.django_db, pytest.mark.embedded_only]

TOLERANCE = 1e-9
MARKER = uuid.uuid4().hex
SEALED_TEXTS = [
    sealed_marker(MARKER),
    program_marker(MARKER),
    (EVALUATIONS / "nim-arena" / "sealed" / "arena.json").read_text(),
    '"position_seed"',
]
FORGED = json.dumps({"metrics": {"accuracy": 1.0, "coverage": 1.0, "win_rate": 1.0}})
# Files an artifact may name like the evaluation's channel, input or folders.
LOOKALIKES = {
    "metrics.json": FORGED + "\n",
    "input.json": json.dumps({"tasks": [], "metrics": []}),
    "evaluation/sealed/x": FORGED,
    "evaluation/input.json": FORGED,
}


def stored_text(evaluation: Evaluation) -> str:
    """Every stored column an evaluation's call could have written, as one text."""
    evaluation.refresh_from_db()
    parts: list[Any] = [evaluation.metrics, evaluation.program_outcome, evaluation.program_log]
    for row in TaskResult.objects.filter(evaluation=evaluation).values(
        "stdout", "stderr", "details", "metrics"
    ):
        parts.extend(row.values())
    return "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def assert_nothing_sealed(text: str, where: str) -> None:
    for sealed in SEALED_TEXTS:
        assert sealed not in text, f"sealed or program bytes in {where}"


def marked_evaluations(root, names) -> None:
    for name in names:
        import_evaluation(name, root=root, marker=MARKER)


# --- artifacts named like the channel; a run that skips tasks ---------------------------------


def test_files_named_like_the_channel_change_no_metric(backend, tmp_path):  # noqa: F811
    version = import_pack("w2s-predictions")
    marked_evaluations(tmp_path, ("w2s-exact-match", "w2s-pgr"))
    files = w2s.CANDIDATES["weak-copy"]
    decoyed = {task: {**files[split_of(task)], **LOOKALIKES} for task in task_ids()}
    run = submit_artifacts(version, decoyed, "decoys")

    exact = rescore(run, "w2s-exact-match@1")
    pgr = rescore(run, "w2s-pgr@1")

    expected = expected_exact(files)["v1"]
    assert exact.metrics["accuracy"]["value"] == pytest.approx(sum(expected) / 3, abs=TOLERANCE)
    point = w2s.expected_pgr(w2s.pooled_pairs(files, w2s.SPLITS), w2s.CEILING)["pgr"]["value"]
    assert pgr.metrics["pgr"]["value"] == pytest.approx(point, abs=TOLERANCE) == 0.0
    assert pgr.program_outcome["status"] == "ok"
    for evaluation in (exact, pgr):
        assert_nothing_sealed(stored_text(evaluation), evaluation.evaluator)


def test_a_run_that_skips_the_tasks_it_cannot_do_gains_nothing(backend):  # noqa: F811
    # Only the split it solves: the tasks left out count as the worst value (task scope) and
    # as missing artifacts (run scope), so it cannot outrank the run that tried them all.
    version = import_pack("w2s-predictions")
    for name in W2S_EVALUATIONS:
        import_evaluation(name)
    student = w2s.CANDIDATES["student"]
    full = submit_artifacts(version, {t: student[split_of(t)] for t in task_ids()}, "full")
    only = {"w2s-predictions/arithmetic": student["arithmetic"]}
    skipper = submit_artifacts(version, only, "skipper")
    assert Run.objects.get(pk=skipper.pk).valid  # skipping breaks no contract rule

    skipped = rescore(skipper, "w2s-exact-match@1")
    rescore(full, "w2s-exact-match@1")
    pgr = rescore(skipper, "w2s-pgr@1")
    rescore(full, "w2s-pgr@1")

    arithmetic = expected_exact(student)["v1"][0]
    assert skipped.metrics["accuracy"]["value"] == pytest.approx(arithmetic / 3, abs=TOLERANCE)
    assert skipped.metrics["coverage"]["value"] == pytest.approx(1 / 3, abs=TOLERANCE)
    empty = {"algebra": {}, "word_problems": {}, "arithmetic": student["arithmetic"]}
    expected_pgr = w2s.expected_pgr(w2s.pooled_pairs(empty, w2s.SPLITS), w2s.CEILING)
    assert pgr.metrics["pgr"]["value"] == pytest.approx(expected_pgr["pgr"]["value"], abs=1e-9)
    assert pgr.program_outcome["tasks"] == 3
    for key, metric in (("w2s-exact-match@1", "accuracy"), ("w2s-pgr@1", "pgr")):
        board = leaderboard(version, evaluator=key, metric=metric)
        assert [row.run.agent_name for row in board.ranked] == ["full", "skipper"], key


# --- hostile players --------------------------------------------------------------------------

PROBE_PATHS = [
    "/evaluation/sealed/marker.txt",
    "/evaluation/sealed/arena.json",
    "/evaluation/program/arena.py",
    "/evaluation/input.json",
    "../sealed/marker.txt",
    "/proc/1/cmdline",
]
PLAYERS = {
    "fork_bomb": """
import os, sys
sys.stdin.readline()
while True:
    try:
        os.fork()
    except OSError:
        pass
""",
    # Prints, as its move, the first line of whatever of the evaluation's folder it can read.
    "reads_the_evaluation": f"""
import sys
paths = {PROBE_PATHS!r}
for number, line in enumerate(sys.stdin):
    path = paths[number % len(paths)]
    try:
        text = open(path, errors="replace").read(200).replace("\\n", " ")
    except OSError as exc:
        text = "unreadable " + path + " " + type(exc).__name__
    print(text, flush=True)
""",
    # Writes the channel's final message as its move, to stdout and stderr.
    "forges_metrics": f"""
import sys
for line in sys.stdin:
    print({FORGED!r}, file=sys.stderr, flush=True)
    print({FORGED!r}, flush=True)
""",
    "sleeps_forever": """
import sys, time
sys.stdin.readline()
while True:
    time.sleep(3600)
""",
}


@pytest.mark.parametrize("player", sorted(PLAYERS))
def test_a_hostile_player_loses_every_game_and_the_evaluation_stays_ok(
    backend,  # noqa: F811
    tmp_path,
    player,
):
    version = import_pack("nim-arena")
    marked_evaluations(tmp_path, ("nim-arena",))
    files = {"player.py": PLAYERS[player], "load_player_command.txt": nim.COMMAND, **LOOKALIKES}
    run = submit_artifacts(version, {nim.ROW["id"]: files}, player)

    evaluation = rescore(run, "nim-arena@1")

    result = TaskResult.objects.get(evaluation=evaluation)
    assert (result.status, result.failure_reason) == (ResultStatus.FAILED, "wrong_answer")
    expected = nim.expected_metrics(nim.replay(None)[0])  # every game forfeited
    assert evaluation.metrics["forfeit_rate"]["value"] == expected["forfeit_rate"] == 1.0
    for name in ("win_rate", "win_rate_vs_random", "win_rate_vs_optimal"):
        assert evaluation.metrics[name]["value"] == 0.0, name
    win = evaluation.metrics["win_rate"]
    for end in ("ci_low", "ci_high"):  # the Wilson interval of 0 wins in 1,000 games
        assert win[end] == pytest.approx(expected["win_rate"][end], abs=TOLERANCE), end
    assert (evaluation.errored, evaluation.failed) == (0, 1)
    text = stored_text(evaluation)
    assert_nothing_sealed(text, player)
    if player == "reads_the_evaluation":
        assert "unreadable /evaluation/sealed/marker.txt" in result.stderr  # it tried, and failed


# --- broken evaluation programs -----------------------------------------------------------------

BROKEN = {
    "crashes": "raise SystemExit(3)\n",
    "prints_garbage": "print('all good, trust me')\n",
    "undeclared_metric": (
        "import json\nprint(json.dumps({'metrics': {'PRIMARY': 0.5, 'bonus': 1}}))\n"
    ),
    "nan": 'print(\'{"metrics": {"PRIMARY": NaN}}\')\n',
    # A bounded metric past its range (pgr's own range is open at both ends).
    "out_of_range": (
        "import json\nprint(json.dumps({'metrics': {'PRIMARY': 0.5, 'BOUNDED': 2.0}}))\n"
    ),
}
PROBLEM_WORDS = {
    "crashes": "exit",
    "prints_garbage": "not",
    "undeclared_metric": "bonus",
    "nan": "",
    "out_of_range": "range",
}


def broken_copy(tmp_path, name: str, kind: str, primary: str) -> None:
    folder = tmp_path / name
    shutil.copytree(EVALUATIONS / name, folder)
    bounded = "coverage" if primary == "accuracy" else "accuracy"
    body = BROKEN[kind].replace("PRIMARY", primary).replace("BOUNDED", bounded)
    (folder / "program" / "score.py").write_text(body)
    evaluation_import_folder(folder=folder)


@pytest.mark.parametrize("kind", sorted(BROKEN))
@pytest.mark.parametrize(
    ("name", "key", "primary"),
    [("w2s-exact-match", "w2s-exact-match@1", "accuracy"), ("w2s-pgr", "w2s-pgr@1", "pgr")],
    ids=["task-scope", "run-scope"],
)
def test_a_broken_program_is_the_evaluations_error_never_the_candidates(
    backend,  # noqa: F811
    tmp_path,
    kind,
    name,
    key,
    primary,
):
    version = import_pack("w2s-predictions")
    broken_copy(tmp_path, name, kind, primary)
    files = w2s.CANDIDATES["oracle"]
    run = submit_artifacts(version, {t: files[split_of(t)] for t in task_ids()}, "oracle")

    evaluation = rescore(run, key)

    assert evaluation.failed == 0 and evaluation.score is None and evaluation.metrics == {}
    words = PROBLEM_WORDS[kind]
    if name == "w2s-pgr":
        outcome = evaluation.program_outcome
        assert outcome["status"] == "error" and "metrics" not in outcome
        assert words in outcome["problem"].lower()
        # The results only waited for the program: they are its error too, never a pass.
        results = TaskResult.objects.filter(evaluation=evaluation)
        assert {(r.status, r.failure_reason) for r in results} == {
            (ResultStatus.ERROR, "evaluation_error")
        }
        assert evaluation.passed == 0 and evaluation.errored == 3
    else:
        results = TaskResult.objects.filter(evaluation=evaluation)
        assert {(r.status, r.failure_reason) for r in results} == {
            (ResultStatus.ERROR, "evaluation_error")
        }
        assert all(words in r.details["problem"].lower() for r in results)
        assert evaluation.errored == 3


# --- an agent reading an evaluation's program or sealed data ----------------------------------


def agent_client() -> tuple[APIClient, Any]:
    client = APIClient()
    user = make_user("agent", "submitter")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client, user


def rpc(url: str, method: str, params: dict[str, Any] | None = None) -> str:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": 1}
    if params is not None:
        body["params"] = params
    response = Client().post(url, json.dumps(body), content_type="application/json")
    return response.content.decode()


def test_an_agent_reads_no_byte_of_an_evaluations_program_or_sealed_data(
    backend,  # noqa: F811
    tmp_path,
):
    version = import_pack("w2s-predictions")
    marked_evaluations(tmp_path, W2S_EVALUATIONS)
    client, agent = agent_client()
    files = w2s.CANDIDATES["student"]
    run = submit_artifacts(version, {t: files[split_of(t)] for t in task_ids()}, "agent")
    for key in ("w2s-exact-match@1", "w2s-exact-match@2", "w2s-pgr@1"):
        assert_nothing_sealed(stored_text(rescore(run, key)), key)
    Run.objects.filter(pk=run.pk).update(submitted_by=agent)  # the agent reads its own run

    seen: dict[str, str] = {}
    base = f"/api/v1/packs/{version.pack.pack_id}/versions/{version.version}"
    for url in (
        "/api/v1/packs/",
        f"/api/v1/packs/{version.pack.pack_id}/",
        f"{base}/",
        f"{base}/tasks/",
        f"{base}/files/arithmetic/prompts.jsonl",
        "/api/v1/evaluations/",
        "/api/v1/evaluations/w2s-exact-match/1/",
        "/api/v1/evaluations/w2s-pgr/1/",
        f"/api/v1/runs/{run.pk}/",
        f"/api/v1/runs/{run.pk}/evaluations/",
        *(f"/api/v1/runs/{run.pk}/evaluations/{n}/results/" for n in (1, 2, 3, 4)),
    ):
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        seen[url] = f"{response.status_code} {body.decode(errors='replace')}"
    pages = Client()
    pages.force_login(agent)
    for url in ("/evaluations/w2s-exact-match/v1/", "/evaluations/w2s-pgr/", f"/runs/{run.pk}/"):
        response = pages.get(url)
        seen[url] = f"{response.status_code} {response.content.decode()}"
    assert seen["/evaluations/w2s-exact-match/v1/"].startswith("200")
    bundle = client.get(f"{base}/agent-bundle/")
    assert bundle.status_code == 200
    with zipfile.ZipFile(io.BytesIO(b"".join(bundle.streaming_content))) as archive:
        names = archive.namelist()
        seen["agent bundle"] = "\n".join(
            names + [archive.read(name).decode(errors="replace") for name in names]
        )
    assert "predictions.jsonl" not in "\n".join(names)  # no reference artifact either

    opened = episode_run_open(
        contract_version=version, metadata=RunMetadata(agent_name="cube"), source="command"
    )
    url = episodes.benchmark_path(opened.secret)
    seen["cube/info"] = rpc(url, "cube/info")
    for task_id in task_ids():
        configs = json.loads(rpc(url, "cube/task_configs", {"task_id": task_id}))["result"]
        spawned = json.loads(rpc(url, "cube/spawn", {"task_config": configs[0]}))["result"]
        task = spawned.removeprefix("http://testserver")
        for method in ("cube/reset", "tools/list", "cube/privileged_info", "cube/status"):
            seen[f"{task_id} {method}"] = rpc(task, method)
    assert '"result"' in seen[f"{task_ids()[0]} cube/reset"]  # an observation was given

    for where, text in seen.items():
        assert_nothing_sealed(text, where)
    assert any(url.endswith("/tasks/") and text.startswith("200") for url, text in seen.items())
