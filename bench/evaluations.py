"""Workload 14: evaluation programs that authors bring (issue 33), through the worker's path.

* Prediction file: a generated 100,000-line ``predictions.jsonl`` (70 % of its answers right,
  seeded) scored by the w2s-exact-match example's own program (``score.py``, unchanged) with
  100,000 generated sealed strong labels: an author's real program, not one written to be
  fast. Anchor: that program run directly (``/usr/bin/python3``, the interpreter bubblewrap
  binds) on a host folder tree laid out as the sandbox sees it, through the
  ``SECUREBENCH_*_ROOT`` variables. Measured: a generated artifact pack and the evaluation
  imported into the database, a run submitted with the artifact (not timed), then
  ``runs.pipeline.score_results`` on its result as the Celery worker calls it (claim, lanes,
  the evaluation's files from the blob cache, the sandboxed call, the verdict recorded).
  Target: measured <= 1.5x anchor + one sandbox start (``true`` on the same backend with a
  fresh read-only mount, as an evaluation call has: on Docker never a pooled container),
  per backend. Anchor, starts and worker run in turn, round after round, so that the other
  load on a shared machine falls on each side alike.
* Arena: the nim-arena example evaluation (1,000 games) with the pack's reference player and
  with ``examples/agents/nim_player.py``, through the same path (the player in a second
  sandbox behind the host's relay), against the program run directly with the player as a
  subprocess and a host relay of a few lines (as tests/examples/harness.py does), alternated
  the same way. Reported only: wall time, games per second, and the difference, which is
  what the sandboxes and the worker's relay add.

Every score is checked: the accuracy must be the generated share, and the arena's metrics
the same through the worker as directly (the games are seeded). Docker rows are skipped with
a printed reason when no engine answers.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO_ROOT, Figure, at_most, django_setup, main, median, repeat
from verifiers.sandbox import Mount, SandboxSpec
from verifiers.sandbox.docker import DEFAULT_LOCAL_IMAGE

WORKLOAD = "14 evaluation programs"
TARGET_RATIO = 1.5
BARE_PYTHON = "/usr/bin/python3"  # the interpreter the bwrap backend binds from /usr
EXAMPLES = REPO_ROOT / "examples"
SCORE_PY = EXAMPLES / "evaluations" / "w2s-exact-match" / "program" / "score.py"
ARENA = EXAMPLES / "evaluations" / "nim-arena"
PACK_ID, SPLIT, EVALUATION_ID = "bench-predictions", "bench", "bench-exact-match"
TASK_ID = f"{PACK_ID}/{SPLIT}"
RIGHT_SHARE = 0.7
FULL = {"lines": 100_000, "games": 1_000, "runs": 7, "docker_runs": 5, "arena_runs": 5}
SMOKE = {"lines": 1_000, "games": 20, "runs": 1, "docker_runs": 1, "arena_runs": 1}
STARTS_PER_ROUND = 3


# --- generated data ------------------------------------------------------------------------


def prediction_files(lines: int) -> tuple[str, str, float]:
    """(predictions.jsonl, strong labels .jsonl, the expected accuracy), seeded."""
    rng = random.Random(33)
    predictions, labels, right = [], [], 0
    for index in range(lines):
        item, answer = f"b-{index:06d}", str(rng.randrange(1_000_000))
        ok = rng.random() < RIGHT_SHARE
        right += ok
        labels.append(json.dumps({"id": item, "answer": answer}))
        predictions.append(json.dumps({"id": item, "answer": answer if ok else answer + "0"}))
    return "\n".join(predictions) + "\n", "\n".join(labels) + "\n", right / lines


def prediction_pack(folder: Path, predictions_bytes: int) -> Path:
    """One artifact task whose contract reads predictions.jsonl (w2s-predictions' shape)."""
    folder.mkdir(parents=True)
    manifest = {
        "id": PACK_ID,
        "version": 1,
        "title": "Generated prediction file (bench)",
        "defaults": {"family": "artifact_task"},
        "contract": {
            "required_outputs": [
                {
                    "path": "predictions.jsonl",
                    "format": "jsonl",
                    "purpose": "evaluation",
                    "max_bytes": 2 * predictions_bytes,
                    "schema": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "answer": {"type": "string"}},
                        "required": ["id", "answer"],
                        "additionalProperties": False,
                    },
                }
            ],
            "compatible_evaluations": [f"{EVALUATION_ID}@1"],
        },
    }
    row = {
        "id": TASK_ID,
        "family": "artifact_task",
        "input": {"instructions": "Predict every item's answer.", "split": SPLIT},
    }
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (folder / "tasks.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def prediction_evaluation(folder: Path, labels: str) -> Path:
    """The w2s-exact-match program, unchanged, with the generated labels as sealed data."""
    source = yaml.safe_load((SCORE_PY.parent.parent / "evaluation.yaml").read_text())
    declaration = {
        **{key: source[key] for key in ("title", "scope", "metrics", "reads")},
        "id": EVALUATION_ID,
        "version": 1,
        "scores": [{"pack": PACK_ID, "versions": "all"}],
        # No image: the site's default (the local image on Docker, /usr on bubblewrap).
        "program": {key: source["program"][key] for key in ("command", "timeout_seconds")}
        | {"memory_mb": 512},
    }
    (folder / "program").mkdir(parents=True)
    (folder / "sealed" / "strong_labels").mkdir(parents=True)
    (folder / "evaluation.yaml").write_text(yaml.safe_dump(declaration, sort_keys=False))
    shutil.copyfile(SCORE_PY, folder / "program" / "score.py")
    (folder / "sealed" / "strong_labels" / f"{SPLIT}.jsonl").write_text(labels)
    return folder


def arena_evaluation(folder: Path, games: int) -> Path:
    """The nim-arena example evaluation, its sealed game count set to ``games``."""
    shutil.copytree(ARENA, folder)
    config = json.loads((folder / "sealed" / "arena.json").read_text())
    (folder / "sealed" / "arena.json").write_text(json.dumps({**config, "games": games}))
    return folder


def players() -> dict[str, dict[str, str]]:
    reference = EXAMPLES / "nim-arena" / "hidden" / "normal-play" / "reference"
    return {
        "reference player": {p.name: p.read_text() for p in sorted(reference.iterdir())},
        "example player": {
            "player.py": (EXAMPLES / "agents" / "nim_player.py").read_text(),
            "load_player_command.txt": "python3 player.py\n",
        },
    }


# --- the anchor: the program run directly on a host tree ----------------------------------


def host_tree(root: Path, evaluation: Path, task: dict[str, Any], files: dict[str, str]) -> Path:
    """/evaluation and /candidates as the sandbox sees them, under ``root``."""
    declared = yaml.safe_load((evaluation / "evaluation.yaml").read_text())
    shutil.copytree(evaluation / "program", root / "evaluation" / "program")
    shutil.copytree(evaluation / "sealed", root / "evaluation" / "sealed")
    (root / "evaluation" / "tasks" / "0" / "files").mkdir(parents=True)
    (root / "candidates" / "0").mkdir(parents=True)
    (root / "work").mkdir()
    for path, text in files.items():
        (root / "candidates" / "0" / path).write_text(text)
    metrics = [
        {"name": m["name"], "direction": m["direction"], "range": m["range"]}
        | {"primary": bool(m.get("primary"))}
        for m in declared["metrics"]
    ]
    document = {
        "evaluation": f"{declared['id']}@{declared['version']}",
        "scope": declared["scope"],
        "metrics": metrics,
        "tasks": [
            {
                "task_id": task["id"],
                "family": "artifact_task",
                "sample": 0,
                "input": task["input"],
                "eval": {},
                "files": "/evaluation/tasks/0/files",
                "candidate": "/candidates/0",
                "candidate_files": sorted(files),
            }
        ],
    }
    (root / "evaluation" / "input.json").write_text(json.dumps(document))
    return root


def _direct_command(root: Path, evaluation: Path) -> tuple[list[str], dict[str, str]]:
    command = yaml.safe_load((evaluation / "evaluation.yaml").read_text())["program"]["command"]
    words = [BARE_PYTHON if w == "python3" else w for w in command]
    words = [str(root) + w if w.startswith("/evaluation/") else w for w in words]
    env = os.environ | {
        "SECUREBENCH_EVALUATION_ROOT": str(root / "evaluation"),
        "SECUREBENCH_CANDIDATES_ROOT": str(root / "candidates"),
    }
    return words, env


def run_direct(root: Path, evaluation: Path) -> dict[str, Any]:
    """The program's final message, run with no sandbox and no player."""
    command, env = _direct_command(root, evaluation)
    finished = subprocess.run(
        command,
        env=env,
        cwd=root / "work",
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=True,
    )
    return json.loads(finished.stdout)


def arena_direct(root: Path, evaluation: Path, files: dict[str, str]) -> dict[str, Any]:
    """The arena program run directly, its player a subprocess in a copy of its files, and a
    host relay: one line to the player per request, its one line back."""
    command, env = _direct_command(root, evaluation)
    folder = Path(tempfile.mkdtemp(prefix="player-", dir=root))
    for path, text in files.items():
        (folder / path).write_text(text)
    words = shlex.split(files["load_player_command.txt"])
    player_command = [BARE_PYTHON if w == "python3" else w for w in words]
    program = subprocess.Popen(
        command,
        env=env,
        cwd=root / "work",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    player = subprocess.Popen(
        player_command, cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert program.stdin and program.stdout and player.stdin and player.stdout
    final: dict[str, Any] = {}
    try:
        for line in program.stdout:
            message = json.loads(line)
            if "to_candidate" not in message:
                final = message  # the reference and example players never need a restart
                continue
            player.stdin.write(message["to_candidate"] + "\n")
            player.stdin.flush()
            answer = {"from_candidate": player.stdout.readline().rstrip("\n")}
            program.stdin.write(json.dumps(answer) + "\n")
            program.stdin.flush()
    finally:
        player.kill()
        player.wait()
        program.wait()
        shutil.rmtree(folder)
    if program.returncode != 0 or "metrics" not in final:
        raise RuntimeError(f"the arena program failed directly: {program.returncode} {final}")
    return final


# --- the worker's path ---------------------------------------------------------------------


def use_backend(name: str) -> Any:
    """The worker's sandbox (``runs.pipeline.worker_sandbox``) on this backend, or None."""
    from runs import pipeline  # noqa: PLC0415 - Django app loading: after django_setup()

    os.environ["SECUREBENCH_SANDBOX"] = name
    pipeline.worker_sandbox_forget()  # one worker process per backend, in turn
    return pipeline.worker_sandbox()


def submit(version: Any, files: dict[str, str]) -> int:
    """A run with the artifact (the default evaluation, queued); its one result's id."""
    from runs.bundle import BundleLimits, ParsedBundle, parse_candidate_objects  # noqa: PLC0415
    from runs.models import ResultStatus, RunSource, TaskResult  # noqa: PLC0415
    from runs.services import RunMetadata, run_submit_bundle  # noqa: PLC0415

    size = 4 * sum(len(text) for text in files.values()) + (1 << 20)
    limits = BundleLimits(max_bundle_bytes=size, max_candidate_bytes=size, max_line_bytes=size)
    objects = [
        {"task_id": version_task(version), "candidate": {"kind": "artifact", "files": files}}
    ]
    _, evaluation = run_submit_bundle(
        contract_version=version,
        bundle=ParsedBundle(lines=parse_candidate_objects(objects, limits=limits)),
        metadata=RunMetadata(agent_name="bench"),
        source=RunSource.API,
    )
    (result,) = TaskResult.objects.filter(evaluation=evaluation, status=ResultStatus.QUEUED)
    return int(result.pk)


def version_task(version: Any) -> str:
    return str(version.tasks.values_list("task_id", flat=True).get())


def worker_score(result_id: int) -> dict[str, Any]:
    """``score_results`` as the Celery worker calls it; the result's stored metrics."""
    from runs import pipeline  # noqa: PLC0415
    from runs.models import TaskResult  # noqa: PLC0415

    if pipeline.score_results([result_id], worker="bench") != 1:
        raise RuntimeError(f"result {result_id} was not scored")
    result = TaskResult.objects.get(pk=result_id)
    if result.status not in ("passed", "failed") or not result.metrics:
        raise RuntimeError(f"result {result_id}: {result.status} {result.stderr[-2000:]}")
    return dict(result.metrics)


def worker_seconds(
    version: Any, files: dict[str, str], check: Callable[[dict[str, Any]], None]
) -> Callable[[], float]:
    """A new run submitted (not timed), then the wall seconds of its worker scoring."""

    def once() -> float:
        result_id = submit(version, files)
        started = time.perf_counter()
        metrics = worker_score(result_id)
        seconds = time.perf_counter() - started
        check(metrics)
        return seconds

    return once


def sandbox_start(sandbox: Any) -> Callable[[], None]:
    """An empty program (``true``) in a fresh sandbox of this backend, with a read-only
    mount of a fresh folder as an evaluation call has: on Docker a configuration never seen
    before, so never a container its pool made ahead of need, as for an evaluation."""

    def once() -> None:
        with tempfile.TemporaryDirectory(prefix="bench-start-") as folder:
            Path(folder).chmod(0o755)  # readable by the sandbox's uid, as lay_out makes it
            spec = SandboxSpec(command=["true"], mounts=(Mount(Path(folder), "/evaluation"),))
            if sandbox.run(spec).exit_code != 0:
                raise RuntimeError(f"{sandbox.name}: true failed")

    return once


def alternated(
    times: int,
    direct: Callable[[], None],
    worker: Callable[[], float],
    start: Callable[[], None] | None = None,
) -> dict[str, list[float]]:
    """The anchor, sandbox starts and the worker's path taken in turn, ``times`` rounds: the
    other helpers' load on the machine comes and goes, and each side then sees the same."""
    found: dict[str, list[float]] = {"anchor": [], "start": [], "worker": []}
    for _ in range(times):
        found["anchor"] += repeat(direct, 1)
        if start is not None:
            found["start"] += repeat(start, STARTS_PER_ROUND)
        found["worker"].append(worker())
    return found


# --- the workloads -------------------------------------------------------------------------


def prediction_figures(scratch: Path, sizes: dict[str, int], smoke: bool) -> list[Figure]:
    from evaluations.services import evaluation_import_folder  # noqa: PLC0415
    from packs.services import pack_import_folder  # noqa: PLC0415

    lines = sizes["lines"]
    predictions, labels, expected = prediction_files(lines)
    pack = prediction_pack(scratch / "pack", len(predictions))
    version = pack_import_folder(folder=pack).contract_version
    evaluation = prediction_evaluation(scratch / "evaluation", labels)
    evaluation_import_folder(folder=evaluation)
    files = {"predictions.jsonl": predictions}
    task = {"id": TASK_ID, "input": {"instructions": "-", "split": SPLIT}}
    root = host_tree(scratch / "direct", evaluation, task, files)
    label = f"{lines:,}-line predictions.jsonl"

    def direct() -> None:
        found = run_direct(root, evaluation)["metrics"]["accuracy"]
        if abs(found - expected) > 1e-12:
            raise RuntimeError(f"direct accuracy {found}, expected {expected}")

    def check(metrics: dict[str, Any]) -> None:
        if abs(metrics["accuracy"]["value"] - expected) > 1e-12:
            raise RuntimeError(f"accuracy {metrics['accuracy']}, expected {expected}")

    direct()  # warm the page cache before the anchor
    figures = []
    for backend, times in (("bwrap", sizes["runs"]), ("docker", sizes["docker_runs"])):
        sandbox = use_backend(backend)
        if sandbox is None:
            print(f"{backend} rows skipped: no {backend} sandbox on this worker")
            continue
        worker = worker_seconds(version, files, check)
        start = sandbox_start(sandbox)
        worker()  # warm-up: blob cache, image, imports
        start()
        found = alternated(times, direct, worker, start)
        anchor, measured = median(found["anchor"]), median(found["worker"])
        started = median(found["start"])
        limit = TARGET_RATIO * anchor + started
        figures += [
            Figure(
                WORKLOAD,
                f"{backend} round: anchor, {label} scored directly (no sandbox)",
                anchor * 1000,
                "ms",
                note=f"median of {times}, alternated with the rows below; accuracy {expected:.4f}",
            ),
            Figure(
                WORKLOAD,
                f"{backend}: one sandbox start (true, fresh mount)",
                started * 1000,
                "ms",
                note=f"median of {len(found['start'])}",
            ),
            Figure(
                WORKLOAD,
                f"{backend}: {label} through the worker (score_results)",
                measured * 1000,
                "ms",
                target=f"<= {limit * 1000:.0f} ms (1.5x anchor + 1 start)",
                met=None if smoke else at_most(measured, limit),
                note=f"median of {times}",
            ),
            Figure(WORKLOAD, f"{backend}: worker / anchor", measured / anchor, "x"),
        ]
    return figures


def arena_figures(scratch: Path, sizes: dict[str, int]) -> list[Figure]:
    from evaluations.services import evaluation_import_folder  # noqa: PLC0415
    from packs.services import pack_import_folder  # noqa: PLC0415

    version = pack_import_folder(folder=EXAMPLES / "nim-arena").contract_version
    evaluation = Path(arena_evaluation(scratch / "arena-evaluation", sizes["games"]))
    evaluation_import_folder(folder=evaluation)
    row = json.loads((EXAMPLES / "nim-arena" / "tasks.jsonl").read_text().splitlines()[0])
    figures: list[Figure] = []
    for name, files in players().items():
        root = host_tree(scratch / f"arena-{name.split()[0]}", evaluation, row, files)
        figures += arena_player_figures(version, evaluation, root, name, files, sizes)
    return figures


def arena_player_figures(
    version: Any,
    evaluation: Path,
    root: Path,
    name: str,
    files: dict[str, str],
    sizes: dict[str, int],
) -> list[Figure]:
    games, times = sizes["games"], sizes["arena_runs"]
    results: list[dict[str, Any]] = []

    def direct() -> None:
        results.append(arena_direct(root, evaluation, files))

    def check(metrics: dict[str, Any]) -> None:
        if metrics["win_rate"]["value"] != results[-1]["metrics"]["win_rate"]["value"]:
            raise RuntimeError(f"{metrics} differ from the direct run's {results[-1]}")

    direct()
    figures: list[Figure] = []
    for backend in ("bwrap", "docker"):
        if use_backend(backend) is None:
            print(f"{backend} arena rows skipped: no {backend} sandbox on this worker")
            continue
        worker = worker_seconds(version, files, check)
        worker()  # warm-up
        found = alternated(times, direct, worker)
        anchor, wall = median(found["anchor"]), median(found["worker"])
        win_rate = results[-1]["metrics"]["win_rate"]["value"]
        figures += [
            Figure(
                WORKLOAD,
                f"arena, {name}, {backend} round: {games:,} games directly (subprocess player)",
                anchor * 1000,
                "ms",
                note=f"median of {times}; {games / anchor:,.0f} games/s",
            ),
            Figure(
                WORKLOAD,
                f"arena, {name}: {games:,} games through the worker on {backend}",
                wall * 1000,
                "ms",
                note=f"median of {times}; win rate {win_rate:.3f}",
            ),
            Figure(WORKLOAD, f"arena, {name}, {backend}: games/s", games / wall, "games/s"),
            Figure(
                WORKLOAD,
                f"arena, {name}, {backend}: sandboxes + relay over direct",
                (wall - anchor) * 1000,
                "ms",
                note=f"{(wall - anchor) / wall:.0%} of the wall time",
                signed=True,
            ),
        ]
    return figures


def run(*, smoke: bool) -> list[Figure]:
    # As django_env gives a site: nothing would publish the generated pack, so no gate, and
    # no health check sharing the worker with what is measured.
    os.environ["SECUREBENCH_PUBLISH_GATE"] = "0"
    os.environ["SECUREBENCH_HEALTH_ON_UPLOAD"] = "0"
    django_setup()
    os.environ.setdefault("SECUREBENCH_DEFAULT_IMAGE", DEFAULT_LOCAL_IMAGE)
    sizes = SMOKE if smoke else FULL
    scratch = Path(tempfile.mkdtemp(prefix="securebench-bench-evaluations-"))
    try:
        return prediction_figures(scratch, sizes, smoke) + arena_figures(scratch, sizes)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main(run)
