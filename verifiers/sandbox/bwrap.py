"""The bubblewrap backend (DESIGN.md §5, security.md §1.3, §7).

Layout of one run::

    prlimit --as --data --cpu --fsize --nofile --nproc --core=0 --msgqueue=0 --stack --
      setpriv --reuid=SLOT --regid=SLOT --clear-groups --          (only when we are root)
        bwrap --unshare-all --unshare-user --disable-userns --cap-drop ALL ... --
          /usr/bin/python3 -I -S -c WRAPPER CONFIG                 (trusted, from read-only /usr)
            COMMAND                                                (the untrusted part)

or, for a *direct* run (no ``collect`` and at most ``DIRECT_MAX_FILES`` work files), the
same without the wrapper: bwrap itself copies the work files into the tmpfs and execs
COMMAND (see below).

Design choices, and why:

* **Dedicated uid per slot.** RLIMIT_NPROC counts every process of a real uid kernel-wide
  (§10), so a root supervisor runs each sandbox under its own unprivileged uid from a small
  pool (61000–61063 by default), held with an ``flock`` on ``<slot dir>/slot-<uid>.lock`` for
  the whole run. Leftovers of that uid are killed before the slot is used and verified gone
  afterwards, so stragglers never eat the next run's budget (§9 E7). Not root: the sandbox
  runs as our own uid, RLIMIT_NPROC is not applied (it would count all our processes) and
  the process count is enforced by the watchdog only; the result says so in ``notes``.
* **Writable = the two capped tmpfs mounts only** (and mounts a spec declares writable):
  the root bwrap builds and its ``/dev`` (tmpfs folders owned by the sandbox uid, with no
  size cap) are remounted read-only, and RLIMIT_MSGQUEUE=0 refuses POSIX message queues
  (kernel memory outside every cap). No POSIX shared memory (``/dev/shm``) is offered.
* **Work dir = a size-capped tmpfs inside the sandbox** (``--size N --tmpfs WORKDIR``), so
  disk use is capped in bytes by the kernel, never a writable bind of a host folder.
* **Copy-in and collection go through a trusted wrapper over two pipes.** The host reads
  ``work_files`` itself (regular files and folders only, never following links) and streams
  them on one pipe; the wrapper — the host's own Python from the read-only ``/usr``, run
  with ``-I -S`` — writes them into the tmpfs before the command starts. After the command
  exits, the wrapper SIGKILLs every other process of the pid namespace until none is left,
  and only then opens each ``collect`` path component by component with ``O_NOFOLLOW``
  (symlinks → ``refused``, non-regular files → ``refused``), caps it, and streams it back
  on the second pipe. The collection pipe is closed in the command (only fds 0-2 are inherited), and
  the wrapper makes itself non-dumpable so processes of the same uid cannot reach its fds
  through ``/proc`` or ptrace it. A command that kills the wrapper only loses its own
  results. This was chosen over a host tmpfs mount (root only, stale mounts on a crash)
  and over a host-dir bind (no byte cap on the work dir).
* **Direct runs skip the wrapper** (one Python start-up less per run, most of a short
  run's cost). The wrapper is only needed to collect files after every other process is
  dead; without ``collect`` there is nothing to protect after the command. bwrap copies
  each work file into the size-capped tmpfs itself (``--perms M --dir D``, ``--perms M
  --file FD D``) from an fd the host opened with ``O_NOFOLLOW`` and checked to be a regular
  file, before the command starts; an oversized copy fails bwrap's setup (ours: an error,
  as a failed wrapper copy-in is). The exit status comes from ``--json-status-fd``, which
  only the outer bwrap holds (the command never does): bwrap's pid 1 reports the command's
  exit to it and then exits itself (a missing ``exit-code`` means the command never ran:
  bwrap's ``execvp`` failure maps to 127/126 as a shell would, anything else is a setup
  failure). When pid 1 exits the kernel kills every other process of the pid namespace;
  that may finish just after the outer bwrap exited, so the teardown check below waits
  for it (and kills as the slot uid whatever is still alive after a moment), exactly as
  after the wrapper's kill loop.
* **Killing.** The outer bwrap is a process-group leader; killing the group kills bwrap's
  pid 1 and with it the whole pid namespace. As root we then check that no process of the
  slot uid remains (killing any with ``kill -9 -1`` run as that uid, race-free) and note it.
  The same uid scan runs when a slot is acquired (stragglers of a supervisor that died
  holding it). These are the only whole-``/proc`` scans of a run: two per run.
* **Watching** walks the sandbox's own process tree (``/proc/<pid>/task/*/children`` from
  the outer bwrap down): every process of the run descends from it, since orphans are
  re-parented to the namespace's pid 1 and nothing can leave the pid namespace. This costs
  a few reads instead of a scan of every process of the machine every 50 ms.
* **Memory.** RLIMIT_AS/RLIMIT_DATA per process = ``limits.memory_bytes`` (a big single
  allocation fails with MemoryError/ENOMEM); a watchdog sums VmRSS of the sandbox's
  processes every 50 ms and kills past the limit (``memory_exceeded=True``, honest). An
  allocation refused by RLIMIT_AS cannot be seen from outside, so a non-zero exit whose
  stderr tail names an allocation failure (``MemoryError``, ``Cannot allocate memory``,
  ``std::bad_alloc``, ``out of memory``) is also reported as ``memory_exceeded`` with a note
  saying it was inferred. Caveat: glibc reserves RLIMIT_STACK per thread, which counts
  against RLIMIT_AS.
  The watchdog's tree walk may miss a process that is forking at that very instant; the
  next check 50 ms later sees it (and RLIMIT_AS still bounds each process).
* **Spawning** happens on one long-lived thread: ``--die-with-parent`` uses
  PR_SET_PDEATHSIG, which fires when the *creating thread* exits (§1.3).
* bwrap never uses ``spec.image``; the result notes that the host's ``/usr`` ran instead.

The capped-output helper (``OutputCapture``, in ``verifiers.sandbox.capture``) is shared
with the Docker backend; the wrapper lives in ``bwrap_wrapper``, slots and process scans in
``bwrap_slots``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import select
import signal
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from verifiers.sandbox.base import (
    Limits,
    Sandbox,
    SandboxProcess,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
)
from verifiers.sandbox.bwrap_slots import (
    DEFAULT_SLOT_DIR,
    DEFAULT_UID_BASE,
    DEFAULT_UID_COUNT,
    Slot,
    acquire_slot,
    kill_uid,
    pids_in_pidns,
    pids_of_uid,
    rss_bytes,
    tool,
    tree_pids,
)
from verifiers.sandbox.bwrap_wrapper import (
    WRAPPER,
    iter_work_files,
    parse_channel,
    read_all,
    write_work_files,
)
from verifiers.sandbox.capture import (
    KILL_GRACE,
    PATH_VALUE,
    OutputCapture,
    drain,
    looks_like_alloc_failure,
)

WATCH_INTERVAL = 0.05  # seconds between RSS / process-count checks
# A run without `collect` and with at most this many work files skips the wrapper: bwrap
# copies each file from an fd of its own (fds count against RLIMIT_NOFILE).
DIRECT_MAX_FILES = 16
TEARDOWN_PATIENCE = 0.05  # seconds the kernel gets to finish a namespace before we kill
# Wrapper exit code when the command cannot be started (as a shell would).
EXIT_NOT_FOUND = 127
EXIT_CANNOT_RUN = 126
# /etc entries programs commonly need; /etc is never bound whole (no host config leaks).
_ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "alternatives",
    "nsswitch.conf",
    "mime.types",
    "ssl/certs",
    "ca-certificates",
    "gitconfig",
)

# --------------------------------------------------------------------------- host helpers

_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sb-spawn")


def _spawn(argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
    """Popen on one long-lived thread: PR_SET_PDEATHSIG follows the creating thread."""
    return _SPAWNER.submit(subprocess.Popen, argv, **kwargs).result()


def _open_regular(path: Path) -> int | None:
    """An fd of a regular file for bwrap's ``--file`` (never a link, fifo or device)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _pidfd(pid: int) -> int | None:
    """A pidfd (readable once the process exits) so waits need no polling sleeps."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # kernel < 5.3: fall back to Popen's polling wait
        return None


def _read_status(fd: int) -> dict:
    """bwrap's --json-status-fd records (one JSON object per line), read after it exited."""
    os.set_blocking(fd, False)
    data = bytearray()
    with contextlib.suppress(BlockingIOError, OSError):
        while (chunk := os.read(fd, 65536)) and len(data) < 65536:
            data += chunk
    status: dict = {}
    for line in bytes(data).splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                status.update(record)
    return status


