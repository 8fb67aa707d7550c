"""The Docker backend (DESIGN.md §5, security.md §7), through the Docker SDK for Python.

One container per run that nothing else ever ran in, always removed. Its own main process is
only a keeper (``sleep infinity`` under ``--init``, uid 65533); everything of the run is a
``docker exec`` as uid 65534 into it. The container is created and started by the run, or
taken from the process's pool of idle ones made ahead of need (``docker_pool``: same
configuration, handed out once, nothing but the keeper ran in it):

1. one exec for copy-in and command (``COPY_IN_THEN_RUN``): a nonce line, then ``tar -x`` of
   a tar we build ourselves (regular files and folders only, owned by 65534) read by
   ``head -c`` into the size-capped tmpfs work dir, then the command itself with the rest of
   stdin; stdout/stderr on the exec's attach socket (8-byte frame headers demultiplexed
   here). With an ``ImageWorkdirSpec`` the image's own folder at the work dir comes first
   (read with the archive API from the created container before it starts, i.e. before the
   tmpfs hides it; such runs are never pooled);
2. after the command exits: ``kill -9 -1`` as 65534 until nothing of that uid is left (the
   keeper runs as another uid, so it survives and the tmpfs stays mounted);
3. collect: ``tar -c --no-recursion`` of the requested paths; the tar is walked here and
   only regular files are accepted (symlinks and anything else → ``refused``);
4. removal (``rm -f``: kill, wait, delete). With nothing to collect it starts as soon as
   the command's streams end; when the container's pids cgroup then shows nothing but
   docker-init and the keeper, it runs on a thread of its own and ``finish()`` does not wait
   for it: nothing of the run can outlive the result (A28). Otherwise ``finish()`` waits.

The attach socket has no timeout of its own: the client's would end the read of a command
silent for that long as if it had exited (seen: a fork bomb's verification came back as
our infrastructure error). The wall clock is the watchdog's.

Writable places: the two capped tmpfs mounts (work dir, /tmp) and mounts a spec declares
writable; the root filesystem is read-only, ``ipc_mode="none"`` drops Docker's default
writable 64 MiB ``/dev/shm``, and RLIMIT_MSGQUEUE=0 refuses POSIX message queues. ``/dev``
and ``/sys/fs/cgroup`` stay engine tmpfs folders owned by root (0755), which the sandbox uid,
holding no capability, cannot write.

Containers orphaned by a SIGKILLed worker are for ``remove_stale_containers`` (a janitor).

Why not ``put_archive``/``get_archive``: with a read-only root the daemon refuses to
extract ("container rootfs is marked read-only"), and on Docker 20.10 the archive API does
not see tmpfs mounts at all (checked on this machine); the tmpfs is gone once the container
stops, so files must be read while it runs, after the command's processes are dead.

Memory: ``mem_limit = memswap_limit``; the kernel OOM-kills inside the container cgroup.
``State.OOMKilled`` only reflects the keeper, so the cgroup's ``oom_kill`` counter is read
(v1 ``memory.oom_control`` or v2 ``memory.events``). Its file is found once the container
has started, while the cgroup surely exists: looked up at the end, a container the engine
had already stopped (its cgroup deleted) looked like a remote engine, and a run's own
SIGKILL was then taken for memory. Only where no counter was found at the start (a remote
engine) is an exit by SIGKILL that we did not send reported as memory, with a note.
Processes: the pids cgroup's ``max`` counter (forks refused at the limit) is watched during
the run; a run that had forks refused and then fails or times out reports ``process_limit``.

The image's own ``ENV`` stays (it belongs to the trusted image); on top come only the
explicit variables (PATH, HOME, LANG, PYTHONDONTWRITEBYTECODE, spec.env), never ours.
Images need ``sleep``, ``sh``, ``head`` and ``tar`` (every Debian/Alpine-based image has them).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import select
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, BinaryIO

from verifiers.sandbox.base import (
    Sandbox,
    SandboxProcess,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.sandbox.capture import (
    KILL_GRACE,
    OUTPUT_KILL_FACTOR,
    PATH_VALUE,
    OutputCapture,
    looks_like_alloc_failure,
)
from verifiers.sandbox.docker_collect import collect_files
from verifiers.sandbox.docker_engine import (
    DEFAULT_LOCAL_IMAGE,
    LABEL,
    docker_client,
    docker_module,
    remove_stale_containers,
    resolve_image,
)
from verifiers.sandbox.docker_exec import (
    COPY_IN_EXIT,
    COPY_IN_THEN_RUN,
    SANDBOX_UID,
    DockerExec,
    SocketWriter,
    oom_counter_path,
    pids_events_path,
    read_counter,
    read_counter_value,
    read_oom_kills,
    work_tar,
)
from verifiers.sandbox.docker_pool import (
    GVISOR,
    check_runtime,
    config_for,
    create_container,
    mount_parents,
    process_pool,
    remove_later,
    wait_for_removals,
)

EXIT_SIGKILL = 128 + 9
RUNSC_LOST_PROCESS = 128  # runsc exec's status when it lost the process with its sandbox
STOPPED_UNDER_COMMAND = "the container stopped under the command"  # a result note
# A container left with only these (docker-init and the keeper) holds nothing of the run.
IDLE_TASKS = 2
# How long a run whose command ended with no exit status waits for the container to stop
# before its OOM flag is read.
STATE_SETTLE_SECONDS = 3.0


@dataclass(frozen=True)
class ImageWorkdirSpec(SandboxSpec):
    """A run whose work dir starts as a copy of the image's own folder at ``workdir``.

    For repositories baked into a task's image (SWE-bench: ``/testbed``): the size-capped
    tmpfs work dir hides that folder, so its content is read from the created (not yet
    started) container and extracted into the tmpfs as uid 65534 before anything runs.
    The repository thus stays at the path the image's installs point to (editable
    installs, ``.pth`` files), and the image itself is never modified.
    """

    workdir_from_image: bool = True


class DockerProcess(SandboxProcess):
    def __init__(
        self,
        client: Any,
        spec: SandboxSpec,
        *,
        interactive: bool,
        labels: dict[str, str] | None = None,
        used: deque[str] | None = None,
    ) -> None:
        self.client = client
        self.api = client.api
        self.spec = spec
        self.limits = spec.limits
        self._notes: list[str] = []
        self._lock = threading.Lock()
        self._finished: SandboxResult | None = None
        self._killed = threading.Event()
        self._timed_out = False
        self._output_exceeded = False
        self._refused_forks = False  # a fork was refused at the pids limit during the run
        self._stopped_unasked = False  # the container stopped while the command ran, unasked
        self._stdout_cap = OutputCapture(self.limits.output_bytes)
        self._stderr_cap = OutputCapture(self.limits.output_bytes)
        self._threads: list[threading.Thread] = []
        self._container: Any = None
        self._oom_counter: str | None = None  # found at start; None: not readable here
        self._pids_events: str | None = None
        self._pids_refused = 0  # forks refused at the pids limit before the run began
        self._removed = False
        self._remove_lock = threading.Lock()
        # Set once the command's output streams end (pump done), before any early teardown.
        self._eof = threading.Event()
        self._ended: _Ended | None = None
        self._image_files: tempfile.SpooledTemporaryFile[bytes] | None = None
        self._nonce = secrets.token_hex(16).encode()
        self._started = time.monotonic()
        self.image, notes = resolve_image(client, spec.image)
        self._notes += notes
        self._config = config_for(spec, self.image, labels or {})
        check_runtime(client, self._config.runtime)
        # The image's own work dir must be read before the container starts: never pooled.
        self._pool = None if getattr(spec, "workdir_from_image", False) else process_pool()
        self.pooled = False
        try:
            self._acquire()
            if used is not None:
                used.append(self._container.id)
            self._setup(interactive)
        except BaseException:
            self._remove()
            raise
        self._watchdog = threading.Thread(target=self._watch, name="sb-docker-wd", daemon=True)
        self._watchdog.start()

    # -- setup

    def _env(self) -> dict[str, str]:
        return {
            "PATH": PATH_VALUE,
            "HOME": self.spec.workdir,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            **self.spec.env,
        }

    def _acquire(self) -> None:
        """A started container of this run's configuration: the pool's, or a fresh one."""
        container_id = self._pool.take(self._config) if self._pool is not None else None
        if container_id is not None:
            self._container = self.client.containers.prepare_model({"Id": container_id})
            self.pooled = True
        else:
            self._create()
        self._watch_cgroups()

    def _watch_cgroups(self) -> None:
        # Looked up while the container surely runs (the engine deletes its cgroups when it
        # stops): a container stopped early must not look like a remote engine.
        self._oom_counter = oom_counter_path(self._container.id)
        self._pids_events = pids_events_path(self._container.id)
        if self._pids_events is not None:
            self._pids_refused = read_counter(self._pids_events, "max") or 0

    def _create(self) -> None:
        try:
            self._container = create_container(self.client, self._config)
            self._image_files = self._read_image_workdir()
            self._container.start()
        except SandboxUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - an engine/image fault is ours, not theirs
            raise SandboxUnavailable(f"cannot start a container from {self.image}: {exc}") from exc

    def _setup(self, interactive: bool) -> None:
        """Everything before the command runs. A pooled container gone meanwhile (removed by
        the janitor, or the engine restarted) fails at its first exec: then a fresh one."""
        try:
            self._open_mount_parents()
            if self._image_files is not None:
                self._copy_image_workdir()
            self._exec_command(interactive)
        except SandboxUnavailable:
            if not self.pooled or self._container_running():
                raise
            self._notes.append("a pooled container was gone; a fresh one took its place")
            with contextlib.suppress(Exception):  # half-removed: finish the job
                self._container.remove(force=True)
            self.pooled = False
            self._create()
            self._watch_cgroups()
            self._open_mount_parents()
            self._exec_command(interactive)

    def _container_running(self) -> bool:
        try:
            return bool(self.api.inspect_container(self._container.id)["State"]["Running"])
        except Exception:  # noqa: BLE001 - not found: not running
            return False

    def _read_image_workdir(self) -> tempfile.SpooledTemporaryFile[bytes] | None:
        """The image's own folder at workdir as a tar (None if not asked or not there)."""
        if not getattr(self.spec, "workdir_from_image", False):
            return None
        docker = docker_module()
        try:
            stream, _stat = self._container.get_archive(self.spec.workdir)
        except docker.errors.NotFound:
            self._notes.append(f"the image has nothing at {self.spec.workdir}")
            return None
        spool: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(16 << 20)  # noqa: SIM115
        budget = self.limits.work_bytes * 2 + (1 << 20)  # tar headers; the tmpfs caps content
        for chunk in stream:
            budget -= len(chunk)
            if budget < 0:
                spool.close()
                raise SandboxUnavailable(f"the image's {self.spec.workdir} is too large")
            spool.write(chunk)
        spool.seek(0)
        return spool

    def _exec(self, cmd: list[str], *, user: str | None = None, **kwargs: Any) -> DockerExec:
        try:
            return DockerExec(
                self.api,
                self._container.id,
                cmd,
                user=user or f"{SANDBOX_UID}:{SANDBOX_UID}",
                environment=self._env(),
                **kwargs,
            )
        except Exception as exc:  # noqa: BLE001 - an engine fault is ours, not the run's
            raise SandboxUnavailable(f"cannot exec in the container: {exc}") from exc

    def _run_exec(self, cmd: list[str], data: bytes | BinaryIO = b"", **kwargs: Any) -> tuple:
        """Run a short trusted exec to completion; (exit code, stdout, stderr)."""
        ex = self._exec(cmd, **kwargs)
        out, err = bytearray(), bytearray()
        sender = threading.Thread(target=ex.send, args=(data,), daemon=True)
        sender.start()
        ex.pump(out.extend, err.extend)
        sender.join(KILL_GRACE)
        code = ex.exit_code()
        ex.close()
        return code, bytes(out), bytes(err)

    def _open_mount_parents(self) -> None:
        """Folders the engine made for mounts inside the work dir (a read-only asset at
        ``data/input.csv``) are root's 0755, so the sandbox uid could not add files beside
        the mount as it can on bwrap. Before anything of the run starts, a root exec (no
        capabilities: it may chmod only what root owns) opens them to the sandbox uid."""
        parents = mount_parents(self.spec)
        if not parents:
            return
        code, _, err = self._run_exec(["chmod", "0777", "--", *parents], user="0:0")
        if code != 0:
            raise SandboxUnavailable(
                f"cannot open the mount folders: {err.decode(errors='replace').strip()}"
            )

    def _copy_image_workdir(self) -> None:
        # The archive's one top entry is the folder itself: strip it.
        if self._image_files is None:
            return
        with self._image_files as archive:
            code, _, err = self._run_exec(
                ["tar", "-x", "-f", "-", "--strip-components=1", "-C", self.spec.workdir],
                archive,
            )
        if code != 0:
            raise SandboxUnavailable(
                f"copying the image's {self.spec.workdir} failed: "
                + err.decode(errors="replace").strip()
            )

    def _exec_command(self, interactive: bool) -> None:
        """One exec: the work files' copy-in, then the command (COPY_IN_THEN_RUN). The input
        (nonce line, tar, then the command's own stdin) is written before this returns for
        start(), so a caller's first write lands after it."""
        archive = (
            work_tar(self.spec.work_files, self._notes)
            if self.spec.work_files is not None
            else None
        )
        try:
            size = _stream_size(archive)
            # A prompt `kill -9 -1` right after the command exits leaves a daemon no time to
            # rewrite results; _collect() still verifies nothing is left before reading.
            wrapped = ["sh", "-c", COPY_IN_THEN_RUN, "sh", str(size), self.spec.workdir]
            # The wall clock starts with the command: an engine slow to create or start the
            # container (ours, under load) must not spend the candidate's time.
            self._started = time.monotonic()
            self._cmd = self._exec([*wrapped, *self.spec.command], workdir=self.spec.workdir)
            self._stdout_pipe_w: int | None = None
            if interactive:
                read_fd, self._stdout_pipe_w = os.pipe()
                os.set_blocking(self._stdout_pipe_w, False)  # a kill can interrupt a full pipe
                self.stdout = os.fdopen(read_fd, "rb")
                self.stdin = io.BufferedWriter(SocketWriter(self._cmd))  # type: ignore[assignment]
                self._pump_thread = self._thread(self._pump, self._to_pipe)
                self._send_prefix(archive, close=False)
            else:
                self._pump_thread = self._thread(self._pump, self._capture(self._stdout_cap))
                self._thread(self._send_input, archive)
                archive = None  # the sender closes it
        finally:
            if archive is not None:
                archive.close()

    def _send_prefix(self, archive: BinaryIO | None, *, close: bool) -> None:
        if self._cmd.send(self._nonce + b"\n", close=False) and archive is not None:
            self._cmd.send(archive, close=close)
        elif close:
            self._cmd.close_stdin()

    def _send_input(self, archive: BinaryIO | None) -> None:
        try:
            self._send_prefix(archive, close=False)
        finally:
            if archive is not None:
                archive.close()
        self._cmd.send(self.spec.stdin)

    def _copy_in_problem(self, exit_code: int | None, stderr: bytes) -> str | None:
        """The extraction's own error when the copy-in failed (ours, never the run's)."""
        if exit_code != COPY_IN_EXIT or not stderr.startswith(self._nonce + b" "):
            return None
        return stderr[len(self._nonce) + 1 :].decode(errors="replace").strip()

    def _thread(self, target: Any, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    def _pump(self, on_stdout: Any) -> None:
        try:
            self._cmd.pump(on_stdout, self._capture(self._stderr_cap))
            if self._stdout_pipe_w is not None:
                os.close(self._stdout_pipe_w)
                self._stdout_pipe_w = None
        finally:
            self._eof.set()
        if not self.spec.collect:
            self._end_early()

    def _end_early(self) -> None:
        """Read what finish() reports, then remove the container, as soon as the command ends.

        With nothing to collect no further exec is needed, so the teardown (mostly the
        engine's kill-and-wait) overlaps whatever the caller does meanwhile (e.g. finishing
        the other sandbox of a verification) instead of running inside finish(). finish()
        still waits for it: nothing of the run outlives the result (A28).
        """
        try:
            self._ended = self._ending()
        except Exception as exc:  # noqa: BLE001 - finish() falls back to its own path
            self._notes.append(f"early teardown skipped: {exc}")
            return
        self._remove(in_background=True)

    def _to_pipe(self, data: bytes) -> None:
        """Behave like a pipe: block while the caller is not reading, until a kill."""
        fd = self._stdout_pipe_w
        view = memoryview(data)
        while view and fd is not None:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                if self._killed.is_set():
                    return
                select.select([], [fd], [], 0.05)
            except OSError:
                return  # the caller closed its end

    def _capture(self, cap: OutputCapture) -> Any:
        limit = cap.cap * OUTPUT_KILL_FACTOR

        def feed(data: bytes) -> None:
            if cap.feed(data) > limit and not self._killed.is_set():
                self._output_exceeded = True
                # Not on this (pump) thread: container.kill() can block for seconds while
                # nobody drains the exec socket; keep reading and discarding meanwhile.
                self._killed.set()
                threading.Thread(target=self._kill, daemon=True).start()

        return feed

    # -- watching and killing

    def _watch(self) -> None:
        deadline = self._started + self.limits.wall_seconds
        # Not the pump thread's liveness: it goes on with the teardown after the command.
        while not self._eof.is_set() and not self._killed.is_set():
            if time.monotonic() >= deadline:
                self._timed_out = True
                self._kill()
                return
            # One read of the pids cgroup a tick: None once the engine deleted it (the
            # container stopped), else the count of forks refused so far.
            refused = None if self._pids_events is None else read_counter(self._pids_events, "max")
            if refused is not None and refused > self._pids_refused:
                # Seen while the cgroup exists. A run that then fails or runs out of time hit
                # its process limit: a fork bomb is the candidate's own failure, never an
                # error of ours to retry.
                self._refused_forks = True
            if self._pids_events is not None and refused is None and not self._stopped_by_us():
                # Under gVisor a memory overflow kills the sandbox's own kernel with the
                # container; the engine may keep the command's stream open until our wall
                # clock. Nothing can run any more: end the stream so the run ends now.
                self._notes.append(STOPPED_UNDER_COMMAND)
                self._stopped_unasked = True
                self._cmd.abandon()
                return
            self._killed.wait(0.05)

    def _stopped_by_us(self) -> bool:
        return self._killed.is_set() or self._eof.is_set()

    def _kill(self) -> None:
        self._killed.set()
        with contextlib.suppress(Exception):  # already dead is fine
            self._container.kill()
        # gVisor's runtime may leave the stream of a command it killed open; what is still
        # in flight has had the grace period to arrive.
        if not self._eof.wait(KILL_GRACE):
            self._cmd.abandon()

    def kill(self) -> None:
        self._notes.append("killed by the caller")
        self._kill()

    # -- finishing

    def finish(self, timeout: float | None = None) -> SandboxResult:
        with self._lock:
            if self._finished is None:
                try:
                    self._finished = self._finish(timeout)
                finally:
                    self._remove()
            return self._finished

    def _finish(self, timeout: float | None) -> SandboxResult:
        wall_left = self._started + self.limits.wall_seconds - time.monotonic()
        wait_for = wall_left + KILL_GRACE if timeout is None else min(timeout, wall_left)
        if not self._eof.wait(max(wait_for, 0.0)):
            if timeout is not None and timeout < wall_left:
                self._notes.append(f"killed by finish(timeout={timeout})")
            else:
                self._timed_out = True
            self._kill()
            self._eof.wait(KILL_GRACE)
        if self._eof.is_set():
            # The early teardown's API calls are bounded by the client's timeout.
            self._pump_thread.join()
        # None: collecting, or the pump is stuck: the container is still there.
        ended = self._ended or self._ending()
        killed, exit_code, oom = ended.killed, ended.exit_code, ended.oom
        self._cmd.close()
        collected: dict[str, bytes] = {}
        refused: list[str] = []
        if self.spec.collect and not killed:
            collected, refused = self._collect()
        for thread in self._threads:
            thread.join(KILL_GRACE)
        stderr = self._stderr_cap.value()
        problem = self._copy_in_problem(exit_code, stderr)
        if problem is not None:
            raise SandboxUnavailable(f"sandbox copy-in failed: {problem}")
        if not oom and looks_like_alloc_failure(exit_code, stderr):
            oom = True
            self._notes.append("memory_exceeded inferred from an allocation failure on stderr")
        limited = self._refused_forks and exit_code != 0
        if limited:
            self._notes.append(f"forks were refused at limits.pids ({self.limits.pids})")
        for name, cap in (("stdout", self._stdout_cap), ("stderr", self._stderr_cap)):
            if cap.truncated:
                self._notes.append(f"{name} truncated: kept {cap.cap} of {cap.total} bytes")
        return SandboxResult(
            exit_code=None if exit_code == EXIT_SIGKILL and (oom or limited) else exit_code,
            stdout=self._stdout_cap.value(),
            stderr=stderr,
            duration_seconds=time.monotonic() - self._started,
            backend="docker",
            image=self.image,
            timed_out=self._timed_out,
            memory_exceeded=oom,
            output_exceeded=self._output_exceeded,
            process_limit=limited,
            collected=collected,
            refused=tuple(refused),
            notes=tuple(self._notes),
        )

    def _ending(self) -> _Ended:
        """How the command ended, from one read of the container's state."""
        killed = self._killed.is_set()
        exit_code, state = self._command_exit(killed)
        if state is None:
            settle = (exit_code is None or self._stopped_unasked) and not killed
            state = self._container_state(settle=settle)
        oom = self._oom_happened(exit_code, killed, state)
        if not oom:
            self._note_gvisor_kernel_exit(state)
        return _Ended(killed, exit_code, oom)

    def _command_exit(self, killed: bool) -> tuple[int | None, dict[str, Any] | None]:
        """The command's exit status (None when we killed it), and the container's settled
        state when reading the status needed it. A command whose container stopped under it
        died by SIGKILL, as every process of a pid namespace does when its init dies: the
        engine's own record of the exec races the container's exit (under load it answered
        126, or nothing)."""
        if killed:
            return None, None
        if self._stopped_unasked:
            return EXIT_SIGKILL, None
        code = self._cmd.exit_code()
        if code is not None and not self._maybe_lost_with_its_kernel(code):
            return code, None
        # No status at all, or gVisor's "lost it": seen before the watchdog's next look, the
        # container may have stopped under the command (gVisor's kernel killed with it).
        state = self._container_state(settle=True)
        if state.get("Running"):
            return code, state
        self._notes.append(STOPPED_UNDER_COMMAND)
        self._stopped_unasked = True
        return EXIT_SIGKILL, state

    def _maybe_lost_with_its_kernel(self, code: int) -> bool:
        """Under gVisor, an exec whose sandbox kernel died under it answers runsc's own
        failure status ("waiting on PID …: urpc method … failed: EOF"), not the command's:
        seen when a fork bomb brought the kernel down (CI, 2026-11-29)."""
        return self._config.runtime == GVISOR and code == RUNSC_LOST_PROCESS

    def _oom_happened(self, exit_code: int | None, killed: bool, state: dict[str, Any]) -> bool:
        if state.get("OOMKilled"):
            return True
        if self._killed_from_outside(state):
            return True
        if self._oom_counter is not None:
            kills = read_oom_kills(self._oom_counter)
            if kills is not None:
                return kills > 0
            # Readable at the start, gone now: the container was stopped (by our kill or by
            # the engine) before the run ended. That is no sign of memory use; a kernel OOM
            # kill of the keeper itself shows in State.OOMKilled above.
            if not self._killed.is_set():
                self._notes.append("memory counter not read: the engine stopped the container")
            return False
        # A remote engine: guess from the exit, unless the kill was ours (read again: the
        # watchdog may have fired after the caller looked).
        if exit_code == EXIT_SIGKILL and not killed and not self._killed.is_set():
            self._notes.append("memory_exceeded inferred from SIGKILL (cgroup not readable)")
            return True
        return False

    def _killed_from_outside(self, state: dict[str, Any]) -> bool:
        """Under gVisor, a container that stopped under the command with SIGKILL, neither
        killed by us nor at its process limit, was killed for its memory: the host's OOM
        killer takes gVisor's kernel with the candidate, and the engine may record the exit
        before the OOM event and never set OOMKilled (seen under load in CI). Under runc the
        kernel kills the candidate's process and the container lives on, so a container
        SIGKILLed from outside is an operator's or the engine's doing, not memory use."""
        if self._config.runtime != GVISOR or not self._stopped_unasked or self._refused_forks:
            return False
        if state.get("ExitCode") != EXIT_SIGKILL:
            return False
        self._notes.append("memory_exceeded inferred: the container was SIGKILLed, not by us")
        return True

    def _note_gvisor_kernel_exit(self, state: dict[str, Any]) -> None:
        """Under gVisor, a container that exited on its own (not SIGKILLed) under the command
        lost its kernel: the sentry exits when the pids cgroup refuses it host threads, which
        a fork bomb inside brings about. Named a process-limit failure, as Docker names
        forks refused at the cgroup's cap, since the cgroup is gone before we can read it."""
        if self._config.runtime != GVISOR or not self._stopped_unasked:
            return
        status = state.get("ExitCode")
        if status in (None, 0, EXIT_SIGKILL) or self._refused_forks:
            return
        self._refused_forks = True
        self._notes.append(f"gVisor's kernel exited (status {status}): taken as threads refused")

    def _container_state(self, *, settle: bool) -> dict[str, Any]:
        """The container's State; with ``settle``, once it is no longer running (a few
        seconds at most). An exec that ends with no exit status lost its process with the
        whole container: under gVisor a memory overflow kills the sandbox's kernel, not the
        candidate, and the engine records the OOM kill only as the container stops."""
        deadline = time.monotonic() + (STATE_SETTLE_SECONDS if settle else 0.0)
        while True:
            try:
                self._container.reload()
                state = self._container.attrs["State"]
            except Exception:  # noqa: BLE001 - removed already: nothing to read
                return {}
            if not state.get("Running") or time.monotonic() >= deadline:
                return state
            time.sleep(0.05)

    def _collect(self) -> tuple[dict[str, bytes], list[str]]:
        return collect_files(
            self._run_exec,
            self._exec,
            wanted=tuple(self.spec.collect),
            workdir=self.spec.workdir,
            limits=self.limits,
            notes=self._notes,
        )

    def _remove(self, *, in_background: bool = False) -> None:
        """Remove the container (kill and wait included) once, from whichever thread first.

        ``in_background``: the engine's kill-wait-delete (60-150 ms) runs on a thread of its
        own and the caller goes on. Only taken when the container's pids cgroup shows nothing
        but docker-init and the keeper: nothing of the run is left to outlive its result (A28).
        """
        with self._remove_lock:
            if self._removed:
                return
            self._removed = True
            if self._image_files is not None:
                self._image_files.close()
            if self._pool is not None:
                self._pool.release(self._config)
            if self._container is None:
                return
            if not self._eof.is_set():
                self._killed.set()  # a pump blocked on the caller's stdout pipe gives up
            if in_background and self._only_keeper_left():
                remove_later(self._container)
                return
            try:
                self._container.remove(force=True)
            except Exception as exc:  # noqa: BLE001
                self._notes.append(f"container removal failed: {exc}")

    def _only_keeper_left(self) -> bool:
        if self._pids_events is None:
            return False  # a remote engine: we cannot see, so we wait
        current = self._pids_events.removesuffix("pids.events") + "pids.current"
        tasks = read_counter_value(current)
        return tasks is not None and tasks <= IDLE_TASKS


def _stream_size(stream: BinaryIO | None) -> int:
    if stream is None:
        return 0
    size = stream.seek(0, os.SEEK_END)
    stream.seek(0)
    return size


@dataclass(frozen=True)
class _Ended:
    """What finish() needs from a container removed right after its command ended."""

    killed: bool
    exit_code: int | None
    oom: bool


class DockerSandbox(Sandbox):
    name = "docker"

    def __init__(self, client: Any | None = None, *, labels: dict[str, str] | None = None) -> None:
        self.client = client if client is not None else docker_client()
        self.labels = dict(labels or {})  # extra container labels (e.g. a run id for cleanup)
        # The containers this instance's sandboxes ran in, newest last (what a test checks
        # for leftovers); bounded, since a worker's instance may live long.
        self.used_ids: deque[str] = deque(maxlen=512)

    def run(self, spec: SandboxSpec) -> SandboxResult:
        return self._process(spec, interactive=False).finish()

    def start(self, spec: SandboxSpec) -> SandboxProcess:
        return self._process(spec, interactive=True)

    def _process(self, spec: SandboxSpec, *, interactive: bool) -> DockerProcess:
        return DockerProcess(
            self.client, spec, interactive=interactive, labels=self.labels, used=self.used_ids
        )


__all__ = [
    "DEFAULT_LOCAL_IMAGE",
    "LABEL",
    "DockerProcess",
    "DockerSandbox",
    "ImageWorkdirSpec",
    "docker_client",
    "remove_stale_containers",
    "resolve_image",
    "wait_for_removals",
]
