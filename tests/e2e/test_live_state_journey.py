"""A live episode run read from every side while the scripted example agent works, on the
real `make run`: at each poll the run page's header, progress card, evaluations table and
results, the episodes page, the runs list and the API all show the same phase and counts.

A poll reads the API before and after the pages; when the two answers differ the run moved
while the poll read it, and that poll proves nothing (it is counted, not compared). Every
poll where the run stood still must agree everywhere."""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
import time
from types import ModuleType

from tests.e2e.conftest import EXAMPLE_AGENT, SCREENSHOTS, admin_password

PACK = "arithmetic-mc"
TASKS = 5
STATE = re.compile(r"(\w+) (\d+) of (\d+) tasks? finished \((\d+) %\)")
FINAL = ("passed", "failed", "error", "pending")


def state_of(text: str) -> tuple[str, int, int, int]:
    """(word, finished, total, percent) of a rendered run state."""
    found = STATE.search(" ".join(text.split()))
    assert found, text
    word, finished, total, percent = found.groups()
    return word, int(finished), int(total), int(percent)


def api_state(page, base: str, run_id: str) -> tuple[str, int, int, int]:
    state = page.request.get(f"{base}/api/v1/runs/{run_id}/").json()["state"]
    return state["word"], state["finished"], state["total"], state["percent"]


def views_of(page, base: str, run_id: str) -> dict[str, tuple[str, int, int, int]]:
    """The run's state as each view shows it, each read from a fresh load."""
    seen: dict[str, tuple[str, int, int, int]] = {}
    page.goto(f"{base}/runs/{run_id}/")
    seen["header"] = state_of(page.locator("#run-head-state").inner_text())
    seen["card"] = state_of(page.locator("#progress .run-state").inner_text())
    seen["table"] = state_of(page.locator("table.evaluations tr.selected").inner_text())
    # Results: one row per finished task (open ones show no verdict yet).
    statuses = page.locator("#results table.results tbody td .status").all_inner_texts()
    finished = sum(1 for s in statuses if s.split()[-1] in FINAL)
    seen["results"] = (seen["card"][0], finished, seen["card"][2], seen["card"][3])
    # The episodes on the run page: an episode with a verdict is a finished task.
    verdicts = page.locator("#episodes table.episodes-table tbody tr td:nth-child(4) .status")
    seen["run page episodes"] = (
        seen["card"][0],
        verdicts.count(),
        seen["card"][2],
        seen["card"][3],
    )
    page.goto(f"{base}/runs/{run_id}/episodes/")
    seen["episodes page"] = state_of(page.locator("#episodes .run-state").inner_text())
    page.goto(f"{base}/runs/")
    row = page.locator("#run-table tr", has=page.locator(f'a[href="/runs/{run_id}/"]'))
    seen["runs list"] = state_of(row.first.locator(".run-state").inner_text())
    return seen


def example_agent() -> ModuleType:
    """The example agent's module, loaded from its file (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location("scripted_agent", EXAMPLE_AGENT)
    module = importlib.util.module_from_spec(spec)
    # Registered first: on Python 3.12 a dataclass looks its module up in sys.modules.
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


class PacedAgent:
    """The example agent's own calls, task by task; after each task it waits until the
    test has read the run standing still (or a minute has passed). Unpaced, on a loaded
    machine, every poll could overlap a step and no mid-run state would be compared."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.waiting = threading.Event()
        self.release = threading.Event()
        self.outcomes: list[object] = []
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        agent = example_agent()
        bench = agent.BenchmarkClient(agent.check_url(self.url))
        try:
            for config in bench.task_configs():
                self.outcomes.append(agent.attempt_task(bench, config))
                self.release.clear()
                self.waiting.set()
                self.release.wait(timeout=60)
                self.waiting.clear()
        finally:
            bench.shutdown()


def test_every_view_of_a_live_episode_run_shows_the_same_counts_at_each_poll(site, browser):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)  # waits for the site and its workers to be up
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/packs/{PACK}/v1/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/packs/{PACK}/v1/")
    page.fill("#live_agent_name", "state walker")
    page.locator("#run-live").get_by_role("button", name="Open an episode run").click()
    url = page.locator("#benchmark-url").inner_text().strip()
    page.get_by_role("link", name="Go to the run page ›").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = re.search(r"/runs/(\d+)/$", page.url).group(1)

    # A second tab stays on the run page and follows it by polling, never reloaded.
    watcher = context.new_page()
    watcher.goto(f"{base}/runs/{run_id}/")
    watcher.evaluate("window.__noReload = 1")

    agent = PacedAgent(url)
    agent.thread.start()
    stable, moved, while_working = [], 0, 0
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        working = agent.thread.is_alive()
        paused = agent.waiting.is_set()
        before = api_state(page, base, run_id)
        seen = views_of(page, base, run_id)
        after = api_state(page, base, run_id)
        if before != after:
            moved += 1
            continue
        mismatched = {name: value for name, value in seen.items() if value != before}
        assert not mismatched, f"API says {before}, but {mismatched}"
        stable.append(before)
        while_working += working
        if paused:
            agent.release.set()
        if not working and before[0] == "done":
            break
    agent.thread.join(timeout=60)
    assert len(agent.outcomes) == TASKS, "the example agent did not finish"

    assert stable[-1] == ("done", TASKS, TASKS, 100), stable
    assert while_working >= 1, f"no poll stood still while the agent worked ({moved} moved)"
    # Counts only ever grow, and the phase goes live → running → done.
    finished = [state[1] for state in stable]
    assert finished == sorted(finished), stable
    # The tab that polled itself reads the same final state, without a reload.
    # A locator, not a function: the site's CSP (no 'unsafe-eval') refuses a string to evaluate.
    expect(watcher.locator("#progress .run-state")).to_contain_text("done", timeout=60_000)
    assert state_of(watcher.locator("#run-head-state").inner_text()) == stable[-1]
    assert state_of(watcher.locator("#progress .run-state").inner_text()) == stable[-1]
    assert watcher.evaluate("window.__noReload") == 1, "the run page was reloaded"
    # An ended episode with a failed verdict: its lifecycle and its verdict, two things.
    rows = watcher.locator("#episodes table.episodes-table tbody tr")
    assert rows.count() == TASKS
    assert rows.locator(".episode-done").count() == TASKS
    assert rows.locator(".status-failed").count() == TASKS
    assert "✓ done" not in " ".join(rows.all_inner_texts())
    watcher.screenshot(path=SCREENSHOTS / "live-state-done.png", full_page=True)