# bwrap's own message when exec'ing the command fails (the command never ran).
_EXEC_FAILURE = re.compile(rb"^bwrap: execvp .*: (.+)$")


def _exec_failure_code(stderr: bytes) -> int | None:
    """127 (not found) or 126 (cannot run), as a shell would, from bwrap's last line."""
    lines = stderr.strip().splitlines()
    match = _EXEC_FAILURE.match(lines[-1]) if lines else None
    if match is None:
        return None
    not_found = match.group(1).strip() == os.strerror(2).encode()  # ENOENT
    return EXIT_NOT_FOUND if not_found else EXIT_CANNOT_RUN


# --------------------------------------------------------------------------- the backend


@dataclass
class _Flags:
    timed_out: bool = False
    memory_exceeded: bool = False
    output_exceeded: bool = False
    pids_exceeded: bool = False
    # Seen with as many processes as RLIMIT_NPROC allows: the next fork is refused, silently
    # for us (the Docker backend reads the same from its pids cgroup).
    pids_at_cap: bool = False
    killed: threading.Event = field(default_factory=threading.Event)


class BwrapProcess(SandboxProcess):
    """One running bwrap sandbox; also what ``BwrapSandbox.run`` drives to completion."""

    def __init__(self, spec: SandboxSpec, *, interactive: bool, slot: Slot) -> None:
        self.spec = spec
        self.limits: Limits = spec.limits
        self._slot = slot
        self._notes: list[str] = []
        self._flags = _Flags()
        self._flood = threading.Event()
        self._lock = threading.Lock()
        self._finished: SandboxResult | None = None
        self._stdout_cap = OutputCapture(self.limits.output_bytes)
        self._stderr_cap = OutputCapture(self.limits.output_bytes)
        self._channel = bytearray()
        self._ns_link: str | None = None
        self._killed_by_caller = False
        self._threads: list[threading.Thread] = []
        self._direct = False
        self._overhead = 3
        self._status_fd: int | None = None  # direct runs: bwrap's --json-status-fd
        self._in_w: int | None = None  # wrapper runs: copy-in and collection pipes
        self._out_r: int | None = None
        self._pidfd: int | None = None
        if spec.image:
            self._notes.append(f"pack image {spec.image} was not used (bwrap runs the host's /usr)")
        if slot.uid is None:
            self._notes.append(
                f"not root: sandbox runs as uid {os.getuid()} without a dedicated slot uid; "
                "RLIMIT_NPROC not applied, process count enforced by the watchdog only"
            )
        self._start(interactive)

    # -- start

    def _start(self, interactive: bool) -> None:
        spec = self.spec
        items = [] if spec.work_files is None else iter_work_files(spec.work_files, self._notes)
        files = sum(kind == "f" for _, kind, _ in items)
        self._direct = not spec.collect and files <= DIRECT_MAX_FILES
        # The outer bwrap and its pid 1 (and the wrapper) are processes of the run too.
        self._overhead = 2 if self._direct else 3
        child_fds: list[int] = []  # our copies of fds the child inherits: closed once spawned
        own_fds: list[int] = []  # our ends of the pipes: closed here only on failure
        try:
            bwrap_args, data_fds = self._bwrap_args()  # closes its own fds when it raises
            child_fds += data_fds
            if self._direct:
                tail = self._direct_args(items, child_fds, own_fds)
            else:
                tail = self._wrapper_args(child_fds, own_fds)
        except BaseException:
            for fd in child_fds + own_fds:
                os.close(fd)
            self._slot.release()
            raise
        argv = [*self._prlimit_args(), *self._setpriv_args(), *bwrap_args, *tail]
        stdin_mode = subprocess.PIPE if interactive or spec.stdin else subprocess.DEVNULL
        self._started = time.monotonic()
        try:
            self._proc = _spawn(
                argv,
                stdin=stdin_mode,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=tuple(child_fds),
                start_new_session=True,  # our own process group: killpg reaches bwrap
                env={"PATH": PATH_VALUE, "LANG": "C.UTF-8"},
            )
        except OSError as exc:
            for fd in child_fds + own_fds:
                os.close(fd)
            self._slot.release()
            raise SandboxUnavailable(f"cannot start bwrap: {exc}") from exc
        for fd in child_fds:
            os.close(fd)
        self._pidfd = _pidfd(self._proc.pid)
        if not self._direct:
            self._thread(read_all, self._out_r, self._channel_cap(), self._channel)
            if self._in_w is not None:
                self._thread(write_work_files, self._in_w, spec.work_files, items)
        self._thread(drain, self._proc.stderr, self._stderr_cap, self._flood)
        if interactive:
            self.stdin = self._proc.stdin  # type: ignore[assignment]
            self.stdout = self._proc.stdout  # type: ignore[assignment]
        else:
            self._thread(drain, self._proc.stdout, self._stdout_cap, self._flood)
            if self._proc.stdin is not None:
                self._thread(self._feed_stdin, self._proc.stdin, spec.stdin)
        self._watchdog = threading.Thread(target=self._watch, name="sb-watchdog", daemon=True)
        self._watchdog.start()

    def _direct_args(
        self, items: list[tuple[str, str, int]], child_fds: list[int], own_fds: list[int]
    ) -> list[str]:
        """bwrap copies the work files itself and execs the command (no wrapper)."""
        spec = self.spec
        status_r, status_w = os.pipe()
        own_fds.append(status_r)
        child_fds.append(status_w)
        self._status_fd = status_r
        args = ["--json-status-fd", str(status_w)]
        for rel, kind, mode in items:
            dest = f"{spec.workdir}/{rel}"
            if kind == "d":
                args += ["--perms", f"{mode & 0o755 | 0o700:o}", "--dir", dest]
                continue
            fd = _open_regular(spec.work_files / rel)  # type: ignore[operator]
            if fd is None:
                self._notes.append(f"work_files: skipped {rel} (not a regular file)")
                continue
            child_fds.append(fd)
            args += ["--perms", f"{mode & 0o755 | 0o600:o}", "--file", str(fd), dest]
        return [*args, "--", *spec.command]

    def _wrapper_args(self, child_fds: list[int], own_fds: list[int]) -> list[str]:
        """The trusted wrapper copies in over one pipe and collects over another."""
        spec = self.spec
        in_fd = -1
        if spec.work_files is not None:
            in_fd, self._in_w = os.pipe()
            child_fds.append(in_fd)
            own_fds.append(self._in_w)
        self._out_r, out_w = os.pipe()
        child_fds.append(out_w)
        own_fds.append(self._out_r)
        config = {
            "workdir": spec.workdir,
            "in_fd": in_fd,
            "out_fd": out_w,
            "collect": list(spec.collect),
            "cap": self.limits.output_bytes,
            "cmd": list(spec.command),
        }
        return ["--", "/usr/bin/python3", "-I", "-S", "-c", WRAPPER, json.dumps(config)]

    def _thread(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    @staticmethod
    def _feed_stdin(pipe: BinaryIO, data: bytes) -> None:
        try:
            pipe.write(data)
            pipe.close()
        except (BrokenPipeError, OSError):
            pass

    def _channel_cap(self) -> int:
        return len(self.spec.collect) * (self.limits.output_bytes + 4096) + 65536

    def _prlimit_args(self) -> list[str]:
        lim = self.limits
        args = [
            tool("prlimit"),
            f"--as={lim.memory_bytes}",
            f"--data={lim.memory_bytes}",
            f"--cpu={lim.cpu_seconds}",
            f"--fsize={lim.file_size_bytes}",
            f"--nofile={lim.open_files}",
            "--core=0",
            "--msgqueue=0",  # POSIX message queues are kernel memory outside every cap
            f"--stack={lim.stack_bytes}",
        ]
        if self._slot.uid is not None:
            # The outer bwrap, bwrap's pid 1 (and the wrapper) run under the slot uid too.
            args.append(f"--nproc={lim.pids + self._overhead}")
        return [*args, "--"]

    def _setpriv_args(self) -> list[str]:
        uid = self._slot.uid
        if uid is None:
            return []
        return [tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]

    def _bwrap_args(self) -> tuple[list[str], list[int]]:
        spec = self.spec
        uid = self._slot.uid if self._slot.uid is not None else os.getuid()
        gid = self._slot.uid if self._slot.uid is not None else os.getgid()
        args = [
            tool("bwrap"),
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
        ]
        for cap in spec.capabilities:
            name = cap.upper()
            args += ["--cap-add", name if name.startswith("CAP_") else f"CAP_{name}"]
        args += ["--hostname", "sandbox", "--clearenv"]
        env = {
            "PATH": PATH_VALUE,
            "HOME": spec.workdir,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            **spec.env,
        }
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "lib", "lib64", "sbin"):
            host = Path("/") / name
            if host.is_symlink():  # Debian merged-usr: /bin -> usr/bin, …
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        for entry in _ETC_ENTRIES:
            args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
        for python_etc in sorted(Path("/etc").glob("python3*")):  # Debian's sitecustomize
            args += ["--ro-bind-try", str(python_etc), str(python_etc)]
        fds: list[int] = []
        identity = {
            "/etc/passwd": f"sandbox:x:{uid}:{gid}:sandbox:{spec.workdir}:/bin/sh\n",
            "/etc/group": f"sandbox:x:{gid}:\n",
            "/etc/hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        }
        for target, text in identity.items():
            fd = _data_fd(text.encode())
            fds.append(fd)
            args += ["--ro-bind-data", str(fd), target]
        # bwrap's /dev is a tmpfs owned by the sandbox uid, with no size cap: read-only, so the
        # only writable places are the capped /tmp and work dir (its device nodes, separate
        # bind mounts, stay usable). POSIX shared memory (/dev/shm) is thus not offered.
        args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
        args += ["--size", str(self.limits.tmp_bytes), "--tmpfs", "/tmp"]  # noqa: S108
        # --size must precede the --tmpfs it applies to (§9 E3).
        args += ["--size", str(self.limits.work_bytes), "--tmpfs", spec.workdir]
        for mount in spec.mounts:
            problem = _unreachable_for_others(Path(mount.source))
            if problem:
                for opened in fds:
                    os.close(opened)
                raise SandboxUnavailable(
                    f"mount source {mount.source} is not readable by the sandbox uid: {problem}"
                )
            args += ["--ro-bind" if mount.read_only else "--bind", str(mount.source), mount.target]
        # The root bwrap builds is a tmpfs the sandbox user could write to: make it read-only
        # (the /tmp and work dir tmpfs mounts below it stay writable).
        args += ["--remount-ro", "/", "--chdir", spec.workdir]
        return args, fds

    # -- watching

    def _members(self) -> list[int]:
        """The run's processes: the outer bwrap's tree (see the module docstring)."""
        if self._slot.uid is None and self._ns_link is None:
            self._ns_link = self._find_ns_link()  # for the teardown check, found once
        return tree_pids(self._proc.pid)

    def _leftovers(self) -> list[int]:
        """Processes of this run still alive after bwrap exited (the teardown check)."""
        if self._slot.uid is not None:
            return pids_of_uid(self._slot.uid)  # the slot uid is only ever ours
        return pids_in_pidns(self._ns_link) if self._ns_link is not None else []

    def _find_ns_link(self) -> str | None:
        try:
            with open(f"/proc/{self._proc.pid}/task/{self._proc.pid}/children") as fh:
                children = fh.read().split()
            return os.readlink(f"/proc/{children[0]}/ns/pid") if children else None
        except OSError:
            return None

    def _watch(self) -> None:
        deadline = self._started + self.limits.wall_seconds
        while self._proc.poll() is None:
            if self._flags.killed.is_set():
                return
            if time.monotonic() >= deadline:
                self._flags.timed_out = True
                self._kill()
                return
            if self._flood.is_set():
                self._flags.output_exceeded = True
                self._kill()
                return
            members = self._members()
            if rss_bytes(members) > self.limits.memory_bytes:
                self._flags.memory_exceeded = True
                self._kill()
                return
            cap = self.limits.pids + self._overhead
            if self._slot.uid is None and len(members) > cap:
                self._flags.pids_exceeded = True
                self._kill()
                return
            if len(members) >= cap:
                self._flags.pids_at_cap = True
            self._flags.killed.wait(WATCH_INTERVAL)

    def _kill(self) -> None:
        self._flags.killed.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        # The group kill reaches the namespace's pid 1 only through its parent-death signal,
        # and pid 1 runs as the slot uid: code the candidate wrote into it (/proc/1/mem) can
        # clear that signal and leave the session, keeping the helper's pipes open forever.
        self._slot.kill_all()

    def kill(self) -> None:
        self._killed_by_caller = True
        self._kill()

    # -- finishing

    def finish(self, timeout: float | None = None) -> SandboxResult:
        with self._lock:
            if self._finished is None:
                self._finished = self._finish(timeout)
            return self._finished

    def _finish(self, timeout: float | None) -> SandboxResult:
        wall_left = self._started + self.limits.wall_seconds - time.monotonic()
        wait_for = wall_left + KILL_GRACE if timeout is None else min(timeout, wall_left)
        if not self._wait(max(wait_for, 0.0)):
            if timeout is not None and timeout < wall_left:
                self._notes.append(f"killed by finish(timeout={timeout})")
            else:
                self._flags.timed_out = True
            self._kill()
        rc: int | None = self._proc.returncode
        if not self._wait(KILL_GRACE):  # bwrap ignoring SIGKILL would be a kernel bug
            rc = None
            self._notes.append("bwrap did not exit after SIGKILL")
        else:
            rc = self._proc.returncode
        self._flags.killed.set()
        self._watchdog.join(KILL_GRACE)
        try:
            self._teardown_check()
        finally:
            self._slot.release()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(OSError):
                    pipe.close()
        for thread in self._threads:
            thread.join(KILL_GRACE)
        status: dict = {}
        if self._status_fd is not None:
            status = _read_status(self._status_fd)
            os.close(self._status_fd)
        if self._pidfd is not None:
            os.close(self._pidfd)
        return self._result(rc, status)

    def _wait(self, timeout: float) -> bool:
        """Whether bwrap exited (and was reaped) within ``timeout`` seconds."""
        if self._proc.returncode is not None:
            return True
        if self._pidfd is None:
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        # Woken the moment bwrap exits: Popen.wait(timeout) would poll with growing sleeps.
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        if not poller.poll(max(timeout, 0.0) * 1000):
            return False
        self._proc.wait()  # exited: reaps at once
        return True

    def _teardown_check(self) -> None:
        """Nothing of this run may survive: verify, and kill leftovers as the slot uid."""
        started = time.monotonic()
        pause = 0.001
        while (left := self._leftovers()) and time.monotonic() < started + KILL_GRACE:
            # The kernel is already killing what pid 1 left behind; whatever is still alive
            # after a moment is killed as the slot uid (a process spawn, so not at once).
            if self._slot.uid is not None and time.monotonic() - started > TEARDOWN_PATIENCE:
                kill_uid(self._slot.uid)
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        if left:
            self._notes.append(f"processes of the sandbox survived teardown: {left}")

    @staticmethod
    def _direct_status(rc: int | None, bwrap_status: dict, stderr: bytes) -> dict:
        """A direct run's outcome in the wrapper's terms (``{"exit": n}`` or nothing)."""
        code = bwrap_status.get("exit-code")
        if isinstance(code, int) and not isinstance(code, bool):
            return {"exit": code}  # written by the outer bwrap once pid 1 was reaped
        exec_code = _exec_failure_code(stderr) if rc == 1 else None
        return {} if exec_code is None else {"exit": exec_code}

    def _result(self, rc: int | None, bwrap_status: dict) -> SandboxResult:
        status, records, payloads = parse_channel(bytes(self._channel))
        stderr = self._stderr_cap.value()
        if self._direct:
            status = self._direct_status(rc, bwrap_status, stderr)
        if "error" in status and status["error"] in ("copy-in", "teardown"):
            raise SandboxUnavailable(f"sandbox {status['error']} failed: {status.get('msg')}")
        killed = self._flags.timed_out or self._flags.memory_exceeded
        killed = killed or self._flags.output_exceeded or self._flags.pids_exceeded
        if self._killed_by_caller:
            killed = True
            self._notes.append("killed by the caller")
        exit_code: int | None
        if killed:
            exit_code = None
        elif "exit" in status:
            exit_code = int(status["exit"])
        elif status.get("error") == "exec":
            exit_code = rc
        elif rc == 1 and stderr.startswith(b"bwrap:"):  # bwrap's own setup failure
            raise SandboxUnavailable(stderr.decode(errors="replace").strip())
        else:
            exit_code = rc
            self._notes.append(
                "bwrap exited without reporting the command's exit status"
                if self._direct
                else "the sandbox wrapper died before reporting (killed from inside?)"
            )
        collected: dict[str, bytes] = {}
        refused: list[str] = []
        for rec, payload in zip(records, payloads, strict=True):
            if rec.get("st") == "ok":
                collected[str(rec["p"])] = payload
            elif rec.get("st") == "refused":
                refused.append(str(rec["p"]))
        if self.spec.collect and "end" not in status and exit_code is not None:
            self._notes.append("collection incomplete")
        memory = self._flags.memory_exceeded
        if not memory and looks_like_alloc_failure(exit_code, stderr):
            memory = True
            self._notes.append("memory_exceeded inferred from an allocation failure on stderr")
        if self._flags.pids_exceeded:
            self._notes.append("killed: process count above limits.pids (watchdog)")
        # A run that sat at its process cap and then failed or ran out of time hit the cap:
        # a fork bomb is the candidate's own failure, never an error of ours to retry.
        at_cap = self._flags.pids_at_cap and exit_code != 0
        if at_cap:
            self._notes.append(f"forks were refused at limits.pids ({self.limits.pids})")
        for name, cap in (("stdout", self._stdout_cap), ("stderr", self._stderr_cap)):
            if cap.truncated:
                self._notes.append(f"{name} truncated: kept {cap.cap} of {cap.total} bytes")
        return SandboxResult(
            exit_code=exit_code,
            stdout=self._stdout_cap.value(),
            stderr=stderr,
            duration_seconds=time.monotonic() - self._started,
            backend="bwrap",
            image=None,
            timed_out=self._flags.timed_out,
            memory_exceeded=memory,
            output_exceeded=self._flags.output_exceeded,
            process_limit=self._flags.pids_exceeded or at_cap,
            collected=collected,
            refused=tuple(refused),
            notes=tuple(self._notes),
        )


def _unreachable_for_others(path: Path) -> str | None:
    """Why an unprivileged uid cannot use ``path`` (bwrap resolves bind sources as it)."""
    if not path.exists():
        return "does not exist"
    for parent in [*reversed(path.absolute().parents)]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return f"folder {parent} is not searchable by others (o+x)"
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
        return f"folder {path} is not searchable by others (o+x)"
    if not mode & stat.S_IROTH:
        return f"{path} is not readable by others (o+r)"
    return None


def _data_fd(data: bytes) -> int:
    """A readable fd holding ``data`` (small: fits in a pipe buffer)."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, data)
    finally:
        os.close(write_fd)
    return read_fd


class BwrapSandbox(Sandbox):
    name = "bwrap"

    def __init__(
        self,
        *,
        uid_base: int | None = None,
        uid_count: int | None = None,
        slot_timeout: float = 60.0,
    ) -> None:
        for name in ("bwrap", "prlimit", "setpriv", "kill"):
            tool(name)
        if not os.path.exists("/usr/bin/python3"):
            raise SandboxUnavailable("bwrap backend needs /usr/bin/python3 for its wrapper")
        env_base = os.environ.get("SECUREBENCH_SANDBOX_UID_BASE")
        env_count = os.environ.get("SECUREBENCH_SANDBOX_UID_COUNT")
        self.uid_base = uid_base or int(env_base or DEFAULT_UID_BASE)
        self.uid_count = uid_count or int(env_count or DEFAULT_UID_COUNT)
        self.slot_timeout = slot_timeout
        self.privileged = os.geteuid() == 0
        self.used_uids: set[int] = set()  # slot uids this instance ran under (for audits)

    def _slot(self) -> Slot:
        if not self.privileged:
            return Slot(None)
        slot = acquire_slot(self.uid_base, self.uid_count, self.slot_timeout)
        self.used_uids.add(slot.uid)  # type: ignore[arg-type]
        return slot

    def run(self, spec: SandboxSpec) -> SandboxResult:
        return BwrapProcess(spec, interactive=False, slot=self._slot()).finish()

    def start(self, spec: SandboxSpec) -> SandboxProcess:
        return BwrapProcess(spec, interactive=True, slot=self._slot())


__all__ = [
    "DEFAULT_SLOT_DIR",
    "DEFAULT_UID_BASE",
    "DEFAULT_UID_COUNT",
    "PATH_VALUE",
    "BwrapProcess",
    "BwrapSandbox",
    "OutputCapture",
    "kill_uid",
    "pids_of_uid",
    "tree_pids",
]
