"""Real Celery workers for pipeline tests.

A worker is a separate ``celery -A securebench_site worker`` process started with the test's
database (a file for SQLite, the test database for PostgreSQL), data folder and broker (the
filesystem transport under the data folder, or the Redis URL CI sets). Tests that use it
need ``django_db(transaction=True)`` so the worker sees committed rows.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Short leases and a fast reaper, so fault tests finish in seconds rather than minutes.
FAST_PIPELINE_ENV = {
    "SECUREBENCH_LEASE_SECONDS": "6",
    "SECUREBENCH_REAPER_SECONDS": "2",
    "SECUREBENCH_REDISPATCH_SECONDS": "5",
}


@dataclass
class BrokerConfig:
    url: str
    transport_options: dict[str, Any]


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL the worker and its pool children at once: a machine that died."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def shut_down(self, timeout: float = 90.0) -> None:
        """A warm shutdown (SIGTERM, as `make run`'s Ctrl-C sends): the pool processes end
        through their own exit path (worker_process_shutdown)."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=timeout)

    def stop(self) -> None:
        # A warm shutdown waits for the beat and pool; tests only need the processes gone.
        if self.process.poll() is None:
            self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class WorkerPool:
    env: dict[str, str]
    root: Path
    started: list[WorkerProcess] = field(default_factory=list)

    def start(
        self,
        name: str = "w1",
        *,
        concurrency: int = 2,
        beat: bool = True,
        queues: str = "text,sandbox,actions",
        env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        log = self.root / f"worker-{name}.log"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "securebench_site",
            "worker",
            f"--hostname={name}@%h",
            f"--queues={queues}",
            f"--concurrency={concurrency}",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
        ]
        if beat:
            command += ["--beat", f"--schedule={self.root / f'beat-{name}'}"]
        handle = log.open("wb")
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env={**self.env, **(env or {})},
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() reaches the pool too
        )
        worker = WorkerProcess(name=name, process=process, log=log)
        self.started.append(worker)
        self._wait_ready(worker)
        return worker

    def _wait_ready(self, worker: WorkerProcess, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if worker.process.poll() is not None:
                raise AssertionError(f"worker {worker.name} exited:\n{worker.output()[-4000:]}")
            if " ready." in worker.output():
                return
            time.sleep(0.1)
        raise AssertionError(f"worker {worker.name} not ready:\n{worker.output()[-4000:]}")

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop()


def database_url() -> str:
    from django.db import connection  # noqa: PLC0415

    config = connection.settings_dict
    if config["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{config['NAME']}"
    user = config.get("USER") or ""
    password = f":{config['PASSWORD']}" if config.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{config['PORT']}" if config.get("PORT") else ""
    return f"postgres://{auth}{config.get('HOST') or '127.0.0.1'}{port}/{config['NAME']}"


def _reset_celery_pools(app: Any) -> None:
    # The app caches connections and producers built from the old broker settings, and
    # kombu keeps process-wide pools keyed by URL: a closed one would be handed out again.
    from kombu import pools  # noqa: PLC0415

    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    app.amqp._producer_pool = None
    pools.reset()


@pytest.fixture
def broker(isolated_data_dir: Path) -> Iterator[BrokerConfig]:
    """Point this process's Celery app at a broker private to the test (or a purged Redis)."""
    from django.conf import settings  # noqa: PLC0415

    from securebench_site.celery import app  # noqa: PLC0415

    url = os.environ.get("CELERY_BROKER_URL") or "filesystem://localhost/"
    if url.startswith("filesystem"):
        folder = isolated_data_dir / "broker"
        options: dict[str, Any] = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
            "polling_interval": 0.05,
        }
        for key in ("data_folder_in", "processed_folder", "control_folder"):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
    else:
        options = dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url = url
    app.conf.broker_transport_options = options
    _reset_celery_pools(app)
    if not url.startswith("filesystem"):
        with app.connection_for_write() as connection:
            for queue in ("text", "sandbox", "actions"):
                connection.default_channel.queue_purge(queue)
    yield BrokerConfig(url=url, transport_options=options)
    app.conf.broker_url, app.conf.broker_transport_options = saved
    _reset_celery_pools(app)


@pytest.fixture
def workers(
    broker: BrokerConfig, isolated_data_dir: Path, transactional_db: None
) -> Iterator[WorkerPool]:
    # Sandboxed code runs as unprivileged uids that must reach the scratch folders, and
    # pytest's own temp root is private (0700): a traversable folder of its own, then.
    scratch = Path(tempfile.mkdtemp(prefix="securebench-worker-tmp-"))
    scratch.chmod(0o755)
    env = {
        **os.environ,
        # A worker killed mid-verification leaves its scratch folder; keep it out of /tmp.
        "TMPDIR": str(scratch),
        "DATABASE_URL": database_url(),
        "SECUREBENCH_DATA_DIR": str(isolated_data_dir),
        "CELERY_BROKER_URL": broker.url,
        "SECUREBENCH_SANDBOX": os.environ.get("SECUREBENCH_PIPELINE_SANDBOX", "bwrap"),
        "PYTHONUNBUFFERED": "1",
    }
    pool = WorkerPool(env=env, root=isolated_data_dir)
    yield pool
    pool.stop_all()
    shutil.rmtree(scratch, ignore_errors=True)
    for worker in pool.started:  # shown by pytest when the test failed
        print(f"--- worker {worker.name} log (tail) ---\n{worker.output()[-6000:]}")


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def bwrap_or_skip() -> None:
    from tests.components import probe_bwrap, require  # noqa: PLC0415

    problem = probe_bwrap()
    if problem is not None:
        require("bwrap", problem)


# --- Docker sandboxes behind a worker -----------------------------------------------------------

DOCKER_TEST_LABEL = "securebench.test-run"


@dataclass
class DockerRun:
    """A worker environment whose Docker sandboxes carry a label of this test's own, so the
    test sees (and its janitor removes) only its containers, whatever else the engine runs."""

    client: Any
    run_id: str
    image: str

    @property
    def worker_env(self) -> dict[str, str]:
        return {
            "SECUREBENCH_SANDBOX": "docker",
            "SECUREBENCH_DEFAULT_IMAGE": self.image,
            "SECUREBENCH_SANDBOX_LABELS": f"{DOCKER_TEST_LABEL}={self.run_id}",
        }

    def containers(self, *, running_only: bool = False) -> list[Any]:
        return self.client.containers.list(
            all=not running_only,
            filters={"label": f"{DOCKER_TEST_LABEL}={self.run_id}"},
            # A container removed between listing and inspecting (the janitor, a teardown) is
            # simply gone, not an error.
            ignore_removed=True,
        )


@pytest.fixture
def docker_run() -> Iterator[DockerRun]:
    """Request it before ``workers``: its cleanup must come after the workers stopped."""
    from tests.components import docker_image, probe_docker, require  # noqa: PLC0415

    problem = probe_docker()
    if problem is not None:
        require("docker", problem)
    from verifiers.sandbox.docker import docker_client  # noqa: PLC0415

    run = DockerRun(docker_client(), f"pipeline-{uuid.uuid4().hex}", docker_image())
    yield run
    for container in run.containers():  # the machine stays clean even when a test fails
        with contextlib.suppress(Exception):
            container.remove(force=True)
