"""Browser journeys: the real `make run` on a free port with a fresh data folder, driven by
Debian's Chromium through Playwright (never a downloaded browser). Screenshots go to
tests/e2e/screenshots/ (ignored by git)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.site import SiteProcess, free_port
from tests.components import REPO_ROOT, chromium_path, probe_chromium, require

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = chromium_path()
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(autouse=True)
def chromium_or_skip() -> None:
    """Every browser journey needs Chromium: a skip with the reason, or a failure when
    SECUREBENCH_REQUIRE names chromium. Checked before the site starts."""
    problem = probe_chromium()
    if problem is not None:
        require("chromium", problem)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[SiteProcess, str]]:
    """`make run` started, with its printed admin password read; yields (process, base URL)
    once the web server and the Celery worker are both ready."""
    port = free_port()
    process = SiteProcess(tmp_path / "data", port)
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        process.stop()


def admin_password(process: SiteProcess) -> str:
    return process.admin_password()


@pytest.fixture
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


# The example agent the agents' guide prints, run as a newcomer would against a benchmark URL.
EXAMPLE_AGENT = REPO_ROOT / "examples" / "agents" / "scripted_agent.py"


def run_example_agent(url: str) -> subprocess.CompletedProcess[str]:
    """The scripted example agent's whole episode run; its failure fails the caller's test."""
    agent = subprocess.run(
        [sys.executable, str(EXAMPLE_AGENT), url],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert agent.returncode == 0, agent.stdout + agent.stderr
    return agent
