"""A leaderboard's score-against-cost chart in a real browser, on the real `make run`: four
runs submitted as agents submit them (a bundle through the API, run-level usage reported on
its first line; one reports nothing), scored by the real worker; then the board's plot, its
Pareto frontier, the dominated run named with its dominator, the run without a figure listed
under the chart, the axis switched by the plain form, and the chart at a phone's width.

No run here went through the model gateway, so every plotted figure is marked "reported".
Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import requests

from bench.common import manage, mc_answers, mc_pack_archive
from tests.e2e.conftest import SCREENSHOTS, admin_password

PACK = "cost-board"
TASKS = 10
# (agent, share of right answers, reported usage): "spendy" scores less than "frugal" for
# more dollars and more time, so "frugal" dominates it; "silent" reports nothing.
AGENTS = (
    (
        "frugal",
        0.6,
        {"usd": 0.0024, "input_tokens": 9000, "output_tokens": 1200, "wall_seconds": 40},
    ),
    (
        "spendy",
        0.3,
        {"usd": 0.0510, "input_tokens": 90000, "output_tokens": 20000, "wall_seconds": 400},
    ),
    (
        "strong",
        0.95,
        {"usd": 0.0300, "input_tokens": 50000, "output_tokens": 9000, "wall_seconds": 200},
    ),
    ("silent", 0.5, None),
)
CHART = "svg.cost-chart-svg"
PHONE = {"width": 390, "height": 844}
PAGE_WIDTH = "() => [document.documentElement.scrollWidth, window.innerWidth]"


def api_session(data_dir: Path) -> requests.Session:
    """The admin's API token, made by DRF's own command against the site's database."""
    printed = manage(data_dir, "drf_create_token", "admin").stdout
    session = requests.Session()
    session.headers["Authorization"] = "Token " + re.search(r"token (\w+)", printed).group(1)
    return session


def submit(api: requests.Session, base: str, folder: Path, agent: str, share: float, usage) -> None:
    """One bundle as an agent sends it, waited for until its evaluation is done."""
    bundle = folder / f"{agent}.jsonl"
    head = {"agent_name": agent, **({"usage": usage} if usage else {})}
    lines = [json.dumps({"run": head})]
    for task_id, letter in mc_answers(TASKS, pack_id=PACK, right_share=share):
        lines.append(
            json.dumps(
                {"task_id": task_id, "candidate": {"kind": "text", "text": f"Answer: {letter}"}}
            )
        )
    bundle.write_text("\n".join(lines) + "\n")
    with bundle.open("rb") as handle:
        answer = api.post(
            f"{base}/api/v1/runs/bundle/",
            files={"bundle": (bundle.name, handle)},
            data={"pack": PACK, "version": "1"},
            timeout=120,
        )
    assert answer.status_code == 201, answer.text[:500]
    status_url = answer.json()["evaluation"]["status_url"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if api.get(status_url, timeout=30).json()["done"]:
            return
        time.sleep(0.2)
    raise AssertionError(f"{agent}'s evaluation not done")


def test_a_board_plots_score_against_reported_cost_with_its_frontier(site, browser, tmp_path):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    api = api_session(tmp_path / "data")
    with mc_pack_archive(tmp_path, TASKS, pack_id=PACK).open("rb") as handle:
        uploaded = api.post(f"{base}/api/v1/uploads/", files={"archive": handle}, timeout=120)
    assert uploaded.status_code in (200, 201), uploaded.text[:500]
    for agent, share, usage in AGENTS:
        submit(api, base, tmp_path, agent, share, usage)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.goto(f"{base}/leaderboards/{PACK}/v1/")

    chart = page.locator(CHART)
    expect(chart).to_be_visible()
    expect(chart).to_have_attribute("role", "img")
    expect(chart.locator("title").first).to_have_text("pass_rate against dollars")
    # Three runs reported dollars: three hollow squares, no measured dot.
    expect(chart.locator("rect.pt-reported")).to_have_count(3)
    expect(chart.locator("circle.pt-measured")).to_have_count(0)
    expect(chart.locator("rect.pt-frontier")).to_have_count(2)  # frugal, strong
    assert re.fullmatch(
        r"M[\d.,]+( L[\d.,]+)+", chart.locator("path.frontier-line").get_attribute("d")
    )
    expect(page.locator(".chart-legend")).to_contain_text("reported by the agent, not measured")
    spendy = chart.locator("rect.pt-reported:not(.pt-frontier) title")
    expect(spendy).to_contain_text("spendy")
    expect(spendy).to_contain_text("(reported)")
    dominated = page.locator("table.dominated tbody tr")
    expect(dominated).to_have_count(1)
    expect(dominated).to_contain_text("spendy")
    expect(dominated.locator("td").nth(3)).to_contain_text("frugal")
    expect(page.locator("#no-cost-figure")).to_contain_text("silent")
    # The board's own table carries the same figures for screen readers.
    expect(page.locator("table.leaderboard")).to_contain_text("$0.0024")
    expect(page.locator("table.leaderboard .badge-frontier")).to_have_count(2)
    page.locator(".cost-board").screenshot(path=SCREENSHOTS / "cost-board-chart.png")
    page.screenshot(path=SCREENSHOTS / "cost-board-desktop.png", full_page=True)

    # The axis is a plain form: no script needed to switch it.
    page.select_option("#id_axis", "wall")
    page.click(".cost-board button[type=submit]")
    page.wait_for_url(re.compile(r"axis=wall"))
    expect(chart.locator("title").first).to_have_text("pass_rate against wall time")
    expect(chart.locator("rect.pt-reported")).to_have_count(3)
    expect(page.locator("table.leaderboard")).to_contain_text("40 s")

    phone = browser.new_page(viewport=PHONE)
    phone.goto(f"{base}/accounts/login/")
    phone.fill("#id_username", "admin")
    phone.fill("#id_password", password)
    phone.click("button[type=submit]")
    phone.goto(f"{base}/leaderboards/{PACK}/v1/")
    phone.wait_for_load_state("load")
    scroll_width, inner_width = phone.evaluate(PAGE_WIDTH)
    assert scroll_width <= inner_width
    box = phone.locator(CHART).bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    phone.screenshot(path=SCREENSHOTS / "cost-board-phone.png", full_page=True)
