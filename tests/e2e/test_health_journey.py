"""Pack health in a real browser, on `make run` with the site's defaults (health checks on
upload, the publish gate on): the admin uploads a pack whose short answer is printed in its
own question, lands on the draft's version page, watches the checks run on the report page
(live, no reload), reads the leak finding, publishes the version anyway with a written reason
and finds that reason beside the failing badge on the version page. Screenshots go to
tests/e2e/screenshots/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bench.site import SiteProcess, free_port
from tests.conftest import zip_folder
from tests.e2e.conftest import SCREENSHOTS
from tests.pack_health.support import leaky_rows as support_leaky_rows

PACK = "lighthouse-quiz"
REASON = "The leak is in a practice question; v2 drops it."
# The reference takes a few seconds to pass, so the checks are seen running.
SLOW_TESTS = (
    "import time\n\ndef check():\n    time.sleep(3)\n    assert double(4) == 8\n\ncheck()\n"
)


def leaky_rows() -> list[dict[str, Any]]:
    """The health tests' leaky pack (a short answer printed in its own question), plus a code
    task whose checks take a few seconds."""
    return [
        *support_leaky_rows(),
        {
            "id": "double",
            "family": "code_completion",
            "environment": {"image": "python:3.11-slim", "timeout_seconds": 60},
            "input": {"language": "python", "prompt": "Write double(x) in candidate.py.\n"},
            "eval": {
                "tests": {"source": "inline", "code": SLOW_TESTS},
                "canonical_solution": "def double(x):\n    return 2 * x\n",
            },
        },
    ]


@pytest.fixture
def gated_site(tmp_path: Path):
    """`make run` as it starts for a newcomer: every stored version checked, drafts gated."""
    port = free_port()
    env = {
        "SECUREBENCH_HEALTH_ON_UPLOAD": "1",
        "SECUREBENCH_PUBLISH_GATE": "1",
        "SECUREBENCH_SANDBOX": "bwrap",
    }
    process = SiteProcess(tmp_path / "data", port, env=env)
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        process.stop()


def test_a_planted_leak_is_found_and_the_draft_published_with_a_reason(
    gated_site, browser, make_pack, tmp_path
):
    from playwright.sync_api import expect

    process, base = gated_site
    folder = make_pack({"id": PACK, "version": 1, "title": "Lighthouse quiz"}, leaky_rows())
    archive = tmp_path / f"{PACK}.zip"
    archive.write_bytes(zip_folder(folder))
    password = process.admin_password()  # once the site and its worker are up
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/upload/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")

    # The upload lands on the new version: a draft, its health checks under way.
    page.set_input_files("#id_archive", archive)
    page.click("text=Upload and compile")
    page.wait_for_url(re.compile(rf"/packs/{PACK}/v1/$"))
    expect(page.locator("main")).to_contain_text("draft")
    expect(page.locator("#health")).to_be_visible()

    # The report page while the checks run: live progress, then the findings in place.
    page.goto(f"{base}/packs/{PACK}/versions/1/health/")
    progress = page.locator("#health-progress")
    expect(progress).to_contain_text(re.compile(r"verifications? finished|worker|queueing"))
    page.screenshot(path=SCREENSHOTS / "health-running.png", full_page=True)
    findings = page.locator("#findings")
    expect(findings).to_contain_text("reference_in_public", timeout=180_000)
    expect(page.locator("main")).to_contain_text("failing")
    leak = findings.locator("tr.finding", has_text="reference_in_public")
    expect(leak).to_contain_text("leaky")
    expect(leak).to_contain_text("failing")
    # The clean tasks passed their checks: no finding names them.
    expect(findings).not_to_contain_text("double")
    page.screenshot(path=SCREENSHOTS / "health-finding.png", full_page=True)

    # A failing report: publishing needs a written reason.
    page.fill("#id_reason", REASON)
    page.click("button:has-text('Publish anyway')")
    page.wait_for_url(re.compile(rf"/packs/{PACK}/v1/$"))
    banner = page.locator(".publish-reason")
    expect(banner).to_contain_text(REASON)
    expect(page.locator("#health")).to_contain_text("failing")
    page.screenshot(path=SCREENSHOTS / "health-published.png", full_page=True)
