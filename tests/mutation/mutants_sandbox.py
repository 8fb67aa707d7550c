"""Mutants of the sandbox backends: bwrap and Docker mount plans, limits, collection, teardown.

Each test set below starts real sandboxes, so the sets are narrow ``-k`` selections of one
backend, shared by several mutants (the runner runs each distinct set once as a baseline).
Anchors avoid the lines of the Docker backend's OOM classification, which may still move.
"""

from __future__ import annotations

from tests.mutation.engine import Mutant

BWRAP = "verifiers/sandbox/bwrap.py"
WRAPPER = "verifiers/sandbox/bwrap_wrapper.py"
CAPTURE = "verifiers/sandbox/capture.py"
DOCKER = "verifiers/sandbox/docker.py"
DOCKER_EXEC = "verifiers/sandbox/docker_exec.py"
DOCKER_POOL = "verifiers/sandbox/docker_pool.py"  # how containers are created
DOCKER_COLLECT = "verifiers/sandbox/docker_collect.py"
ESCAPES = "tests/security/test_sandbox_escapes.py"
MOUNTS = "tests/security/test_sandbox_mounts.py"
LIFECYCLE = "tests/security/test_docker_lifecycle.py"
DEFENCES = "tests/security/test_sandbox_defences.py"
POOL = "tests/security/test_docker_pool.py"

# What a candidate can write to, and kernel memory outside the caps (message queues).
MOUNTS_BWRAP = (MOUNTS, "-k bwrap")
MOUNTS_DOCKER = (MOUNTS, "-k docker")
# Identity and isolation: network, environment, capabilities, nested namespaces, read-only.
_ISOLATION = (
    "network or environment or capabilities or nested_user or system_folders or read_only_mount"
)
ISOLATION_BWRAP = (ESCAPES, f"-k bwrap and ({_ISOLATION})")
ISOLATION_DOCKER = (ESCAPES, f"-k docker and ({_ISOLATION})")
# Limits proved by outcomes: process count, memory, output, the wall clock.
_LIMITS = "fork_bomb_stops or memory_spread or huge_output or sleeping_past"
LIMITS_BWRAP = (ESCAPES, f"-k bwrap and ({_LIMITS})")
LIMITS_DOCKER = (ESCAPES, f"-k docker and ({_LIMITS})")
# Collection of outputs: links and non-regular files refused.
COLLECT_BWRAP = (ESCAPES, "-k bwrap and (left_for_collection or symlinked_folder)")
COLLECT_DOCKER = (ESCAPES, "-k docker and (left_for_collection or symlinked_folder)")

