"""A run's whole journey in a real browser, on the real `make run` (web server and Celery
worker, filesystem broker): sign in as the printed admin, upload the MMLU reference pack as a
zip, submit a candidates bundle through the form, watch the progress bar reach 100 % and the
score, chart and results appear without a page reload, then read why a task failed, the runs
list and the leaderboard. Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import json
import re
from pathlib import Path

from runs.stats import wilson_interval
from tests.conftest import zip_folder
from tests.e2e.conftest import SCREENSHOTS, admin_password

PACK = "mmlu-abstract-algebra-mini"
AGENT = "journey-agent"


def write_bundle(tasks_jsonl: Path, path: Path) -> tuple[int, int]:
    """One text candidate per task: every third answer wrong, the others right. Returns the
    (right, wrong) counts."""
    rows = [json.loads(line) for line in tasks_jsonl.read_text().splitlines() if line.strip()]
    lines, wrong = [], 0
    for index, row in enumerate(rows):
        answer = row["eval"]["answer"]
        if index % 3 == 2:
            answer = "ABCD"[("ABCD".index(answer) + 1) % 4]
            wrong += 1
        candidate = {"kind": "text", "text": f"Answer: {answer}"}
        lines.append(json.dumps({"task_id": row["id"], "candidate": candidate}))
    path.write_text("\n".join(lines) + "\n")
    return len(rows) - wrong, wrong


def test_a_submitted_run_finishes_in_place_and_explains_its_failures(
    site, browser, reference_packs, tmp_path
):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    archive = tmp_path / f"{PACK}.zip"
    archive.write_bytes(zip_folder(reference_packs / PACK))
    bundle = tmp_path / "candidates.jsonl"
    right, wrong = write_bundle(reference_packs / PACK / "tasks.jsonl", bundle)
    total = right + wrong
    assert wrong and right

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/upload/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.set_input_files("#id_archive", archive)
    page.click("text=Upload and compile")
    page.wait_for_url(re.compile(rf"/packs/{PACK}/v1/$"))
    expect(page.locator(".messages")).to_contain_text(f"Stored version 1 of {PACK}")

    page.goto(f"{base}/runs/submit/")
    page.select_option("#id_contract_version", label=f"{PACK} v1")
    page.fill("#id_agent_name", AGENT)
    page.set_input_files("#id_bundle", bundle)

    # Text tasks are scored in well under a second: freeze the worker while the run page
    # loads, so that the page is caught queued and has to finish by polling.
    frozen = process.pause_worker()
    try:
        page.click("text=Submit and queue scoring")
        page.wait_for_url(re.compile(r"/runs/\d+/$"))
        expect(page.locator(".messages")).to_contain_text(f"stored with {total} candidates")
        progress = page.locator("#progress")
        # The whole live section (header, card, table, results) refreshes itself at once.
        section = page.locator("#evaluation-view")
        expect(section).to_have_attribute("hx-trigger", "every 2s")
        expect(progress.locator(".progress-head")).to_contain_text(f"0 of {total} tasks finished")
        expect(page.locator("#evaluation-view .cards")).to_have_count(0)
        page.screenshot(path=SCREENSHOTS / "run-in-progress.png", full_page=True)
        page.evaluate("window.__noReload = 1")
    finally:
        process.resume_worker(frozen)

    # The poll that sees the evaluation done swaps in the finished section in place.
    expect(progress.locator(".progress-head")).to_contain_text(
        f"{total} of {total} tasks finished (100 %)", timeout=30_000
    )
    cards = page.locator("#evaluation-view .cards")
    expect(cards).to_be_visible()
    assert page.evaluate("window.__noReload") == 1, "the page was reloaded"
    expect(section).not_to_have_attribute("hx-trigger", re.compile("every"))
    interval = wilson_interval(right, total)  # the score, then both ends of its interval
    expect(cards.locator(".score")).to_contain_text(
        f"{right / total:.2f} [{interval.low:.2f}, {interval.high:.2f}]"
    )
    expect(cards).to_contain_text(f"{right} / {total}")
    expect(page.locator("table.evaluations .status-done")).to_have_count(1)
    expect(page.locator("h2", has_text="Pass rate per family")).to_be_visible()
    expect(page.locator("svg.family-chart")).to_be_visible()
    rows = page.locator("table.results tbody tr")
    expect(rows).to_have_count(total)
    expect(rows.filter(has=page.locator(".status-failed"))).to_have_count(wrong)
    page.screenshot(path=SCREENSHOTS / "run-done.png", full_page=True)

    # The swapped-in section is live: the filter form still answers through htmx.
    page.select_option("#id_status", "failed")
    expect(rows).to_have_count(wrong)
    expect(rows.locator("td.mono")).to_have_text(["wrong_answer"] * wrong)
    assert page.evaluate("window.__noReload") == 1

    rows.first.locator("a").click()
    page.wait_for_url(re.compile(r"/runs/\d+/results/\d+/$"))
    expect(page.locator("h1 .status-failed")).to_be_visible()
    verdict = page.locator("section.panel", has_text="Verdict")
    expect(verdict.locator("dd .status-failed")).to_have_text(re.compile("failed"))
    expect(verdict.locator("dd.mono").first).to_have_text("wrong_answer")
    expect(page.locator(".code-block")).to_contain_text("Answer:")
    page.screenshot(path=SCREENSHOTS / "result-failed.png", full_page=True)

    page.goto(f"{base}/runs/")
    expect(page.locator("body")).to_contain_text(AGENT)
    page.screenshot(path=SCREENSHOTS / "run-list.png", full_page=True)

    page.goto(f"{base}/leaderboards/{PACK}/v1/")
    expect(page.locator("body")).to_contain_text(AGENT)
    expect(page.locator("body")).to_contain_text(f"{right / total:.2f}")
    page.screenshot(path=SCREENSHOTS / "leaderboard.png", full_page=True)
