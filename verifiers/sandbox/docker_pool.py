"""Containers made ahead of need, each handed out once (the Docker backend at pace).

Creating and starting a container is most of a Docker sandbox's cost (bench/RESULTS.md):
the engine's ``create`` and ``start`` take 250-400 ms, against ~60 ms for the exec that runs
the command. So a process keeps, per container configuration it has needed repeatedly, a few
containers created and started idle (the keeper, ``sleep infinity``, and nothing else), and
a sandbox takes one instead of creating its own. Every guarantee of a fresh container stays:

- a container is handed out **once**: ``take`` pops it, and its id joins ``spent``, which
  ``_offer`` checks, so nothing can put a used container back (tested by trying);
- it is created with exactly the configuration a fresh one would get (``ContainerConfig`` is
  the key), and nothing but the keeper ever ran in it before the sandbox's own exec;
- it is removed by the sandbox that took it, like a fresh one.

What is pooled: only configurations asked for twice within ``WARM_SECONDS`` (a per-task
mount, say, is never asked for again and is not worth a spare), so only images already on
the host (a configuration names the image it resolved to). How many: as many as were in
use at once for that configuration (the worker's concurrency, as it shows), at most
``SECUREBENCH_DOCKER_POOL`` (default 4; ``0`` turns the pool off).

Idle containers are retired after ``IDLE_SECONDS`` (and at the process's exit), well within
the stale-container janitor's margin over the task time limit (runs.pipeline), so the
janitor never removes a container the pool still offers; a worker killed by SIGKILL leaves
its idle containers to that janitor, like its running ones. A container the janitor (or
anything else) removed anyway is noticed at its first exec, and the sandbox falls back to a
fresh one.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from verifiers.sandbox.base import CODE_LIMITS, Limits, Mount, SandboxSpec, SandboxUnavailable
from verifiers.sandbox.docker_engine import LABEL, docker_client, docker_module
from verifiers.sandbox.docker_exec import SANDBOX_UID

KEEPER_UID = 65533  # the keeper must not be killable by the run's `kill -9 -1`
POOL_ENV = "SECUREBENCH_DOCKER_POOL"
RUNTIME_ENV = "SECUREBENCH_DOCKER_RUNTIME"
DEFAULT_MAX_PER_CONFIG = 4
WARM_SECONDS = 120.0  # a configuration asked for twice within this is pooled
IDLE_SECONDS = 120.0  # an idle container older than this is replaced
COLD_SECONDS = 300.0  # a configuration not asked for in this long is no longer pooled
GVISOR = "runsc"
GVISOR_OWN_THREADS = 256  # the sentry's and gofer's host threads


@dataclass(frozen=True)
class ContainerConfig:
    """Everything a container is created with: two specs that agree here get equal
    containers (the wall clock, output caps and command are the exec's, not the container's)."""

    image: str
    limits: Limits
    workdir: str
    mounts: tuple[Mount, ...]
    capabilities: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]
    runtime: str | None
    workdir_mode: str


def config_for(spec: SandboxSpec, image: str, labels: dict[str, str]) -> ContainerConfig:
    limits = replace(spec.limits, wall_seconds=0.0, output_bytes=0)
    return ContainerConfig(
        image=image,
        limits=limits,
        workdir=spec.workdir,
        mounts=tuple(spec.mounts),
        capabilities=tuple(spec.capabilities),
        labels=tuple(sorted({**labels, LABEL: "1"}.items())),
        runtime=docker_runtime(),
        # 0711 when mounts lie inside it: the root exec that opens up their parent folders
        # (DockerProcess._open_mount_parents) must traverse it.
        workdir_mode="0711" if mount_parents(spec) else "0700",
    )


def docker_runtime() -> str | None:
    """SECUREBENCH_DOCKER_RUNTIME: the engine's OCI runtime for sandboxes (``runc``, ``crun``,
    ``runsc`` for gVisor, ...; empty: the engine's default). The engine must know it."""
    return (os.environ.get(RUNTIME_ENV) or "").strip() or None


