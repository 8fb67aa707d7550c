"""The contract in a real browser, on the real `make run`: the admin uploads version 2 of an
example pack with one answer changed and lands on the diff, which says the change is breaking
and the scores of v1 and v2 are not comparable; then re-scores a run with the pass@k
evaluation from its page and sees both evaluations, each with its scorer. Screenshots go to
tests/e2e/screenshots/."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO_ROOT, zip_folder
from tests.e2e.conftest import SCREENSHOTS, admin_password

PACK = "arithmetic-mc"  # `make run` imports it as v1
PASS_AT_K = "securebench-pass-at-k@1"


def version_two(tmp_path: Path) -> Path:
    """The example pack as version 2 with one answer changed (17 × 23 is still 391: B)."""
    folder = tmp_path / "arithmetic-mc-v2"
    shutil.copytree(REPO_ROOT / "examples" / PACK, folder)
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    manifest["version"] = 2
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    rows = [json.loads(line) for line in (folder / "tasks.jsonl").read_text().splitlines()]
    assert rows[0]["id"] == f"{PACK}/product" and rows[0]["eval"]["answer"] == "B"
    rows[0]["eval"]["answer"] = "C"
    (folder / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    archive = tmp_path / "arithmetic-mc-v2.zip"
    archive.write_bytes(zip_folder(folder))
    return archive


def pass_at_k_pack(tmp_path: Path) -> Path:
    """The same questions under a pack of their own whose contract allows pass@k."""
    folder = tmp_path / "arith-samples"
    shutil.copytree(REPO_ROOT / "examples" / PACK, folder)
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    manifest["id"] = "arith-samples"
    manifest["contract"] = {"compatible_evaluations": ["securebench@1", PASS_AT_K]}
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    text = (folder / "tasks.jsonl").read_text().replace(f'"{PACK}/', '"arith-samples/')
    (folder / "tasks.jsonl").write_text(text)
    return folder


def manage(process, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**process.env, "DEBUG": "1"},
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout


def test_a_breaking_upload_shows_its_diff_and_a_run_is_rescored_with_pass_at_k(
    site, browser, tmp_path
):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/upload/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")

    # Version 2 with one answer changed: the upload lands on what changed since v1.
    page.set_input_files("#id_archive", version_two(tmp_path))
    page.click("text=Upload and compile")
    page.wait_for_url(re.compile(rf"/packs/{PACK}/compare/\?from=1&to=2$"))
    expect(page.locator("main")).to_contain_text("not comparable")
    changed = page.locator("main").get_by_text(f"{PACK}/product").first
    expect(changed).to_be_visible()
    expect(page.locator("main")).to_contain_text("breaking")
    # The changed answer is sealed: its values are nowhere on the page.
    assert '"C"' not in page.content() and "Answer: C" not in page.content()
    page.screenshot(path=SCREENSHOTS / "contract-diff.png", full_page=True)

    # A run on a version that allows pass@k, re-scored with it from the run page.
    manage(process, "import_pack", str(pass_at_k_pack(tmp_path)))
    submitted = json.loads(
        manage(process, "submit_run", "--pack", "arith-samples", "--oracle", "--wait", "--json")
    )
    assert submitted["evaluator"] == "securebench@1" and submitted["status"] == "done"
    page.goto(f"{base}/runs/{submitted['run']}/")
    page.select_option("#id_evaluator", PASS_AT_K)
    page.click("button:has-text('Re-evaluate')")
    page.wait_for_url(re.compile(rf"/runs/{submitted['run']}/"))
    evaluations = page.locator("main")
    expect(evaluations).to_contain_text(PASS_AT_K, timeout=60_000)
    expect(evaluations).to_contain_text("securebench@1")
    # The pass@k evaluation finishes in place, with its metric shown beside its scorer.
    page.reload()
    expect(evaluations).to_contain_text("pass@1", timeout=60_000)
    expect(evaluations).to_contain_text("pass_rate")
    page.screenshot(path=SCREENSHOTS / "run-two-scorers.png", full_page=True)
