"""The README's promise, in a real browser: `make run`, sign in with the printed admin
credentials, see the example packs, upload humaneval-mini as a zip through the form, and read
its visibility map and a task's agent payload; then mistype an address and find the way back
from the site's own 404 page. Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import re

from tests.conftest import zip_folder
from tests.e2e.conftest import SCREENSHOTS, admin_password


def test_a_newcomer_uploads_humaneval_mini_and_reads_what_the_agent_sees(
    site, browser, reference_packs, tmp_path
):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    archive = tmp_path / "humaneval-mini.zip"
    archive.write_bytes(zip_folder(reference_packs / "humaneval-mini"))

    page = browser.new_page(viewport={"width": 1280, "height": 900})

    # Anonymous visitors see nothing but the sign-in page; it brings them back afterwards.
    page.goto(f"{base}/packs/")
    expect(page.locator("h1")).to_have_text("Sign in")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    expect(page.locator("#pack-table")).to_contain_text("python-functions")
    page.screenshot(path=SCREENSHOTS / "pack-list.png", full_page=True)

    page.goto(f"{base}/upload/")
    expect(page.locator("h1")).to_have_text("Upload a pack")
    page.set_input_files("#id_archive", archive)
    page.screenshot(path=SCREENSHOTS / "upload.png", full_page=True)
    page.click("text=Upload and compile")

    page.wait_for_url(re.compile(r"/packs/humaneval-mini/v1/$"))
    expect(page.locator(".messages")).to_contain_text("Stored version 1 of humaneval-mini")
    expect(page.locator("table.matrix")).to_be_visible()
    expect(page.locator("table.matrix .sq.lane-evaluation_inputs")).to_have_count(10)
    expect(page.locator("table.matrix .sq.lane-hidden")).to_have_count(10)
    page.screenshot(path=SCREENSHOTS / "visibility-map.png", full_page=True)

    page.click("text=humaneval-mini/0")
    payload = page.locator("#agent-payload")
    # Field by field, the prompt's code highlighted, never one escaped JSON string.
    expect(payload.locator("dt").first).to_have_text("prompt")
    expect(payload.locator(".highlight").first).to_be_visible()
    expect(payload).not_to_contain_text("\\n")
    expect(payload).not_to_contain_text("canonical_solution")
    expect(page.locator(".sealed-card")).to_have_count(2)
    expect(page.locator(".sealed-card").first).to_contain_text("<redacted>")
    page.screenshot(path=SCREENSHOTS / "task-agent-view.png", full_page=True)

    # A mistyped address: `make run` has DEBUG on, and still the site's own page, in its frame,
    # with a way back; never Django's technical 404 listing the site's URL patterns.
    response = page.goto(f"{base}/pakcs/humaneval-mini/")
    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("Page not found")
    expect(page.locator("main")).to_contain_text("/pakcs/humaneval-mini/")
    expect(page.locator("body")).not_to_contain_text("URLconf")
    expect(page.locator(".topbar")).to_contain_text("admin")
    page.screenshot(path=SCREENSHOTS / "not-found.png", full_page=True)
    page.locator("main").get_by_role("link", name="Guides").click()
    expect(page.locator("h1")).to_have_text("Guides")