def check_runtime(client: Any, runtime: str | None) -> None:
    """SandboxUnavailable naming the runtime when the engine does not offer it."""
    if runtime is None or runtime in _runtimes_offered:
        return
    try:
        known = set((client.info().get("Runtimes") or {}).keys())
    except Exception as exc:  # noqa: BLE001 - an engine fault: ours
        raise SandboxUnavailable(f"cannot ask the engine for its runtimes: {exc}") from exc
    if runtime not in known:
        raise SandboxUnavailable(
            f"{RUNTIME_ENV}={runtime} but the Docker engine offers {', '.join(sorted(known))}; "
            "add it to the engine's daemon.json `runtimes` (make sandbox-image does for crun "
            "and runsc)"
        )
    _runtimes_offered.add(runtime)  # an engine keeps its runtimes: asked once per process


_runtimes_offered: set[str] = set()


def mount_parents(spec: SandboxSpec) -> list[str]:
    """Folders strictly between the work dir and the targets of mounts inside it."""
    root = spec.workdir.rstrip("/")
    found: list[str] = []
    for mount in spec.mounts:
        if not mount.target.startswith(root + "/"):
            continue
        parts = mount.target[len(root) + 1 :].split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = root + "/" + "/".join(parts[:depth])
            if folder not in found:
                found.append(folder)
    return found


def _cpus(limits: Limits) -> float:
    # security.md §7: 1 CPU for the code profile, 2 above it (Limits has no cpu count field).
    return 1.0 if limits.memory_bytes <= CODE_LIMITS.memory_bytes else 2.0


NO_CGROUP_VIEW = "ro,nosuid,nodev,noexec,size=4k,nr_inodes=16,mode=0555"


