"""The README's promise, in a real browser: `make run`, sign in with the printed admin
credentials, see the example packs, upload humaneval-mini as a zip through the form, and read
its visibility map and a task's agent payload. Screenshots go to tests/e2e/screenshots/."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, zip_folder

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (`make test` installs it)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SiteProcess:
    """`make run` in a process group of its own, with its output collected line by line."""

    def __init__(self, data_dir: Path, port: int) -> None:
        env = {
            key: value
            for key, value in os.environ.items()
            # A newcomer's shell: none of the test run's own settings.
            if key
            not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY"}
        }
        env |= {"SECUREBENCH_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"`make run` never printed {pattern!r}:\n{self.output()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[SiteProcess, str]]:
    port = free_port()
    process = SiteProcess(tmp_path / "data", port)
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        process.stop()


def test_a_newcomer_uploads_humaneval_mini_and_reads_what_the_agent_sees(
    site, reference_packs, tmp_path
):
    from playwright.sync_api import expect, sync_playwright

    process, base = site
    password = process.wait_for(r"password: (\S+)").group(1)
    process.wait_for(r"development server at http")
    process.wait_for(r"celery@\S+ ready")
    archive = tmp_path / "humaneval-mini.zip"
    archive.write_bytes(zip_folder(reference_packs / "humaneval-mini"))
    SCREENSHOTS.mkdir(exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})

        page.goto(f"{base}/packs/")
        expect(page.locator("#pack-table")).to_contain_text("python-functions")
        page.screenshot(path=SCREENSHOTS / "pack-list.png", full_page=True)

        page.goto(f"{base}/upload/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", password)
        page.click("button[type=submit]")
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
        expect(payload).to_contain_text('"prompt"')
        expect(payload).not_to_contain_text("canonical_solution")
        expect(page.locator(".sealed-card")).to_have_count(2)
        expect(page.locator(".sealed-card").first).to_contain_text("<redacted>")
        page.screenshot(path=SCREENSHOTS / "task-agent-view.png", full_page=True)
        browser.close()
