"""Debug mode in a real browser: a reviewer switches it on with a reason, opens a HumanEval
task, reveals the canonical solution and the tests, switches it off and can no longer see
them; a viewer never sees the switch. Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT, TEST_PASSWORD
from tests.e2e.conftest import SCREENSHOTS, admin_password

TASK = "/packs/humaneval-mini/v1/tasks/humaneval-mini/0"
CREATE_USERS = f"""
from django.contrib.auth.models import Group, User
for name in ("reviewer", "viewer"):
    user = User.objects.create_user(name, password="{TEST_PASSWORD}")
    user.groups.add(Group.objects.get(name=name))
"""


def manage(process, *args: str) -> None:
    """A manage.py command on the running site's database (the admin's shell)."""
    subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**process.env, "DEBUG": "1"},
        check=True,
        capture_output=True,
        timeout=120,
    )


def sign_in(browser, base: str, username: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}{TASK}")
    page.fill("#id_username", username)
    page.fill("#id_password", TEST_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{TASK}")
    return page


def test_a_reviewer_reveals_a_solution_in_debug_mode_and_a_viewer_never_can(
    site, browser, reference_packs
):
    from playwright.sync_api import expect

    process, base = site
    admin_password(process)  # the site is up
    manage(process, "import_pack", str(reference_packs / "humaneval-mini"))
    manage(process, "shell", "-c", CREATE_USERS)

    viewer = sign_in(browser, base, "viewer")
    expect(viewer.locator(".sealed-card")).to_have_count(2)
    expect(viewer.locator(".debug-switch")).to_have_count(0)
    expect(viewer.get_by_role("link", name="Reveal", exact=True)).to_have_count(0)
    expect(viewer.get_by_role("link", name="Audit log")).to_have_count(0)

    page = sign_in(browser, base, "reviewer")
    page.click(".debug-switch")
    page.fill("#id_reason", "checking HumanEval/0's reference solution")
    page.click("text=Switch debug mode on")
    page.wait_for_url(f"{base}{TASK}")
    banner = page.locator(".debug-banner")
    expect(banner).to_contain_text("privileged information visible, every view is recorded")
    solution = page.locator(".sealed-card", has_text="canonical_solution")
    solution.get_by_role("link", name="Reveal", exact=True).click()
    expect(solution.locator(".reveal-slot")).to_contain_text("return False")
    tests = page.locator(".sealed-card", has_text="tests")
    tests.get_by_role("link", name="Reveal", exact=True).click()
    expect(tests.locator(".reveal-slot")).to_contain_text("def check(candidate)")
    page.screenshot(path=SCREENSHOTS / "debug-mode-task.png", full_page=True)

    page.goto(f"{base}/audit/")
    expect(page.locator("#audit-table")).to_contain_text("viewed a sealed resource")
    page.screenshot(path=SCREENSHOTS / "audit-log.png", full_page=True)

    page.goto(f"{base}{TASK}")
    banner.locator("text=Switch off").click()
    expect(page.locator(".debug-banner")).to_have_count(0)
    page.goto(f"{base}{TASK}")
    expect(page.get_by_role("link", name="Reveal", exact=True)).to_have_count(0)
    direct = page.request.get(
        f"{base}/privileged/packs/humaneval-mini/v1/resource/"
        "?task=humaneval-mini/0&name=canonical_solution"
    )
    assert direct.status == 403
    assert "return False" not in direct.text()
