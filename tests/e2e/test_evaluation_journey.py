"""An evaluation that an author brings, in a real browser on the real `make run` (web server,
Celery worker, sandbox): a maintainer of the W2S example pack (also a reviewer and a
submitter) signs in, reads the pack's Evaluations section (the built-in scorers, no uploaded
evaluation yet), uploads `w2s-exact-match` as a zip, reads its page (metrics with their
direction, scope, digest) and finds it on the pack page; submits the example student's
artifact bundle through the submit page, re-scores the run with `w2s-exact-match@1` from
the run page, waits for it to finish in place, and reads its accuracy (the run's, with the
seeded bootstrap its interval comes from, and each task's) on the run page, a task's result
page and that evaluation's leaderboard: the numbers a plain count of the bundle against the
sealed strong labels gives. The evaluation page also fits a phone. Screenshots (evaluation-*.png)
go to tests/e2e/screenshots/."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, TEST_PASSWORD, zip_folder
from tests.e2e.conftest import SCREENSHOTS, admin_password
from tests.e2e.test_narrow_screens import PHONE, assert_fits

PACK = "w2s-predictions"  # `make run` imports it as v1
EVALUATION = "w2s-exact-match"
KEY = f"{EVALUATION}@1"
FOLDER = REPO_ROOT / "examples" / "evaluations" / EVALUATION
BUNDLE_SCRIPT = REPO_ROOT / "examples" / "agents" / "w2s_bundle.py"
AGENT = "w2s-student"
USER = "w2s-author"
CREATE_AUTHOR = f"""
from django.contrib.auth.models import Group, User
from packs.models import Pack
user = User.objects.create_user("{USER}", password="{TEST_PASSWORD}")
user.groups.add(*Group.objects.filter(name__in=["pack maintainer", "reviewer", "submitter"]))
Pack.objects.get(pack_id="{PACK}").maintainers.add(user)
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


