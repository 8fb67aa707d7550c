"""Workload 2: text scoring at scale.

* End to end: a 14,042-row generated multiple-choice pack uploaded through the API to the
  site `make run` starts (SQLite, filesystem broker, its Celery worker), then a 14,042-line
  candidates bundle (a mix of right and wrong letters) submitted through the API; timed from
  the POST of the bundle until the run's evaluation is done (status API polled every 100 ms).
  Each repetition is a new run; the counts are checked against the answers sent.
  Target: <= 30 s.
* Verifier core: ``verifiers.scoring.verify`` over the same 14,042 tasks in this process,
  no database. Target: >= 20,000 verdicts/s.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

from bench.common import (
    Figure,
    at_least,
    at_most,
    main,
    mc_answers,
    mc_pack_archive,
    mc_rows,
    median,
    repeat,
)
from bench.site import Site
from verifiers.scoring import verify
from verifiers.task import Candidate, TaskLanes

WORKLOAD = "2 text scoring"
FULL_ROWS = 14_042
SMOKE_ROWS = 300
PACK_ID = "bench-mc"
POLL_SECONDS = 0.1
EVALUATION_TIMEOUT = 600.0


# --- inputs --------------------------------------------------------------------------------


def answer_text(letter: str) -> str:
    return f"Answer: {letter}"


def candidates_bundle(folder: Path, rows: int) -> Path:
    """candidates.jsonl with one text answer per task (about 70 % right)."""
    path = folder / "candidates.jsonl"
    with path.open("w") as out:
        out.write(json.dumps({"run": {"agent_name": "bench-text"}}) + "\n")
        for task_id, letter in mc_answers(rows, pack_id=PACK_ID):
            candidate = {"kind": "text", "text": answer_text(letter)}
            out.write(json.dumps({"task_id": task_id, "candidate": candidate}) + "\n")
    return path


# --- the site ------------------------------------------------------------------------------


def _api(site: Site, token: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    return session


def upload_pack(site: Site, api: requests.Session, archive: Path) -> None:
    with archive.open("rb") as handle:
        answer = api.post(
            f"{site.url}/api/v1/uploads/", files={"archive": (archive.name, handle)}, timeout=600
        )
    if answer.status_code not in (200, 201):
        raise RuntimeError(f"upload refused: {answer.status_code} {answer.text[:500]}")


def submit_and_wait(
    site: Site, api: requests.Session, bundle: Path
) -> tuple[float, dict[str, Any]]:
    """Seconds from the bundle's POST until the evaluation is done, and the final status."""
    started = time.perf_counter()
    with bundle.open("rb") as handle:
        answer = api.post(
            f"{site.url}/api/v1/runs/bundle/",
            files={"bundle": ("candidates.jsonl", handle)},
            data={"pack": PACK_ID, "version": "1"},
            timeout=600,
        )
    if answer.status_code != 201:
        raise RuntimeError(f"bundle refused: {answer.status_code} {answer.text[:500]}")
    status_url = answer.json()["evaluation"]["status_url"]
    while time.perf_counter() - started < EVALUATION_TIMEOUT:
        body = api.get(status_url, timeout=60).json()
        if body["done"]:
            return time.perf_counter() - started, body
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"evaluation not done after {EVALUATION_TIMEOUT} s: {body}")


def check_counts(body: dict[str, Any], rows: int, right: int) -> None:
    counts = body["counts"]
    expected = {"passed": right, "failed": rows - right, "error": 0, "pending": 0}
    got = {key: counts[key] for key in expected}
    if got != expected or body["total"] != rows:
        raise RuntimeError(f"wrong counts: {got} (total {body['total']}), expected {expected}")


# --- the verifier core ---------------------------------------------------------------------


def verifier_core(rows: int, times: int) -> tuple[list[float], int]:
    """Verdicts per second of ``verify`` over every task, ``times`` repetitions, and how many
    passed (a wrong letter can pass: generated choices sometimes repeat a text, and choices
    with the same text are one choice)."""
    answers = dict(mc_answers(rows, pack_id=PACK_ID))
    pairs = [
        (
            TaskLanes(
                task_id=str(row["id"]),
                family="multiple_choice",
                public=dict(row["input"]),  # type: ignore[arg-type]
                evaluation_inputs={},
                hidden=dict(row["eval"]),  # type: ignore[arg-type]
            ),
            Candidate.of_text(answer_text(answers[str(row["id"])])),
        )
        for row in mc_rows(rows, pack_id=PACK_ID)
    ]

    def once() -> None:
        for lanes, candidate in pairs:
            verify(lanes, candidate)

    passed = sum(verify(lanes, candidate).passed for lanes, candidate in pairs)
    return [len(pairs) / seconds for seconds in repeat(once, times)], passed


# --- the workload --------------------------------------------------------------------------


def run(*, smoke: bool) -> list[Figure]:
    rows = SMOKE_ROWS if smoke else FULL_ROWS
    repetitions = 1 if smoke else 3
    core, right = verifier_core(rows, 3 if smoke else 7)
    folder = Path(tempfile.mkdtemp(prefix="securebench-text-"))
    archive = mc_pack_archive(folder, rows, pack_id=PACK_ID)
    bundle = candidates_bundle(folder, rows)
    seconds: list[float] = []
    with Site() as site:
        api = _api(site, site.admin_token())
        upload_pack(site, api, archive)
        for _ in range(repetitions):
            elapsed, body = submit_and_wait(site, api, bundle)
            check_counts(body, rows, right)
            seconds.append(elapsed)
    end_to_end = median(seconds)
    core_rate = median(core)
    return [
        Figure(
            WORKLOAD,
            f"{rows:,} MC candidates: submit → evaluation done (median of {len(seconds)})",
            end_to_end,
            "s",
            target="<= 30 s",
            met=None if smoke else at_most(end_to_end, 30.0),
            note="runs: " + ", ".join(f"{s:.1f}" for s in seconds),
        ),
        Figure(
            WORKLOAD,
            f"verifier core, {rows:,} MC verdicts in-process (median of {len(core)})",
            core_rate,
            "verdicts/s",
            target=">= 20,000 verdicts/s",
            met=None if smoke else at_least(core_rate, 20_000),
        ),
    ]


if __name__ == "__main__":
    main(run)
