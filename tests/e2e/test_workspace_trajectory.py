"""A terminal episode's trajectory read in a real browser (issue 12), on the real `make run`
(web server, Celery workers, bwrap or Docker as the machine offers): an agent works in a live
workspace through the stock `cube-standard` client — a command, a file written, the file
shown — and passes; the result page then shows, step by step, the commands it ran, what they
printed and the files each step wrote, while the page was open and without reloading it.
Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import json
import re
import uuid

from tests.e2e.conftest import SCREENSHOTS, admin_password
from tests.episodes.cube_driver import (
    CheckedBenchmark,
    act,
    bash,
    finish,
    remember,
    workspace_reset,
)

PACK = "terminal-files"  # examples/terminal-files, imported by `make run`
TASK = "terminal-files/version-file"
VERSION = "1.4.2\n"


def test_a_terminal_episodes_commands_outputs_and_files_read_on_the_result_page(site, browser):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/packs/{PACK}/v1/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/packs/{PACK}/v1/")
    # The run is the admin's own (its trajectory is the submitter's to read).
    panel = page.locator("#run-live")
    page.fill("#live_agent_name", "shell agent")
    panel.get_by_role("button", name="Open an episode run").click()
    expect(page.locator("h1")).to_contain_text("is open")
    url = remember(page.locator("#benchmark-url").inner_text().strip())
    page.get_by_role("link", name="Go to the run page ›").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    page.evaluate("window.__noReload = 1")

    # The agent: a command that prints, a file written, the file shown, then final_step.
    marker = f"made-{uuid.uuid4().hex[:12]}"
    bench = CheckedBenchmark(url)
    (config,) = [c for c in bench.task_configs() if c["metadata"]["id"] == TASK]
    task = bench.spawn(config)
    workspace_reset(task)
    made = bash(task, f"mkdir -p build && echo {marker} && ls -d build")
    assert made.error is None and marker in made.text, made.text
    written = act(task, "write_file", {"path": "build/VERSION", "content": VERSION})
    assert written.error is None, written.last
    shown = bash(task, "cat build/VERSION && echo version-shown")
    assert "version-shown" in shown.text, shown.text
    record = finish(task, TASK, None)
    assert record.verdict["info"]["status"] == "passed", record
    bench.shutdown()

    # The run page lists the episode (polling, no reload); its task leads to the result.
    row = page.locator("#episodes table.episodes-table tbody tr", has_text=TASK)
    expect(row.locator(".episode-done")).to_have_count(1, timeout=60_000)
    expect(row.locator(".status-passed")).to_have_count(1, timeout=60_000)
    assert page.evaluate("window.__noReload") == 1, "the page was reloaded"
    row.locator("td a", has_text=TASK).first.click()
    page.wait_for_url(re.compile(r"/runs/\d+/results/\d+/$"))

    steps = page.locator("#trajectory ol.timeline > li.step")
    expect(steps).to_have_count(5)
    expect(steps.locator(".step-title")).to_have_text(
        ["reset", "bash", "write_file", "bash", "final_step"]
    )
    # The objective and the workspace as the agent first saw them.
    expect(steps.nth(0)).to_contain_text("Create a folder named build")
    expect(steps.nth(0)).to_contain_text("Your workspace is")
    # Commands, and what they printed.
    expect(steps.nth(1)).to_contain_text("mkdir -p build")
    expect(steps.nth(1)).to_contain_text(marker)
    # The file written: the arguments, and the files-written list.
    expect(steps.nth(2)).to_contain_text("build/VERSION")
    expect(steps.nth(2).locator(".files-written")).to_contain_text("build/VERSION")
    expect(steps.nth(3)).to_contain_text("cat build/VERSION")
    expect(steps.nth(3)).to_contain_text("1.4.2")
    expect(steps.nth(3)).to_contain_text("version-shown")
    expect(steps.nth(4)).to_contain_text("done · reward 1.00")
    page.locator("#trajectory").screenshot(path=SCREENSHOTS / "workspace-trajectory.png")

    link = page.get_by_role("link", name="Download transcript (JSONL)")
    transcript = page.request.get(base + link.get_attribute("href"))
    assert transcript.ok
    lines = [json.loads(line) for line in transcript.text().splitlines()]
    assert [line["action"] for line in lines] == ["", "bash", "write_file", "bash", "final_step"]
    assert lines[2]["files_written"] == ["build/VERSION"]
