"""What the Celery-path benchmarks share (workloads 3, 6, 10, 11): an oracle run submitted
to the site's own worker and timed until its evaluation is done, the pack it scores, and
another worker started beside `make run`'s, as `make worker` would start one."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from bench.common import REPO_ROOT, django_setup
from bench.site import Site

SMOKE_PACK = "python-functions"  # one of examples/, imported by `make run`
EVALUATION_TIMEOUT = 600.0


def submit_oracle(contract_version: Any, label: str) -> int:
    """An oracle run of the version, as `submit_run --oracle` makes one; its evaluation's id."""
    from runs.models import CandidateOrigin, RunSource  # noqa: PLC0415 - Django app loading: after django_setup()
    from runs.services import RunMetadata, run_submit_reference  # noqa: PLC0415 - Django app loading: after django_setup()

    _, evaluation = run_submit_reference(
        contract_version=contract_version,
        origin=CandidateOrigin.ORACLE,
        metadata=RunMetadata(agent_name=f"bench-{label}"),
        source=RunSource.COMMAND,
    )
    return evaluation.pk


def wait_done(evaluation_ids: list[int]) -> float:
    """Seconds until every evaluation is done (polled every 50 ms)."""
    from runs.models import Evaluation, EvaluationStatus  # noqa: PLC0415 - Django app loading: after django_setup()

    started = time.perf_counter()
    while time.perf_counter() - started < EVALUATION_TIMEOUT:
        done = Evaluation.objects.filter(pk__in=evaluation_ids, status=EvaluationStatus.DONE)
        if done.count() == len(evaluation_ids):
            return time.perf_counter() - started
        time.sleep(0.05)
    raise RuntimeError(f"evaluations {evaluation_ids} not done after {EVALUATION_TIMEOUT} s")


def code_version(site: Site, *, smoke: bool) -> Any:
    """The full HumanEval pack; for a smoke run, the small Python example `make run` imports."""
    if not smoke:
        site.manage("import_humaneval")
    django_setup(site.data_dir)
    from packs.models import ContractVersion  # noqa: PLC0415 - Django app loading: after django_setup()

    pack_id = SMOKE_PACK if smoke else "humaneval"
    return ContractVersion.objects.filter(pack__pack_id=pack_id).latest("version")


def start_worker(
    site: Site, *, hostname: str, queues: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Another Celery worker (2 processes) on the site's database and broker, in a session of
    its own so that the caller can stop it with its children; ``env`` adds to the site's."""
    assert site.process is not None
    return subprocess.Popen(
        [
            str(REPO_ROOT / ".venv" / "bin" / "celery"),
            "-A",
            "securebench_site",
            "worker",
            f"--queues={queues}",
            "--concurrency=2",
            f"--hostname={hostname}",
            "--loglevel=WARNING",
        ],
        cwd=REPO_ROOT,
        env={**site.process.env, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
