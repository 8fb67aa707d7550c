"""An episode run's whole journey in a real browser, on the real `make run` (web server and
Celery worker): sign in as the printed admin, open an episode run from the arithmetic-mc
version page, read its URL (shown once), run the scripted example agent against it as a
newcomer would, watch the episodes finish on the run page without reloading it, then read a
task's trajectory and its transcript. Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import json
import re

from tests.e2e.conftest import SCREENSHOTS, admin_password, run_example_agent

PACK = "arithmetic-mc"
TASKS = 5  # examples/arithmetic-mc: none of its answers is A, the scripted agent's choice


def test_an_agent_runs_live_and_its_trajectory_reads_on_the_result_page(site, browser):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/packs/{PACK}/v1/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/packs/{PACK}/v1/")

    # The version page offers the live run; the admin is privileged, but without debug mode
    # the oracle box cannot be ticked.
    panel = page.locator("#run-live")
    expect(panel.locator("h3")).to_have_text("Run an agent live (CUBE)")
    expect(panel.locator("#live_oracle")).to_be_disabled()
    page.fill("#live_agent_name", "scripted agent")
    page.fill("#live_agent_version", "1.0")
    page.fill("#live_model_name", "no model")
    panel.screenshot(path=SCREENSHOTS / "episode-run-form.png")
    panel.get_by_role("button", name="Open an episode run").click()

    # The URL, once, with the warning, the expiry, the client snippet and the run link.
    expect(page.locator("h1")).to_contain_text("is open")
    url = page.locator("#benchmark-url").inner_text().strip()
    assert re.fullmatch(rf"{re.escape(base)}/cube/runs/[A-Za-z0-9_-]{{43}}", url), url
    expect(page.locator(".banner-secret")).to_contain_text("shown only now")
    expect(page.locator("#client-snippet")).to_contain_text(f'BenchmarkClient("{url}")')
    page.screenshot(path=SCREENSHOTS / "episode-run-opened.png", full_page=True)
    page.get_by_role("link", name="Go to the run page ›").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))

    episodes = page.locator("#episodes")
    expect(episodes.locator(".empty")).to_contain_text("No episode yet")
    # The run page refreshes its live section (episodes included) as one answer.
    expect(page.locator("#evaluation-view")).to_have_attribute("hx-trigger", "every 2s")
    expect(episodes.locator(".url-state")).to_contain_text("URL active")
    assert url.rsplit("/", 1)[-1] not in page.content()  # never shown again
    page.screenshot(path=SCREENSHOTS / "episode-run-waiting.png", full_page=True)
    page.evaluate("window.__noReload = 1")

    # The example agent, run as the README tells a newcomer to run it.
    agent = run_example_agent(url)
    assert f"{TASKS} tasks: {TASKS} failed; total reward 0" in agent.stdout

    # The table fills in by polling; once every episode is done and the run closed, the
    # polling stops.
    rows = episodes.locator("table.episodes-table tbody tr")
    expect(rows).to_have_count(TASKS, timeout=60_000)
    # Each episode ended (its lifecycle) and failed (its verdict): two labelled things.
    expect(rows.locator(".episode-done")).to_have_count(TASKS, timeout=60_000)
    expect(rows.locator(".status-failed")).to_have_count(TASKS)
    expect(page.locator("#evaluation-view")).not_to_have_attribute(
        "hx-trigger", re.compile("every"), timeout=60_000
    )
    expect(page.locator("#episodes .url-state")).to_contain_text("URL closed")
    expect(page.locator("#progress .progress-head")).to_contain_text(
        f"{TASKS} of {TASKS} tasks finished (100 %)", timeout=60_000
    )
    assert page.evaluate("window.__noReload") == 1, "the page was reloaded"
    page.screenshot(path=SCREENSHOTS / "episode-run-done.png", full_page=True)

    # A result page holds the task's trajectory: reset, the submission, final_step.
    first = page.locator("#episodes table.episodes-table tbody tr").first
    task_id = first.locator("td a").first.inner_text()
    first.locator("td a").first.click()
    page.wait_for_url(re.compile(r"/runs/\d+/results/\d+/$"))
    steps = page.locator("#trajectory ol.timeline > li.step")
    expect(steps).to_have_count(3)
    expect(steps.locator(".step-title")).to_have_text(["reset", "submit_answer", "final_step"])
    expect(steps.nth(0)).to_contain_text("objective")
    expect(steps.nth(1)).to_contain_text('"answer": "A"')
    expect(steps.nth(2)).to_contain_text("done · reward 0.00")
    page.screenshot(path=SCREENSHOTS / "episode-trajectory.png", full_page=True)

    link = page.get_by_role("link", name="Download transcript (JSONL)")
    transcript = page.request.get(base + link.get_attribute("href"))
    assert transcript.ok
    lines = [json.loads(line) for line in transcript.text().splitlines()]
    assert [line["method"] for line in lines] == ["cube/reset", "cube/step", "cube/step"]
    assert {line["task_id"] for line in lines} == {task_id}