def _tmpfs_opts(size: int, *, owner: int | None, mode: str) -> str:
    inodes = max(4096, size // 2048)  # bounds "millions of empty files" (A26)
    # Docker makes tmpfs noexec by default; a workspace's own scripts (./run.sh) must run,
    # as they would on bwrap. nosuid keeps set-id bits inert.
    opts = f"rw,exec,nosuid,nodev,size={size},nr_inodes={inodes},mode={mode}"
    return opts + (f",uid={owner},gid={owner}" if owner is not None else "")


def create_container(client: Any, config: ContainerConfig) -> Any:
    """A created (not started) container for ``config``; its keeper is the only process it
    will ever run by itself. No environment of ours: every exec brings its own."""
    docker = docker_module()
    lim = config.limits
    ulimits = [
        docker.types.Ulimit(name=name, soft=value, hard=value)
        for name, value in (
            ("cpu", lim.cpu_seconds),
            ("fsize", lim.file_size_bytes),
            ("nofile", lim.open_files),
            ("core", 0),
            ("msgqueue", 0),  # POSIX message queues are kernel memory outside every cap
            ("stack", lim.stack_bytes),
        )
    ]
    binds = {
        str(m.source): {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
        for m in config.mounts
    }
    extra = {"runtime": config.runtime} if config.runtime else {}
    pids_limit = lim.pids + 3  # + docker-init, the keeper, our teardown exec
    if config.runtime == GVISOR:
        # gVisor's kernel (the sentry) runs as host threads in the container's pids cgroup,
        # so the cgroup bounds its threads, not the run's processes: those are bounded
        # inside it by RLIMIT_NPROC, which gVisor counts per uid of its own kernel (under
        # runc it would count every process of the uid on the host, so only here).
        pids_limit += GVISOR_OWN_THREADS
        ulimits.append(docker.types.Ulimit(name="nproc", soft=lim.pids + 1, hard=lim.pids + 1))
    return client.containers.create(
        config.image,
        entrypoint=["sleep", "infinity"],
        command=[],
        user=f"{KEEPER_UID}:{KEEPER_UID}",
        working_dir="/",
        network_mode="none",
        cap_drop=["ALL"],
        cap_add=[c.upper().removeprefix("CAP_") for c in config.capabilities] or None,
        security_opt=["no-new-privileges"],
        read_only=True,
        tmpfs={
            "/tmp": _tmpfs_opts(lim.tmp_bytes, owner=None, mode="1777"),  # noqa: S108
            config.workdir: _tmpfs_opts(
                lim.work_bytes, owner=SANDBOX_UID, mode=config.workdir_mode
            ),
            # Empty and read-only: crun on a cgroup v1 host mounts a world-writable 1 MiB
            # tmpfs here, a store outside every declared cap (the mount suite found it).
            # Candidates need no view of the host's cgroups under any runtime.
            "/sys/fs/cgroup": NO_CGROUP_VIEW,
        },
        mem_limit=lim.memory_bytes,
        memswap_limit=lim.memory_bytes,
        pids_limit=pids_limit,
        nano_cpus=int(_cpus(lim) * 1e9),
        ulimits=ulimits,
        init=True,
        tty=False,
        stdin_open=False,
        hostname="sandbox",
        # No /dev/shm: Docker's default is a writable 64 MiB tmpfs outside our caps.
        ipc_mode="none",
        volumes=binds or None,
        labels=dict(config.labels),
        detach=True,
        **extra,
    )


def pool_limit() -> int:
    raw = (os.environ.get(POOL_ENV) or "").strip()
    if not raw:
        return DEFAULT_MAX_PER_CONFIG
    try:
        return max(0, int(raw))
    except ValueError as exc:
        raise SandboxUnavailable(f"{POOL_ENV} must be a whole number, got {raw!r}") from exc


@dataclass
class _Idle:
    id: str
    made: float


@dataclass
class _Demand:
    last_asked: float
    previous_asked: float = float("-inf")
    in_use: int = 0
    peak: int = 0  # most in use at once: the size this configuration's pool follows


class ContainerPool:
    """Per process: a filler thread keeps warm configurations stocked; ``take`` never waits
    for it (an empty pool is a miss, and the sandbox creates its own container)."""

    def __init__(self, client: Any, max_per_config: int) -> None:
        self.client = client
        self.max_per_config = max_per_config
        self._lock = threading.Condition()
        self._idle: dict[ContainerConfig, deque[_Idle]] = {}
        self._demand: dict[ContainerConfig, _Demand] = {}
        self._spent: set[str] = set()
        self.hits = 0
        self.misses = 0
        self._closed = False
        self._making = False  # the filler is making a container (drain waits for it)
        self._filler = threading.Thread(target=self._fill_forever, name="sb-pool", daemon=True)
        self._filler.start()

    # -- the sandboxes' side

    def take(self, config: ContainerConfig) -> str | None:
        """A started container nothing has used, or None (a miss). Counts the demand."""
        now = time.monotonic()
        with self._lock:
            demand = self._demand.setdefault(config, _Demand(last_asked=float("-inf")))
            demand.previous_asked, demand.last_asked = demand.last_asked, now
            demand.in_use += 1
            demand.peak = max(demand.peak, demand.in_use)
            idle = self._idle.get(config)
            while idle:
                entry = idle.popleft()
                if now - entry.made > IDLE_SECONDS:
                    self._retire(entry.id)
                    continue
                self._spent.add(entry.id)
                self.hits += 1
                self._lock.notify_all()
                return entry.id
            self.misses += 1
            self._lock.notify_all()
            return None

    def release(self, config: ContainerConfig) -> None:
        """The sandbox that took (or made) a container of ``config`` is done with it."""
        with self._lock:
            demand = self._demand.get(config)
            if demand is not None and demand.in_use > 0:
                demand.in_use -= 1

    def idle_ids(self) -> list[str]:
        with self._lock:  # re-entrant: paused() holds it too
            return [entry.id for queue in self._idle.values() for entry in queue]

    @contextlib.contextmanager
    def paused(self) -> Iterator[set[str]]:
        """Hold the filler still, no container half made, while the caller looks at the
        engine (tests that count containers); yields the ids of the idle ones."""
        with self._lock:
            self._lock.wait_for(lambda: not self._making, timeout=60)
            yield set(self.idle_ids())

    def drain(self) -> None:
        """Remove every idle container (process exit; tests that count containers), the one
        the filler may be making included: it is waited for, and nothing is wanted after."""
        with self._lock:
            self._demand.clear()
            self._lock.wait_for(lambda: not self._making, timeout=60)
            entries = [entry for queue in self._idle.values() for entry in queue]
            self._idle.clear()
        for entry in entries:
            self._retire(entry.id)

    def close(self) -> None:
        """Stop the filler (waiting out a container it is making, which it then removes)
        and remove the idle containers."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._filler is not threading.current_thread():
            self._filler.join(timeout=60)
        self.drain()

    # -- the filler's side

    def _offer(self, config: ContainerConfig, container_id: str) -> None:
        with self._lock:
            if container_id in self._spent:
                raise ValueError(f"container {container_id} was handed out once already")
            if self._closed:
                stale = True
            else:
                stale = False
                self._idle.setdefault(config, deque()).append(_Idle(container_id, time.monotonic()))
        if stale:
            self._retire(container_id)

    def _wanted(self) -> ContainerConfig | None:
        """A warm configuration with fewer idle containers than its peak use, if any."""
        now = time.monotonic()
        for config, demand in list(self._demand.items()):
            if now - demand.last_asked > COLD_SECONDS:
                del self._demand[config]
                for entry in self._idle.pop(config, ()):
                    threading.Thread(target=self._retire, args=(entry.id,), daemon=True).start()
                continue
            if demand.last_asked - demand.previous_asked > WARM_SECONDS:
                continue
            target = min(self.max_per_config, max(1, demand.peak))
            if len(self._idle.get(config, ())) < target:
                return config
        return None

    def _expire(self) -> list[str]:
        now = time.monotonic()
        old: list[str] = []
        for queue in self._idle.values():
            while queue and now - queue[0].made > IDLE_SECONDS:
                old.append(queue.popleft().id)
        return old

    def _fill_forever(self) -> None:
        while True:
            with self._lock:
                while not self._closed:
                    old = self._expire()
                    config = self._wanted()
                    if old or config is not None:
                        break
                    self._lock.wait(timeout=IDLE_SECONDS / 4)
                if self._closed:
                    return
                self._making = config is not None
            try:
                for container_id in old:
                    self._retire(container_id)
                if config is not None:
                    self._make(config)
            finally:
                with self._lock:
                    self._making = False
                    self._lock.notify_all()

    def _make(self, config: ContainerConfig) -> None:
        container = None
        try:
            container = create_container(self.client, config)
            container.start()
        except Exception:  # noqa: BLE001 - the sandbox will make its own and report why
            if container is not None:
                self._retire(container.id)
            with self._lock:  # don't spin on a failing engine
                self._lock.wait(timeout=5)
            return
        self._offer(config, container.id)

    def _retire(self, container_id: str) -> None:
        with contextlib.suppress(Exception):  # gone already: the janitor's or the engine's
            self.client.api.remove_container(container_id, force=True)


def remove_later(container: Any) -> None:
    """Remove ``container`` on a thread of its own. Not a daemon: a process exiting waits for
    it, so a worker's normal exit leaves no container behind (SIGKILL: the janitor's)."""

    def remove() -> None:
        with contextlib.suppress(Exception):  # gone already, or the janitor's later
            container.remove(force=True)
        with _removals_lock:
            _removals.discard(threading.current_thread())

    thread = threading.Thread(target=remove, name="sb-docker-rm")
    with _removals_lock:
        _removals.add(thread)
    thread.start()


def wait_for_removals(timeout: float = 30.0) -> None:
    """Wait until the containers handed to background removal are gone (tests count them)."""
    deadline = time.monotonic() + timeout
    while True:
        with _removals_lock:
            pending = list(_removals)
        if not pending or time.monotonic() > deadline:
            return
        pending[0].join(max(0.0, deadline - time.monotonic()))


_removals: set[threading.Thread] = set()
_removals_lock = threading.Lock()

_pools: dict[int, ContainerPool] = {}
_pools_lock = threading.Lock()


def process_pool() -> ContainerPool | None:
    """This process's pool (made on first use, after any fork); None when turned off."""
    limit = pool_limit()
    if limit == 0:
        return None
    pid = os.getpid()
    with _pools_lock:
        pool = _pools.get(pid)
        if pool is None:
            # Its own client: a pool must not share a connection pool made before a fork.
            pool = ContainerPool(docker_client(timeout=60), limit)
            _pools.clear()
            _pools[pid] = pool
            atexit.register(pool.close)
        return pool


def drain_process_pool() -> None:
    """Remove this process's idle containers now, and wait for the removals handed to
    background threads (a worker process's exit; tests that count containers)."""
    with _pools_lock:
        pool = _pools.get(os.getpid())
    if pool is not None:
        pool.drain()
    wait_for_removals()


__all__ = [
    "KEEPER_UID",
    "ContainerConfig",
    "ContainerPool",
    "check_runtime",
    "config_for",
    "create_container",
    "docker_runtime",
    "drain_process_pool",
    "mount_parents",
    "process_pool",
    "remove_later",
    "wait_for_removals",
]
