"""One live site for the episode suites: `make run`'s web server and Celery worker on a fresh
data folder (bench.site.Site), started once for the whole package — a start costs 15-20 s.
Tests share it; each opens its own episode runs (a run is the unit of isolation: its own URL,
its own throttle, its own evaluation).

The worker verifies on bubblewrap (the sandbox the issue's figures name), and its reaper runs
every 2 s so that runs closed by expiry are seen to close within a test. The step throttle is
set to 10 steps a second per run: the development server answers about 30 steps a second in
all on a two-core machine, under the default 40, so eight clients could not reach the default
(the agents here back off when throttled, as a well-behaved client does).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bench.site import Site
from tests.components import probe_bwrap, require
from tests.episodes.cube_driver import remember

# In the worker's environment, so that a snippet that could read it would be seen doing so.
WORKER_MARKER_NAME = "SECUREBENCH_EPISODES_WORKER_MARKER"
WORKER_MARKER = f"worker-marker-{uuid.uuid4().hex}"
SITE_ENV = {
    "SECUREBENCH_SANDBOX": "bwrap",
    "SECUREBENCH_REAPER_SECONDS": "2",
    "SECUREBENCH_EPISODE_STEPS_PER_SECOND": "10",
    WORKER_MARKER_NAME: WORKER_MARKER,
}
EVALUATION_WAIT_SECONDS = 600


@dataclass(frozen=True)
class OpenedRun:
    run_id: int
    url: str  # the benchmark URL (a capability)


class LiveSite:
    """The started site, with the few things the suites ask of it."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.url = site.url
        self.imported: set[str] = set()  # reference packs imported so far
        self.api = httpx.Client(
            base_url=f"{site.url}/api/v1",
            headers={"Authorization": f"Token {site.admin_token()}"},
            timeout=30,
        )

    def output(self) -> str:
        assert self.site.process is not None
        return self.site.process.output()

    def manage(self, *args: str) -> str:
        return self.site.manage(*args).stdout

    def open_run(self, pack: str, *, oracle: bool = False, agent: str = "") -> OpenedRun:
        args = ["open_episode_run", "--pack", pack, "--json", "--base-url", self.url]
        args += ["--oracle"] if oracle else []
        args += ["--agent", agent] if agent else []
        opened = json.loads(self.manage(*args))
        assert opened["url"].startswith(f"{self.url}/cube/runs/"), opened
        return OpenedRun(run_id=opened["run"], url=remember(opened["url"]))

    def import_pack(self, folder: Path) -> None:
        printed = self.manage("import_pack", str(folder))
        assert "Stored version" in printed, printed

    def shell(self, code: str) -> Any:
        """Run Python in `manage.py shell` against the site's database; the JSON it printed
        last."""
        printed = self.manage("shell", "-c", code)
        return json.loads(printed.strip().splitlines()[-1])

    # --- the run API (docs/agents.md "Run API") ---

    def run(self, run_id: int) -> dict[str, Any]:
        response = self.api.get(f"/runs/{run_id}/")
        response.raise_for_status()
        return response.json()

    def evaluation(self, run_id: int, *, wait: float = EVALUATION_WAIT_SECONDS) -> dict[str, Any]:
        """Evaluation 1 of the run once done (polled: scoring is asynchronous)."""
        deadline = time.monotonic() + wait
        while True:
            response = self.api.get(f"/runs/{run_id}/evaluations/1/")
            response.raise_for_status()
            evaluation = response.json()
            if evaluation["done"] or time.monotonic() > deadline:
                assert evaluation["done"], evaluation
                return evaluation
            time.sleep(0.3)

    def results(self, run_id: int) -> dict[str, dict[str, Any]]:
        """Every task's result in evaluation 1 (all pages), by task id."""
        rows: list[dict[str, Any]] = []
        url: str | None = f"{self.url}/api/v1/runs/{run_id}/evaluations/1/results/"
        while url:
            response = self.api.get(url)
            response.raise_for_status()
            page = response.json()
            rows += page["results"]
            url = page["next"]
        return {row["task_id"]: row for row in rows}

    def episodes(self, run_id: int, *, wait: float = 60) -> list[dict[str, Any]]:
        """The run's episodes as the database holds them (no API names them all), once none
        is still marked scoring: an episode that ended without its client waiting for the
        verdict (closed, abandoned) gets it from the reaper."""
        deadline = time.monotonic() + wait
        while True:
            episodes = self._episode_rows(run_id)
            scoring = [e for e in episodes if e["status"] == "scoring"]
            if not scoring or time.monotonic() > deadline:
                assert not scoring, episodes
                return episodes
            time.sleep(0.5)

    def _episode_rows(self, run_id: int) -> list[dict[str, Any]]:
        return self.shell(
            "import json; from episodes.models import Episode; print(json.dumps(list("
            f"Episode.objects.filter(episode_run__run_id={int(run_id)}).order_by('id').values("
            "'task__task_id', 'attempt', 'status', 'ending', 'end_note', 'step_count', "
            "'verdict_status', 'verdict_reason', 'reward'))))"
        )


@pytest.fixture(scope="package")
def live() -> Iterator[LiveSite]:
    problem = probe_bwrap()
    if problem is not None:
        require("bwrap", problem)
    with Site(env=SITE_ENV) as site:
        live_site = LiveSite(site)
        try:
            yield live_site
        finally:
            live_site.api.close()


def write_pack(
    folder: Path,
    pack_id: str,
    rows: list[dict[str, Any]],
    *,
    budgets: dict[str, Any] | None = None,
    family: str = "multiple_choice",
) -> Path:
    """A small pack folder (manifest + tasks.jsonl) to import into the live site."""
    root = folder / pack_id
    root.mkdir(parents=True)
    manifest: dict[str, Any] = {"id": pack_id, "version": 1, "defaults": {"family": family}}
    if budgets:
        manifest["contract"] = {"budgets": budgets}
    (root / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (root / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return root


def mc_rows(pack_id: str, answers: list[str]) -> list[dict[str, Any]]:
    """Multiple-choice rows whose right answers are the given letters."""
    return [
        {
            "id": f"{pack_id}/q{index}",
            "input": {"question": f"Question {index}?", "choices": ["one", "two", "three"]},
            "eval": {"answer": letter},
        }
        for index, letter in enumerate(answers, start=1)
    ]