SANDBOX_MUTANTS: tuple[Mutant, ...] = (
    # --- writable places (verifiers/sandbox/bwrap.py, docker.py) -----------------------------
    Mutant(
        id="bwrap-root-read-only",
        module=BWRAP,
        defence="bwrap remounts the root it builds read-only",
        find='args += ["--remount-ro", "/", "--chdir", spec.workdir]',
        replace='args += ["--chdir", spec.workdir]',
        tests=MOUNTS_BWRAP,
        fast=True,
    ),
    Mutant(
        id="docker-root-read-only",
        module=DOCKER_POOL,
        defence="the container's root filesystem is read-only",
        find="        read_only=True,\n",
        replace="        read_only=False,\n",
        tests=MOUNTS_DOCKER,
        fast=True,
    ),
    Mutant(
        id="bwrap-usr-read-only",
        module=BWRAP,
        defence="the host's /usr is bound read-only (EROFS, not a permission refusal)",
        find='args += ["--ro-bind", "/usr", "/usr"]',
        replace='args += ["--bind", "/usr", "/usr"]',
        tests=ISOLATION_BWRAP,
    ),
    Mutant(
        id="bwrap-dev-read-only",
        module=BWRAP,
        defence="bwrap's /dev (an uncapped tmpfs) is remounted read-only",
        find='args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]',
        replace='args += ["--proc", "/proc", "--dev", "/dev"]',
        tests=MOUNTS_BWRAP,
    ),
    Mutant(
        id="docker-no-dev-shm",
        module=DOCKER_POOL,
        defence='ipc_mode="none": no writable 64 MiB /dev/shm outside the caps',
        find='        ipc_mode="none",\n',
        replace="",
        tests=MOUNTS_DOCKER,
    ),
    Mutant(
        id="bwrap-tmp-size",
        module=BWRAP,
        defence="bwrap's /tmp tmpfs has a size cap",
        find='args += ["--size", str(self.limits.tmp_bytes), "--tmpfs", "/tmp"]',
        replace='args += ["--tmpfs", "/tmp"]',
        tests=MOUNTS_BWRAP,
    ),
    Mutant(
        id="bwrap-work-size",
        module=BWRAP,
        defence="bwrap's work dir tmpfs has a size cap",
        find='args += ["--size", str(self.limits.work_bytes), "--tmpfs", spec.workdir]',
        replace='args += ["--tmpfs", spec.workdir]',
        tests=MOUNTS_BWRAP,
    ),
    Mutant(
        id="docker-tmp-size",
        module=DOCKER_POOL,
        defence="Docker's /tmp tmpfs has a size cap",
        find='"/tmp": _tmpfs_opts(lim.tmp_bytes, owner=None, mode="1777"),',
        replace='"/tmp": "rw,exec,nosuid,nodev,mode=1777",',
        tests=MOUNTS_DOCKER,
    ),
    Mutant(
        id="docker-work-size",
        module=DOCKER_POOL,
        defence="Docker's work dir tmpfs is capped at work_bytes (not another cap)",
        find="lim.work_bytes, owner=SANDBOX_UID,",
        replace="lim.tmp_bytes, owner=SANDBOX_UID,",
        tests=MOUNTS_DOCKER,
    ),
    Mutant(
        id="docker-tmpfs-inode-cap",
        module=DOCKER_POOL,
        defence="Docker's tmpfs mounts cap their inodes (millions of empty files)",
        find="size={size},nr_inodes={inodes},mode={mode}",
        replace="size={size},mode={mode}",
        tests=(DEFENCES, "-k inode_cap"),
    ),
    Mutant(
        id="bwrap-read-only-mount",
        module=BWRAP,
        defence="a mount declared read-only is bound read-only",
        find='args += ["--ro-bind" if mount.read_only else "--bind", str(mount.source)',
        replace='args += ["--bind", str(mount.source)',
        tests=ISOLATION_BWRAP,
    ),
    Mutant(
        id="docker-read-only-mount",
        module=DOCKER_POOL,
        defence="a mount declared read-only is bound read-only",
        find='"mode": "ro" if m.read_only else "rw"',
        replace='"mode": "rw"',
        tests=ISOLATION_DOCKER,
    ),
    Mutant(
        id="bwrap-msgqueue",
        module=BWRAP,
        defence="RLIMIT_MSGQUEUE=0: no POSIX message queues (kernel memory outside the caps)",
        find='            "--msgqueue=0",',
        replace="",
        tests=(MOUNTS, "-k message_queues and bwrap"),
    ),
    Mutant(
        id="docker-msgqueue",
        module=DOCKER_POOL,
        defence="RLIMIT_MSGQUEUE=0: no POSIX message queues (kernel memory outside the caps)",
        find='            ("msgqueue", 0),',
        replace="",
        tests=(MOUNTS, "-k message_queues and docker"),
    ),
    # --- isolation and identity ---------------------------------------------------------------
    Mutant(
        id="bwrap-network",
        module=BWRAP,
        defence="bwrap unshares the network (--unshare-all without --share-net)",
        find='            "--unshare-all",\n',
        replace='            "--unshare-all",\n            "--share-net",\n',
        tests=ISOLATION_BWRAP,
    ),
    Mutant(
        id="docker-network",
        module=DOCKER_POOL,
        defence='network_mode="none"',
        find='network_mode="none",',
        replace='network_mode="bridge",',
        tests=ISOLATION_DOCKER,
    ),
    Mutant(
        id="bwrap-clearenv",
        module=BWRAP,
        defence="bwrap clears the environment (--clearenv) before setting ours",
        find='args += ["--hostname", "sandbox", "--clearenv"]',
        replace='args += ["--hostname", "sandbox"]',
        tests=ISOLATION_BWRAP,
        survivor_note=(
            "equivalent: bwrap itself is started with an environment of PATH and LANG only "
            "(the spawn's env=...), and --setenv sets both to the same values, so the "
            "sandbox's environment is the same; the two layers each hold alone "
            "(test_the_environment_is_cleared_down_to_the_whitelist_and_spec_env checks it)"
        ),
    ),
    Mutant(
        id="bwrap-spawn-env",
        module=BWRAP,
        defence="bwrap is started with our whitelist, never the worker's environment",
        find='env={"PATH": PATH_VALUE, "LANG": "C.UTF-8"},',
        replace="env=None,",
        tests=ISOLATION_BWRAP,
        survivor_note=(
            "equivalent: --clearenv drops the inherited environment inside the sandbox "
            "(bwrap-clearenv is its twin); the canary test proves the pair holds"
        ),
    ),
    Mutant(
        id="bwrap-cap-drop",
        module=BWRAP,
        defence="bwrap drops every capability (--cap-drop ALL)",
        find='            "--cap-drop",\n            "ALL",\n        ]',
        replace="        ]",
        tests=ISOLATION_BWRAP,
        survivor_note=(
            "equivalent: bwrap drops every capability by itself when the sandbox uid is not "
            "0 and no --cap-add asks for one (bwrap(1)); the slot uid never is 0 "
            "(bwrap-slot-uid is killed), so --cap-drop ALL states the plan explicitly and "
            "test_the_sandbox_has_no_capabilities_and_no_new_privileges[bwrap] checks it"
        ),
    ),
    Mutant(
        id="docker-cap-drop",
        module=DOCKER_POOL,
        defence="the container drops every capability",
        find='cap_drop=["ALL"],',
        replace="cap_drop=None,",
        tests=ISOLATION_DOCKER,
    ),
    Mutant(
        id="docker-no-new-privileges",
        module=DOCKER_POOL,
        defence="no-new-privileges (set-id binaries cannot raise privileges)",
        find='security_opt=["no-new-privileges"],',
        replace="security_opt=None,",
        tests=ISOLATION_DOCKER,
    ),
    Mutant(
        id="bwrap-slot-uid",
        module=BWRAP,
        defence="a root supervisor runs each sandbox as an unprivileged slot uid (setpriv)",
        find='return [tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]',
        replace="return []",
        tests=ISOLATION_BWRAP,
    ),
    Mutant(
        id="bwrap-supplementary-groups",
        module=BWRAP,
        defence="the slot uid's sandbox keeps none of the supervisor's supplementary groups",
        find='f"--regid={uid}", "--clear-groups", "--"]',
        replace='f"--regid={uid}", "--keep-groups", "--"]',
        tests=ISOLATION_BWRAP,
    ),
    Mutant(
        id="docker-sandbox-uid",
        module=DOCKER,
        defence="every exec runs as the unprivileged uid 65534",
        find='            user=user or f"{SANDBOX_UID}:{SANDBOX_UID}",\n',
        replace='            user=user or "0:0",\n',
        tests=ISOLATION_DOCKER,
    ),
    Mutant(
        id="bwrap-disable-userns",
        module=BWRAP,
        defence="no nested user namespaces (--disable-userns)",
        find='            "--disable-userns",\n',
        replace="",
        tests=ISOLATION_BWRAP,
    ),
    # --- limits -------------------------------------------------------------------------------
    Mutant(
        id="bwrap-pids-limit",
        module=BWRAP,
        defence="RLIMIT_NPROC of the slot uid caps the process count",
        find='args.append(f"--nproc={lim.pids + self._overhead}")',
        replace='args.append(f"--nproc={(lim.pids + self._overhead) * 8}")',
        tests=LIMITS_BWRAP,
    ),
    Mutant(
        id="docker-pids-limit",
        module=DOCKER_POOL,
        defence="the container's pids limit",
        find="pids_limit = lim.pids + 3 ",
        replace="pids_limit = (lim.pids + 3) * 8 ",
        tests=LIMITS_DOCKER,
    ),
    Mutant(
        id="bwrap-memory-watch",
        module=BWRAP,
        defence="the watchdog sums the run's RSS and kills past the memory limit",
        find="if rss_bytes(members) > self.limits.memory_bytes:",
        replace="if False:",
        tests=LIMITS_BWRAP,
    ),
    Mutant(
        id="docker-memory-limit",
        module=DOCKER_POOL,
        defence="mem_limit = memswap_limit = limits.memory_bytes",
        find="mem_limit=lim.memory_bytes,\n        memswap_limit=lim.memory_bytes,",
        replace="mem_limit=lim.memory_bytes * 4,\n        memswap_limit=lim.memory_bytes * 4,",
        tests=LIMITS_DOCKER,
    ),
    Mutant(
        id="capture-flood-kill",
        module=CAPTURE,
        defence="bwrap kills a run whose output goes far past the cap (output_exceeded)",
        find="        if capture.feed(chunk) > limit:\n",
        replace="        if capture.feed(chunk) > limit and False:\n",
        tests=LIMITS_BWRAP,
    ),
    Mutant(
        id="docker-flood-kill",
        module=DOCKER,
        defence="Docker kills a run whose output goes far past the cap (output_exceeded)",
        find="if cap.feed(data) > limit and not self._killed.is_set():",
        replace="if cap.feed(data) > limit and False:",
        tests=LIMITS_DOCKER,
    ),
    Mutant(
        id="capture-keeps-head-and-tail-only",
        module=CAPTURE,
        defence="captured output keeps its head and tail up to output_bytes",
        find="                keep = self.cap - half\n",
        replace="                keep = self.cap * 64\n",
        tests=LIMITS_BWRAP,
    ),
    Mutant(
        id="bwrap-wall-clock-timed-out",
        module=BWRAP,
        defence="the watchdog's kill at the wall limit is reported as timed_out",
        find=(
            "            if time.monotonic() >= deadline:\n"
            "                self._flags.timed_out = True\n"
        ),
        replace="            if time.monotonic() >= deadline:\n",
        tests=LIMITS_BWRAP,
    ),
    Mutant(
        id="docker-wall-clock-timed-out",
        module=DOCKER,
        defence="the watchdog's kill at the wall limit is reported as timed_out",
        find=(
            "            if time.monotonic() >= deadline:\n                self._timed_out = True\n"
        ),
        replace="            if time.monotonic() >= deadline:\n",
        tests=LIMITS_DOCKER,
    ),
    # --- collection (bwrap_wrapper.py, docker.py) ---------------------------------------------
    Mutant(
        id="wrapper-collect-leaf-nofollow",
        module=WRAPPER,
        defence="the wrapper opens a collected file with O_NOFOLLOW (a symlink is refused)",
        find="leaf = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)",
        replace="leaf = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK, dir_fd=fd)",
        tests=COLLECT_BWRAP,
    ),
    Mutant(
        id="wrapper-collect-regular-only",
        module=WRAPPER,
        defence="the wrapper collects regular files only (a fifo is refused)",
        find="    if not stat.S_ISREG(os.fstat(leaf).st_mode):\n",
        replace="    if False:\n",
        tests=COLLECT_BWRAP,
    ),
    Mutant(
        id="wrapper-collect-linked-folder",
        module=WRAPPER,
        defence="a symlinked folder on the way to a collected path is refused",
        find='                raise ValueError("symlink in path")',
        replace="                pass",
        tests=COLLECT_BWRAP,
    ),
    Mutant(
        id="docker-collect-regular-only",
        module=DOCKER_COLLECT,
        defence="Docker's collection accepts regular tar members only",
        find="                if not member.isreg():\n",
        replace="                if False:\n",
        tests=COLLECT_DOCKER,
    ),
    Mutant(
        id="docker-collect-linked-paths",
        module=DOCKER_COLLECT,
        defence="Docker's collection refuses a path with a symlink anywhere along it",
        find="    refused += [p for p in paths if p in linked]\n",
        replace="    linked = set()\n",
        tests=COLLECT_DOCKER,
    ),
    # --- teardown -----------------------------------------------------------------------------
    Mutant(
        id="docker-remove-container",
        module=DOCKER_POOL,
        defence="a container whose run ended is removed (on a thread of its own)",
        find="            container.remove(force=True)\n",
        replace="            pass\n",
        tests=(POOL, "-k never_share"),
    ),
    Mutant(
        id="docker-remove-container-inline",
        module=DOCKER,
        defence="a container with more than its keeper left is removed before finish() returns",
        find="            try:\n                self._container.remove(force=True)\n",
        replace="            try:\n                pass\n",
        tests=COLLECT_DOCKER,
    ),
    Mutant(
        id="docker-pool-once",
        module=DOCKER_POOL,
        defence="a pooled container is handed out once: a used one is never offered again",
        find="            if container_id in self._spent:\n",
        replace="            if False:\n",
        tests=(POOL, "-k handed_out_once"),
        fast=True,
    ),
    Mutant(
        id="docker-silent-command",
        module=DOCKER_EXEC,
        defence="the attach socket has no timeout: a silent command is not taken for ended",
        find="        self.sock.settimeout(None)\n",
        replace="",
        tests=(POOL, "-k silent"),
    ),
    Mutant(
        id="docker-kill-before-collect",
        module=DOCKER_EXEC,
        defence="before collection every process of the sandbox uid is killed",
        find="  kill -9 -1 2>/dev/null; left=\n",
        replace="  left=\n",
        tests=(DEFENCES, "-k collection_kills"),
    ),
)
