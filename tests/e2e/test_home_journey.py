"""A newcomer's first hour on the home page, in a real browser on the real `make run`: sign in,
see the empty state's prompt, score an example pack's reference solutions with one click,
watch them run on the home page and land under the latest results (without a reload), find
them as reference runs on the board, then submit an agent's bundle and see it ranked on the
home page. Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import json
import re
from pathlib import Path

from runs.stats import wilson_interval
from tests.e2e.conftest import SCREENSHOTS, admin_password

PACK = "arithmetic-mc"
AGENT = "home-agent"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write_bundle(path: Path) -> tuple[int, int]:
    """Letters for the example's five questions (its rows write answers as letters, indexes,
    choice texts and lists): all right but the last. Returns (right, total)."""
    lines = []
    rows = [json.loads(line) for line in (EXAMPLES / PACK / "tasks.jsonl").read_text().splitlines()]
    for index, row in enumerate(rows):
        letter = _letter(row["eval"]["answer"], row["input"]["choices"])
        if index == len(rows) - 1:
            letter = "ABCD"[("ABCD".index(letter) + 1) % 4]
        candidate = {"kind": "text", "text": f"Answer: {letter}"}
        lines.append(json.dumps({"task_id": row["id"], "candidate": candidate}))
    path.write_text("\n".join(lines) + "\n")
    return len(rows) - 1, len(rows)


def _letter(answer: object, choices: list[str]) -> str:
    if isinstance(answer, list):
        return _letter(answer[0], choices)
    if isinstance(answer, int):
        return "ABCD"[answer]
    assert isinstance(answer, str)
    return answer if answer in "ABCD" else "ABCD"[choices.index(answer)]


def test_a_newcomer_scores_the_references_then_sees_an_agent_ranked_on_the_home_page(
    site, browser, tmp_path
):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    bundle = tmp_path / "candidates.jsonl"
    right, total = write_bundle(bundle)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")

    # No run yet: the prompt to score the reference solutions, one button per example.
    first = page.locator("#first-steps")
    expect(first).to_contain_text("No runs yet")
    button = first.locator("button", has_text=f"Score the reference solutions of {PACK} v1")
    expect(button).to_be_visible()
    page.screenshot(path=SCREENSHOTS / "home-empty.png", full_page=True)

    # Freeze the worker so the runs are caught being prepared.
    frozen = process.pause_worker()
    try:
        button.click()
        # The button lands on exactly its two runs, with their live state.
        page.wait_for_url(re.compile(r"/runs/\?runs=\d+,\d+$"))
        expect(page.locator(".messages")).to_contain_text(f"reference runs of {PACK} v1")
        table = page.locator("#run-table")
        expect(table).to_have_attribute("hx-trigger", "every 2s")
        expect(table.locator("tbody tr")).to_have_count(2)
        expect(table).to_contain_text("reference solutions")
        expect(table).to_contain_text("empty answers")
        expect(table.locator(".status-preparing")).to_have_count(2)
        page.screenshot(path=SCREENSHOTS / "reference-runs-preparing.png", full_page=True)
        page.evaluate("window.__noReload = 1")
    finally:
        process.resume_worker(frozen)

    # The list follows them to done by polling, then stops.
    expect(table.locator(".status-done")).to_have_count(2, timeout=60_000)
    expect(table).to_contain_text(f"{total} of {total} tasks finished (100 %)")
    expect(table).not_to_have_attribute("hx-trigger", re.compile("every"))
    assert page.evaluate("window.__noReload") == 1, "the page was reloaded"

    page.goto(f"{base}/")
    latest = page.locator("#latest-results")
    expect(latest).to_contain_text("reference solutions")
    expect(latest).to_contain_text("empty answers")
    expect(latest).to_contain_text(f"{total} / {total}")
    expect(page.locator("#now-running")).to_contain_text("the workers are idle")
    # Reference runs are never ranked.
    expect(page.locator("#board-tops")).to_contain_text("No ranked run yet")
    page.screenshot(path=SCREENSHOTS / "home-references-done.png", full_page=True)

    latest.locator("a", has_text=f"{PACK} v1").first.click()
    page.wait_for_url(re.compile(rf"/leaderboards/{PACK}/v1/$"))
    reference = page.locator("h2", has_text="Reference runs").locator("xpath=following::table[1]")
    expect(reference).to_contain_text("reference solutions")
    expect(reference).to_contain_text("empty answers")

    # An agent's bundle, through the submit form: ranked on the home page once scored.
    page.goto(f"{base}/runs/submit/")
    page.select_option("#id_contract_version", label=f"{PACK} v1")
    page.fill("#id_agent_name", AGENT)
    page.set_input_files("#id_bundle", bundle)
    page.click("text=Submit and queue scoring")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("#progress .progress-head")).to_contain_text(
        f"{total} of {total} tasks finished", timeout=60_000
    )

    page.goto(f"{base}/")
    tops = page.locator("#board-tops")
    expect(tops.locator(".top-list li").first).to_contain_text(AGENT)
    interval = wilson_interval(right, total)  # the score, then both ends of its interval
    expect(tops.locator(".top-list li").first).to_contain_text(
        f"{right / total:.2f} [{interval.low:.2f}, {interval.high:.2f}]"
    )
    expect(page.locator("#latest-results tbody tr").first).to_contain_text(AGENT)
    expect(page.locator("#my-runs")).to_contain_text(AGENT)
    page.screenshot(path=SCREENSHOTS / "home-ranked.png", full_page=True)
