"""Browser journeys: the real `make run` on a free port with a fresh data folder, driven by
Debian's Chromium through Playwright (never a downloaded browser). Screenshots go to
tests/e2e/screenshots/ (ignored by git)."""

from __future__ import annotations

import contextlib
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

from tests.conftest import REPO_ROOT

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
NO_CHROMIUM = "Debian's chromium is not installed (`make test` installs it)"


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
        self.env = env
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

    def worker_pids(self) -> list[int]:
        """The Celery worker processes (main and pool children) of this `make run` only: the
        processes of its session whose command line names celery."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                session = os.getsid(int(entry.name))
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, ProcessLookupError):
                continue
            if session == self.process.pid and any(b"celery" in part for part in command[:2]):
                pids.append(int(entry.name))
        return pids

    def pause_worker(self) -> list[int]:
        """Freeze the worker (SIGSTOP), so that a test can read a run while it is queued."""
        pids = self.worker_pids()
        assert pids, f"no Celery worker in `make run`'s session:\n{self.output()[-2000:]}"
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def resume_worker(pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is None:
            # A frozen worker would ignore SIGTERM until continued.
            self.resume_worker(self.worker_pids())
            os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=20)
        # `make` exits at once; the worker it started may still be shutting down (seen: one
        # lingering for many minutes). Nothing of this site may outlive the test.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


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
    """The first admin's password, printed once by `setup_site`; waits for the web server and
    the worker to be ready too."""
    password = process.wait_for(r"password: (\S+)").group(1)
    process.wait_for(r"development server at http")
    process.wait_for(r"celery@\S+ ready")
    return password


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
