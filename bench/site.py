"""The real `make run` on a free port with a fresh data folder, for benchmarks and browser
tests: the web server and the Celery worker a newcomer gets, in a process group of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

import requests

from bench.common import REPO_ROOT, django_env, manage
from securebench_site.paths import default_episode_workspace_dir

ADMIN_USERNAME = "admin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _names_celery(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"celery" in part for part in command[:2])


class CollectedProcess:
    """A command in a session (and process group) of its own, its output collected line by
    line: `make run` here, a printed command line in the docs' tests."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.env = env
        self.process = subprocess.Popen(
            argv,
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

    def wait_for(self, pattern: str, timeout: float = 180) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        command = " ".join(self.process.args)
        raise AssertionError(f"`{command}` never printed {pattern!r}:\n{self.output()[-4000:]}")

    def session_pids(self) -> list[int]:
        """Every process still in this command's session (what it started, however deep)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ProcessLookupError):
                    if os.getsid(int(entry.name)) == self.process.pid:
                        pids.append(int(entry.name))
        return pids


class SiteProcess(CollectedProcess):
    """`make run` (or another target: `serve`) in a process group of its own, with its output
    collected line by line."""

    def __init__(
        self, data_dir: Path, port: int, *, env: dict[str, str] | None = None, target: str = "run"
    ) -> None:
        # A newcomer's shell: none of the caller's own database, broker or settings.
        super().__init__(
            ["make", "--no-print-directory", target, f"PORT={port}"],
            django_env(data_dir) | (env or {}),
        )

    def worker_pids(self) -> list[int]:
        """The Celery worker processes (main and pool children, of both workers: verifications
        and episodes' actions) of this `make run` only: the processes of its session whose
        command line names celery."""
        return [pid for pid in self.session_pids() if _names_celery(pid)]

    def pause_worker(self) -> list[int]:
        """Freeze the worker (SIGSTOP), so that a caller can read a run while it is queued."""
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
        # lingering for many minutes). Nothing of this site may outlive its user; the worker
        # runs in a process group of its own (Makefile), so it is found by session.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in self.worker_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # Workspaces of episodes still open when the site stopped (they live outside the
        # data folder, which its user removes).
        workspaces = self.env.get("SECUREBENCH_EPISODE_WORKSPACE_DIR") or str(
            default_episode_workspace_dir(Path(self.env["SECUREBENCH_DATA_DIR"]))
        )
        shutil.rmtree(workspaces, ignore_errors=True)

    def admin_password(self) -> str:
        """The first admin's password, printed once by `setup_site`; waits for the web server
        and both workers (verifications; episodes' actions) to be ready too."""
        password = self.wait_for(r"password: (\S+)").group(1)
        self.wait_for(r"development server at http")
        self.wait_for(r"celery@\S+ ready")
        self.wait_for(r"actions@\S+ ready")
        return password


class Site:
    """A started site: ``with Site() as site: site.url …``; everything is stopped at exit."""

    def __init__(self, *, env: dict[str, str] | None = None, data_dir: Path | None = None) -> None:
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="securebench-site-")) / "data"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._env = env
        self.process: SiteProcess | None = None
        self.password = ""

    def __enter__(self) -> Site:
        self.process = SiteProcess(self.data_dir, self.port, env=self._env)
        try:
            self.password = self.process.admin_password()
        except BaseException:
            self.process.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process is not None:
            self.process.stop()

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return manage(self.data_dir, *args)

    def admin_session(self) -> requests.Session:
        """A browser-like session signed in as the first admin (CSRF cookie and token sent)."""
        session = requests.Session()
        login = f"{self.url}/accounts/login/"
        session.get(login, timeout=30).raise_for_status()
        answer = session.post(
            login,
            data={
                "username": ADMIN_USERNAME,
                "password": self.password,
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
            headers={"Referer": login},
            timeout=30,
            allow_redirects=False,
        )
        if answer.status_code != 302:
            raise RuntimeError(f"sign-in failed: {answer.status_code}")
        session.headers["X-CSRFToken"] = session.cookies["csrftoken"]
        session.headers["Referer"] = self.url + "/"
        return session

    def admin_token(self) -> str:
        """An API token for the first admin (DRF's own command)."""
        printed = self.manage("drf_create_token", ADMIN_USERNAME).stdout
        found = re.search(r"token (\w+)", printed)
        if found is None:
            raise RuntimeError(f"no token in {printed!r}")
        return found.group(1)
