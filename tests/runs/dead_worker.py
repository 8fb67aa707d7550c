"""A worker that dies mid-verification on Docker, and the second worker that cleans up.

Used by tests/security/test_docker_lifecycle.py: the first worker is SIGKILLed (its whole
process group, as the kernel's OOM killer or a lost machine would) while its container runs;
the second worker's beat runs the janitor (with an age limit short enough for a test) and the
reaper, and its pool scores the result again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from packs.services import pack_import_folder
from runs.bundle import ParsedBundle, parse_candidate_objects
from runs.models import Evaluation, RunSource, TaskResult
from runs.services import RunMetadata, run_submit_bundle
from tests.conftest import EXAMPLES
from tests.runs.conftest import FAST_PIPELINE_ENV, DockerRun, WorkerPool, wait_for

PACK = "python-functions"
# Long enough that the worker is killed mid-verification, short enough that the second
# attempt's containers stay far younger than the janitor's age limit below.
SLEEP_SECONDS = 3
JANITOR_ENV = {
    **FAST_PIPELINE_ENV,
    "SECUREBENCH_STALE_SANDBOX_SECONDS": "15",
    "SECUREBENCH_STALE_SANDBOX_CHECK_SECONDS": "2",
}
JANITOR_MESSAGE = "orphaned sandbox container"


@dataclass(frozen=True)
class DeadWorkerOutcome:
    orphans: list[str]  # containers running when the worker died
    status_at_kill: str
    janitor_log: list[str]  # the rescuer's log lines about removed orphans
    status: str
    attempts: int
    # Containers of this test once the rescuer has shut down: its warm pool may hold idle
    # ones while it runs (a live worker's stock, not a leak), and drains them on shutdown.
    left_after_shutdown: list[str]

    @property
    def removed_by_janitor(self) -> bool:
        return bool(self.janitor_log)


def _sleepy_evaluation() -> tuple[Evaluation, str]:
    folder = EXAMPLES / PACK
    version = pack_import_folder(folder=folder, source_name=PACK).contract_version
    with (folder / "tasks.jsonl").open() as rows:
        row = json.loads(rows.readline())
    code = f"import time\n\ntime.sleep({SLEEP_SECONDS})\n\n" + row["eval"]["canonical_solution"]
    candidate = {"task_id": row["id"], "candidate": {"kind": "code", "code": code}}
    _, evaluation = run_submit_bundle(
        contract_version=version,
        bundle=ParsedBundle(lines=parse_candidate_objects([candidate])),
        metadata=RunMetadata(agent_name="sleepy"),
        source=RunSource.API,
    )
    return evaluation, row["id"]


def dead_worker_scenario(workers: WorkerPool, docker_run: DockerRun) -> DeadWorkerOutcome:
    evaluation, task_id = _sleepy_evaluation()
    result = TaskResult.objects.get(evaluation=evaluation, task__task_id=task_id)
    doomed = workers.start("doomed", beat=False, env={**docker_run.worker_env, **FAST_PIPELINE_ENV})
    wait_for(lambda: bool(docker_run.containers(running_only=True)), 120, "the sandbox to start")
    doomed.kill()
    orphans = [container.id for container in docker_run.containers()]
    status_at_kill = TaskResult.objects.get(pk=result.pk).status

    rescuer = workers.start("rescuer", env={**docker_run.worker_env, **JANITOR_ENV})
    wait_for(
        lambda: not set(orphans) & {container.id for container in docker_run.containers()},
        120,
        f"the janitor to remove the dead worker's containers {orphans}",
    )
    wait_for(lambda: Evaluation.objects.get(pk=evaluation.pk).is_done, 120, "the result to finish")
    result.refresh_from_db()
    janitor_log = [line for line in rescuer.output().splitlines() if JANITOR_MESSAGE in line]
    rescuer.shut_down()
    return DeadWorkerOutcome(
        orphans=orphans,
        status_at_kill=status_at_kill,
        janitor_log=janitor_log,
        status=result.status,
        attempts=result.attempts,
        left_after_shutdown=[container.id for container in docker_run.containers()],
    )