def student_bundle(path: Path) -> list[dict]:
    """The example student's bundle (arithmetic solved, the rest the weak teacher's labels)."""
    made = subprocess.run(
        [sys.executable, str(BUNDLE_SCRIPT), "--student"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    path.write_text(made.stdout)
    return [json.loads(line) for line in made.stdout.splitlines() if line.strip()]


def task_accuracies(lines: list[dict]) -> dict[str, float]:
    """Each task's share of items whose predicted answer equals the sealed strong label
    exactly (the first prediction for an id counts), counted here in plain Python from the
    example folders, not by the site."""
    tasks = {
        json.loads(row)["id"]: json.loads(row)["input"]["split"]
        for row in (REPO_ROOT / "examples" / PACK / "tasks.jsonl").read_text().splitlines()
        if row.strip()
    }
    shares = {}
    for line in lines:
        split = tasks[line["task_id"]]
        labels_file = FOLDER / "sealed" / "strong_labels" / f"{split}.jsonl"
        labels = [json.loads(row) for row in labels_file.read_text().splitlines() if row]
        predictions: dict[str, str] = {}
        for row in line["candidate"]["files"]["predictions.jsonl"].splitlines():
            record = json.loads(row)
            predictions.setdefault(record["id"], record["answer"])
        right = sum(1 for label in labels if predictions.get(label["id"]) == label["answer"])
        shares[line["task_id"]] = right / len(labels)
    assert sorted(shares) == sorted(tasks) and len(tasks) == 3
    return shares


def test_an_author_uploads_an_evaluation_and_rescores_a_run_with_it(site, browser, tmp_path):
    from playwright.sync_api import expect

    process, base = site
    admin_password(process)  # the site is up, its examples imported
    manage(process, "shell", "-c", CREATE_AUTHOR)
    archive = tmp_path / f"{EVALUATION}.zip"
    archive.write_bytes(zip_folder(FOLDER))
    bundle = tmp_path / "bundle.jsonl"
    lines = student_bundle(bundle)
    shares = task_accuracies(lines)
    # The run's accuracy is the mean over its tasks, shown with two decimals.
    accuracy = f"{sum(shares.values()) / len(shares):.2f}"
    assert 0 < float(accuracy) < 1, shares

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/packs/{PACK}/")
    page.fill("#id_username", USER)
    page.fill("#id_password", TEST_PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/packs/{PACK}/")

    # The pack's Evaluations section: the built-in scorers, no uploaded evaluation yet.
    section = page.locator("#evaluations")
    expect(section.locator("h2")).to_have_text("Evaluations")
    expect(section).to_contain_text("securebench@1")
    expect(section.locator(".badge", has_text="built in").first).to_be_visible()
    expect(section.locator(".empty")).to_contain_text("No uploaded evaluation scores")
    page.screenshot(path=SCREENSHOTS / "evaluation-pack-empty.png", full_page=True)

    # The upload, from the section's own link.
    section.get_by_role("link", name="Upload an evaluation").first.click()
    page.wait_for_url(re.compile(r"/evaluations/upload/\?pack="))
    page.set_input_files("#id_archive", archive)
    page.click("text=Upload and check")
    page.wait_for_url(re.compile(rf"/evaluations/{EVALUATION}/v1/$"))
    main = page.locator("main")
    expect(page.locator("h1")).to_contain_text(KEY)
    expect(page.locator(".messages")).to_contain_text(EVALUATION)
    subtitle = page.locator(".subtitle").first
    expect(subtitle).to_contain_text("task scope")
    expect(subtitle).to_contain_text("primary metric accuracy")
    expect(subtitle).to_contain_text(re.compile(r"digest [0-9a-f]{8,}"))
    metrics = page.locator("table", has=page.locator("th", has_text="Better")).locator("tbody tr")
    expect(metrics).to_have_count(2)
    expect(metrics.nth(0)).to_contain_text("accuracy")
    expect(metrics.nth(0)).to_contain_text("↑ higher is better")
    expect(metrics.nth(0)).to_contain_text("primary")
    expect(metrics.nth(0)).to_contain_text("≥ 0.9")
    expect(metrics.nth(1)).to_contain_text("coverage")
    expect(main).to_contain_text("task: one call per task result")
    # Sealed files are listed by name and digest, their contents never shown outside debug mode.
    expect(main).to_contain_text("strong_labels/algebra.jsonl")
    expect(main.locator(".muted.small", has_text="debug mode to view").first).to_be_visible()
    assert '"alg-001", "answer"' not in page.content()
    # The program is shown to its pack's maintainers.
    expect(main).to_contain_text("program/score.py")
    digest = page.locator("button.copy[data-copy]").first.get_attribute("data-copy")
    assert digest and re.fullmatch(r"[0-9a-f]{64}", digest), digest
    page.screenshot(path=SCREENSHOTS / "evaluation-detail.png", full_page=True)

    # The evaluation page on a phone: nothing wider than the screen.
    phone = browser.new_page(viewport=PHONE)
    phone.context.add_cookies(page.context.cookies())
    phone.goto(page.url)
    expect(phone.locator("h1")).to_contain_text(KEY)
    assert_fits(phone, "evaluation-detail")
    phone.screenshot(path=SCREENSHOTS / "evaluation-detail-phone.png", full_page=True)
    phone.close()

    # Now on the pack page, with its scope, metrics and digest.
    page.goto(f"{base}/packs/{PACK}/")
    row = page.locator("#evaluations tbody tr", has_text=KEY)
    expect(row).to_have_count(1)
    expect(row).to_contain_text("accuracy ↑ · primary")
    expect(row).to_contain_text("coverage ↑")
    expect(row).to_contain_text("every version")
    expect(row.locator("td.mono")).to_have_attribute("title", digest)
    expect(page.locator("#evaluations .empty")).to_have_count(0)
    page.screenshot(path=SCREENSHOTS / "evaluation-pack-listed.png", full_page=True)

    # A run of the pack: the example student's artifact bundle through the submit page.
    page.goto(f"{base}/runs/submit/")
    page.select_option("#id_contract_version", label=f"{PACK} v1")
    page.fill("#id_agent_name", AGENT)
    page.set_input_files("#id_bundle", bundle)
    page.click("text=Submit and queue scoring")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_url = page.url
    expect(page.locator(".messages")).to_contain_text("stored with 3 candidates")
    evaluations = page.locator("table.evaluations tbody tr")
    expect(evaluations).to_have_count(1)
    expect(page.locator("#validity")).to_have_count(0)

    # Re-scored with the uploaded evaluation from the run page.
    page.select_option("#id_evaluator", KEY)
    page.click("button:has-text('Re-evaluate')")
    page.wait_for_url(re.compile(r"/runs/\d+/"))
    expect(evaluations).to_have_count(2)
    new = evaluations.filter(has_text=KEY)
    expect(new).to_have_count(1)
    # The selected evaluation is the new one, and the page finishes it by polling.
    expect(page.locator("#evaluation-view h2", has_text="Evaluation 2")).to_contain_text(KEY)
    expect(page.locator("#progress .progress-head")).to_contain_text(
        "3 of 3 tasks finished (100 %)", timeout=120_000
    )
    expect(page.locator("#evaluation-view .cards")).to_be_visible()
    expect(new.locator(".metric", has_text="accuracy")).to_contain_text(f"accuracy {accuracy}")
    expect(new.locator(".metric", has_text="coverage")).to_contain_text("coverage 1.00")
    shown = page.locator("p.metrics .metric", has_text="accuracy")
    expect(shown).to_contain_text(f"accuracy {accuracy}")
    expect(page.locator("#evaluation-view .cards .score")).to_contain_text(accuracy)
    # Its label names the metric and the seeded bootstrap its interval comes from.
    label = page.locator("#evaluation-view .cards .stat .label").first
    expect(label).to_contain_text("accuracy [95 % interval: bootstrap over 3 tasks")
    expect(label).to_contain_text(f"seed '{KEY}:run-")
    # Each task's own accuracy, beside its pass/fail verdict (passed at 0.9).
    results = page.locator("table.results tbody tr")
    expect(results).to_have_count(3)
    for task_id, share in shares.items():
        row = results.filter(has=page.get_by_role("link", name=task_id, exact=True))
        expect(row.locator(".metric", has_text="accuracy")).to_have_text(f"accuracy {share:.2f}")
        expect(row).to_contain_text("passed" if share >= 0.9 else "failed")
    # The built-in evaluation stays as it was.
    expect(evaluations.filter(has_text="securebench@1")).to_have_count(1)
    page.screenshot(path=SCREENSHOTS / "evaluation-run-rescored.png", full_page=True)

    # A failed task's page gives its accuracy too, and says which evaluation reported it.
    task_id, share = min(shares.items(), key=lambda item: item[1])
    page.get_by_role("link", name=task_id, exact=True).first.click()
    page.wait_for_url(re.compile(r"/runs/\d+/results/\d+/$"))
    verdict = page.locator("section.panel", has_text="Verdict")
    expect(verdict.locator("dd .status-failed")).to_be_visible()
    expect(verdict.locator("dd", has_text="accuracy")).to_contain_text(
        f"accuracy {share:.2f} · coverage 1.00 from {KEY}"
    )
    page.screenshot(path=SCREENSHOTS / "evaluation-result.png", full_page=True)

    # The leaderboard for that evaluation and metric ranks the run by it.
    page.goto(f"{base}/leaderboards/{PACK}/v1/?evaluation={KEY}&metric=accuracy")
    expect(page.locator("#id_evaluation")).to_have_value(KEY)
    expect(page.locator("#id_evaluation option", has_text=KEY)).to_have_count(1)
    expect(page.locator("#id_metric")).to_have_value("accuracy")
    expect(page.locator("#id_metric option")).to_have_text(["accuracy", "coverage"])
    expect(page.locator(".banner")).to_have_count(0)
    leader = page.locator("table.leaderboard tbody tr", has_text=AGENT)
    expect(leader).to_have_count(1)
    expect(leader.locator(".score")).to_contain_text(accuracy)
    expect(leader.get_by_role("link", name=re.compile(r"Run #\d+"))).to_have_attribute(
        "href", re.compile(re.escape(run_url.removeprefix(base)) + r"\?evaluation=2$")
    )
    page.screenshot(path=SCREENSHOTS / "evaluation-leaderboard.png", full_page=True)
