"""Plumbing of the live-workspace helper (see ``shell.py``): frames, JSON, tars, processes.

Runs inside the sandbox, imported by ``helper_ops`` (stdlib only; Python 3.7+; no ``json``,
``tarfile`` or ``re``: each costs milliseconds of start-up on every step). Also imported on
the host by tests (``verifiers.live.helper_io``), never by the host's own code paths.
"""

import os
import select
import stat
import time
import zlib

try:  # the C module: ``signal`` itself imports ``enum`` (3 ms of start-up)
    import _signal as signal
except ImportError:  # pragma: no cover - every CPython has it
    import signal

MAGIC = b"SBF1"
CHUNK = 1 << 20
NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
ZERO_BLOCK = bytes(512)
SANDBOX_TMP = "/tmp"  # noqa: S108 - the sandbox's own private tmpfs, fresh for each action
GIT_CONFIG = [
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false",
    "-c", "core.symlinks=true", "-c", "core.filemode=true", "-c", "core.ignorecase=false",
    "-c", "core.excludesFile=/dev/null", "-c", "core.sparseCheckout=false",
    "-c", "safe.directory=*", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.external=", "-c", "gc.auto=0", "-c", "commit.gpgsign=false",
    "-c", "user.name=SecureBench", "-c", "user.email=securebench@example.invalid",
]  # fmt: skip


class StepError(Exception):
    """An action refused for a reason the agent should read (a StepError observation)."""

    def __init__(self, error_type, message):
        Exception.__init__(self, message)
        self.error_type = error_type


# --- plumbing: privacy, frames, JSON -----------------------------------------------------


def make_undumpable():
    """prctl(PR_SET_DUMPABLE, 0): /proc/<self>/fd and /mem closed to same-uid code.

    Through ``_ctypes`` directly: ``import ctypes`` costs ~3 ms more on every step."""
    try:
        import _ctypes

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Int

        class Libc:
            _handle = _ctypes.dlopen(None, os.RTLD_NOW)

        prctl = Function(("prctl", Libc))
        prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        return prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE: verified, not assumed
    except Exception:  # noqa: BLE001 - best effort; the nonce still guards the result
        return False


def close_on_exec_all():
    """Like close_fds: a child we start sees fds 0-2 only."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:  # noqa: SIM105 - contextlib would cost start-up on every step
                os.set_inheritable(int(name), False)
            except OSError:
                pass


class Out:
    def __init__(self, fd):
        self.fd = fd

    def frame(self, kind, payload):
        data = MAGIC + kind + len(payload).to_bytes(4, "big")
        self._write(data + payload if len(payload) < 65536 else data)
        if len(payload) >= 65536:
            self._write(payload)

    def _write(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]


class Chunked:
    """A byte stream sent as frames of one kind, with its length and CRC-32."""

    def __init__(self, out, kind):
        self.out, self.kind = out, kind
        self.buf = bytearray()
        self.length = 0
        self.crc = 0

    def write(self, data):
        self.buf += data
        if len(self.buf) >= CHUNK:
            self.flush()

    def flush(self):
        if self.buf:
            data = bytes(self.buf)
            self.out.frame(self.kind, data)
            self.crc = zlib.crc32(data, self.crc)
            self.length += len(data)
            self.buf = bytearray()

    def summary(self):
        self.flush()
        return {"bytes": self.length, "crc": self.crc}


_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})
_ESCAPES.update({i: f"\\u{i:04x}" for i in range(0xDC80, 0xDD00)})  # surrogateescape'd bytes


def to_json(value):
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else "null"
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if isinstance(value, dict):
        return "{" + ",".join(to_json(str(k)) + ":" + to_json(v) for k, v in value.items()) + "}"
    return "[" + ",".join(to_json(item) for item in value) + "]"


def text(raw):
    return os.fsdecode(raw) if isinstance(raw, bytes) else raw


# --- stdin: header and tars ------------------------------------------------------------------


class Source:
    """Exact reads from a file descriptor (the host's stdin stream)."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""
        self.off = 0
        self.pos = 0

    def read(self, n):
        if len(self.buf) - self.off < n:
            parts, have = [self.buf[self.off :]], len(self.buf) - self.off
            while have < n:
                chunk = os.read(self.fd, max(CHUNK, n - have))
                if not chunk:
                    raise EOFError("the host's input ended early")
                parts.append(chunk)
                have += len(chunk)
            self.buf, self.off = b"".join(parts), 0
        data = self.buf[self.off : self.off + n]
        self.off += n
        self.pos += n
        return data

    def skip(self, n):
        while n > 0:
            step = min(n, CHUNK)
            self.read(step)
            n -= step


def _cstr(field):
    return field.split(b"\0", 1)[0]


def _number(field):
    if field[:1] and field[0] & 0x80:  # base-256 (GNU) for large values
        return int.from_bytes(field[1:], "big")
    digits = _cstr(field).strip()
    return int(digits, 8) if digits else 0


def _pax_records(data):
    records = {}
    while data:
        space = data.find(b" ")
        if space <= 0:
            break
        size = int(data[:space])
        key, _, value = data[space + 1 : size - 1].partition(b"=")
        records[key] = value
        data = data[size:]
    return records


def tar_members(src, length):
    """(name, type, mode, size, mtime, link) of each member of a tar of ``length`` bytes.

    The caller may read up to ``size`` bytes of the member's data from ``src`` before asking
    for the next member; whatever it left is skipped here."""
    end = src.pos + length
    pax = {}
    while end - src.pos >= 512:
        block = src.read(512)
        if block == ZERO_BLOCK:
            break
        kind = block[156:157]
        size = _number(block[124:136])
        name, link = _cstr(block[0:100]), _cstr(block[157:257])
        if block[257:262] == b"ustar" and _cstr(block[345:500]):
            name = _cstr(block[345:500]) + b"/" + name
        padded = (size + 511) // 512 * 512
        if kind in (b"x", b"g", b"L", b"K"):
            data = src.read(padded)[:size]
            if kind == b"x":
                pax.update(_pax_records(data))
            elif kind == b"L":
                pax[b"path"] = _cstr(data)
            elif kind == b"K":
                pax[b"linkpath"] = _cstr(data)
            continue
        name, link = pax.pop(b"path", name), pax.pop(b"linkpath", link)
        if b"size" in pax:
            size = int(pax.pop(b"size"))
            padded = (size + 511) // 512 * 512
        pax = {}
        start = src.pos
        yield name, kind, _number(block[100:108]), size, _number(block[136:148]), link
        src.skip(padded - (src.pos - start))
    src.skip(end - src.pos)


def safe_parts(name):
    """Components of a safe relative name (bytes), or None."""
    while name.startswith(b"./"):
        name = name[2:]
    name = name.rstrip(b"/")
    parts = name.split(b"/")
    if not name or name.startswith(b"/") or b"\0" in name:
        return None
    if any(part in (b"", b".", b"..") for part in parts):
        return None
    return parts


def under(rel, prefixes):
    return any(rel == p or rel.startswith(p + b"/") for p in prefixes)


class Extractor:
    """Creates members below one root without ever following a link."""

    def __init__(self, root, skip=()):
        self.root_fd = os.open(root, NOFOLLOW_DIR)
        self.skip = tuple(skip)
        self.stack = []  # [(component, fd)] of the folder the last member went into
        self.notes = []

    def folder(self, parts):
        depth = 0
        while depth < min(len(self.stack), len(parts)) and self.stack[depth][0] == parts[depth]:
            depth += 1
        for _, fd in self.stack[depth:]:
            os.close(fd)
        del self.stack[depth:]
        current = self.stack[-1][1] if self.stack else self.root_fd
        for part in parts[depth:]:
            try:
                fd = os.open(part, NOFOLLOW_DIR, dir_fd=current)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=current)
                fd = os.open(part, NOFOLLOW_DIR, dir_fd=current)
            except OSError:
                return None  # a link or a file where a folder should be
            self.stack.append((part, fd))
            current = fd
        return current

    def add(self, src, name, kind, mode, size, mtime, link):
        parts = safe_parts(name)
        if parts is None:
            self.notes.append(f"skipped unsafe name {text(name)!r}")
            return
        if under(b"/".join(parts), self.skip):
            return
        parent = self.folder(parts[:-1])
        if parent is None:
            self.notes.append(f"skipped {text(name)} (a link or file in its path)")
            return
        leaf = parts[-1]
        try:
            if kind == b"5":
                try:  # noqa: SIM105 - contextlib would cost start-up on every step
                    os.mkdir(leaf, 0o755 if mode & 0o111 else 0o700, dir_fd=parent)
                except FileExistsError:
                    pass
            elif kind in (b"0", b"\0", b"7"):
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(leaf, flags, 0o755 if mode & 0o111 else 0o644, dir_fd=parent)
                try:
                    left = size
                    while left:
                        data = src.read(min(left, CHUNK))
                        os.write(fd, data)
                        left -= len(data)
                finally:
                    os.close(fd)
                os.utime(leaf, (mtime, mtime), dir_fd=parent, follow_symlinks=False)
            elif kind == b"2":
                os.symlink(link, leaf, dir_fd=parent)
            else:
                self.notes.append(f"skipped {text(name)} (not a file, folder or link)")
        except FileExistsError:
            self.notes.append(f"skipped {text(name)} (given twice)")

    def extract(self, src, length):
        for member in tar_members(src, length):
            self.add(src, *member)
        self.close()

    def close(self):
        for _, fd in self.stack:
            os.close(fd)
        self.stack = []
        os.close(self.root_fd)


# --- the tree: scan, compare, send ---------------------------------------------------------


def scan(root, skip=(), descend=None):
    """(relative bytes path, lstat) of everything below ``root``, parents first, sorted."""
    found = []
    pending = [(root, b"")]
    stack = []
    while pending or stack:
        if pending:
            folder, prefix = pending.pop()
            stack.append(iter([(folder, prefix, n) for n in sorted(os.listdir(folder))]))
        try:
            folder, prefix, name = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        rel = prefix + name
        if under(rel, skip):
            continue
        path = folder + b"/" + name
        info = os.lstat(path)
        found.append((rel, info))
        if stat.S_ISDIR(info.st_mode) and (descend is None or descend(rel)):
            pending.append((path, rel + b"/"))
    return found


def signature(entries):
    return [
        (rel, s.st_mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino) for rel, s in entries
    ]


def totals(entries):
    size = sum(s.st_size for _, s in entries if stat.S_ISREG(s.st_mode))
    return len(entries), size


def _pax_record(key, value):
    body = b" " + key + b"=" + value + b"\n"
    size = len(body) + len(str(len(body)))
    if len(str(size)) + len(body) != size:
        size += 1
    return str(size).encode() + body


def tar_header(name, kind, mode, size, mtime, link=b""):
    pax = b""
    if len(name) > 100 or not name.isascii():
        pax += _pax_record(b"path", name)
    if len(link) > 100 or not link.isascii():
        pax += _pax_record(b"linkpath", link)
    head = b""
    if pax:
        head = _raw_header(b"././@PaxHeader", b"x", 0o644, len(pax), mtime, b"")
        head += pax + bytes(-len(pax) % 512)
        name = name.decode("ascii", "replace").encode("ascii", "replace")[:100]
        link = link.decode("ascii", "replace").encode("ascii", "replace")[:100]
    return head + _raw_header(name, kind, mode, size, mtime, link)


def _raw_header(name, kind, mode, size, mtime, link):
    mtime = min(max(int(mtime), 0), 8**11 - 1)
    block = bytearray(512)
    block[0 : len(name)] = name
    block[100:108] = b"%07o\0" % (mode & 0o7777)
    block[108:116] = b"0000000\0"
    block[116:124] = b"0000000\0"
    block[124:136] = b"%011o\0" % size
    block[136:148] = b"%011o\0" % mtime
    block[148:156] = b" " * 8
    block[156:157] = kind
    block[157 : 157 + len(link)] = link
    block[257:265] = b"ustar\x0000"
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


_TYPES = {stat.S_IFIFO: b"6", stat.S_IFCHR: b"3", stat.S_IFBLK: b"4"}


def send_tree(out, root, entries, notes):
    """Tar of the scanned entries as ``T`` frames; returns its length and CRC."""
    tar = Chunked(out, b"T")
    for rel, info in entries:
        mode, path = info.st_mode, root + b"/" + rel
        if stat.S_ISDIR(mode):
            tar.write(tar_header(rel, b"5", mode, 0, info.st_mtime))
        elif stat.S_ISLNK(mode):
            tar.write(tar_header(rel, b"2", 0o777, 0, info.st_mtime, os.readlink(path)))
        elif stat.S_ISREG(mode):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                size = info.st_size
                tar.write(tar_header(rel, b"0", mode, size, info.st_mtime))
                left = size
                while left:  # nothing else runs: the size cannot change under us
                    data = os.read(fd, min(left, CHUNK)) or bytes(min(left, CHUNK))
                    tar.write(data)
                    left -= len(data)
                tar.write(bytes(-size % 512))
            finally:
                os.close(fd)
        elif stat.S_IFMT(mode) in _TYPES:  # the host drops these and names them
            tar.write(tar_header(rel, _TYPES[stat.S_IFMT(mode)], mode, 0, info.st_mtime))
        else:
            notes.append(f"{text(rel)} is a socket: not kept")
    tar.write(ZERO_BLOCK * 2)
    return tar.summary()


def changes(before, after):
    """(written, deleted) relative paths between two signatures (files and links only)."""
    old = {row[0]: row for row in before}
    new = {row[0]: row for row in after}
    written = [rel for rel, row in new.items() if old.get(rel) != row and not _is_dir(row)]
    deleted = [rel for rel, row in old.items() if rel not in new and not _is_dir(row)]
    return [text(r) for r in sorted(written)[:500]], [text(r) for r in sorted(deleted)[:500]]


def _is_dir(row):
    return stat.S_ISDIR(row[1])


# --- processes ---------------------------------------------------------------------------


def ancestors():
    keep, pid = {os.getpid()}, os.getpid()
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            break
        parent = int(data[data.rfind(b")") + 2 :].split()[1])
        if parent <= 0 or parent in keep:
            break
        keep.add(parent)
        pid = parent
    return keep


def others(mode, keep):
    """Live processes of the sandbox we may kill (pid namespace) or of our uid (Docker)."""
    uid, found = os.getuid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in keep:
            continue
        try:
            if mode == "uid" and os.stat("/proc/" + name).st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if data[data.rfind(b")") + 2 :][:1] != b"Z":
            found.append(int(name))
    return found


def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def kill_others(mode, keep):
    """SIGKILL every other process of the sandbox until none is left."""
    for round_ in range(3000):
        if mode == "pidns":  # bwrap: kill(-1) reaches all but pid 1 and us, atomically
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                return True
        else:  # Docker: never our ancestors (the exec's shell holds the stream)
            pids = others(mode, keep)
            if not pids:
                return True
            for pid in pids:
                try:  # noqa: SIM105 - contextlib would cost start-up on every step
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        reap()
        time.sleep(0.001 if round_ < 100 else 0.01)
    return False


def exit_code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def spawn(argv, cwd, env):
    """Fork + exec with stdin /dev/null and pipes of its own; (pid, stdout fd, stderr fd)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing here may raise past os._exit
        try:
            os.setsid()
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE; execs inherit
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.chdir(cwd)
            os.execve(argv[0], argv, env)  # noqa: S606 - an argument list, no shell of ours
        except BaseException:  # noqa: BLE001
            os._exit(127)
    os.close(out_w)
    os.close(err_w)
    return pid, out_r, err_r


class Stream:
    """Head forwarded live, tail kept for the end (half the allowance each); all counted."""

    def __init__(self, out, live_kind, tail_kind, cap):
        self.out, self.live_kind, self.tail_kind = out, live_kind, tail_kind
        self.head_left = cap // 2
        self.tail_cap = cap - cap // 2
        self.head_sent = 0
        self.tail = bytearray()
        self.total = 0

    def feed(self, data):
        self.total += len(data)
        if self.head_left > 0:
            part = data[: self.head_left]
            self.out.frame(self.live_kind, part)
            self.head_left -= len(part)
            self.head_sent += len(part)
            data = data[len(part) :]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[: -self.tail_cap]

    def finish(self):
        """Send the tail; returns how many bytes were in neither the head nor the tail."""
        tail = bytes(self.tail[-self.tail_cap :]) if self.tail_cap else b""
        if tail:
            self.out.frame(self.tail_kind, tail)
        return self.total - self.head_sent - len(tail)


def describe(shown, info, path, read_only):
    mode = info.st_mode
    suffix = "  (read-only)" if read_only else ""
    if stat.S_ISDIR(mode):
        return f"dir  {'-':>10}  {shown}/{suffix}"
    if stat.S_ISREG(mode):
        return f"file {info.st_size:>10}  {shown}{suffix}"
    if stat.S_ISLNK(mode):
        return f"link {'-':>10}  {shown} -> {text(os.readlink(path))}"
    kind = {stat.S_IFIFO: "fifo", stat.S_IFSOCK: "sock"}.get(stat.S_IFMT(mode), "dev")
    return f"{kind:<4} {'-':>10}  {shown}"


def read_text(fd, offset, limit, cap):
    """Lines [offset, offset + limit) of a text file (0-based; all lines when None), capped."""
    skip = max(int(offset or 0), 0)
    stop = None if limit is None else skip + max(int(limit), 0)
    kept, index, count, pending = bytearray(), 0, 0, b""
    chunk = b""
    while stop is None or index < stop:
        chunk = os.read(fd, CHUNK)
        if index == 0 and not pending and b"\0" in chunk[:8192]:
            raise StepError(
                "BinaryFile", "the file looks binary (NUL bytes): inspect it with bash (xxd, od)"
            )
        if not chunk:
            break
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if index >= skip and (stop is None or index < stop):
                kept += line + b"\n"
                count += 1
            index += 1
        if len(kept) > cap or len(pending) > cap:
            break
    if pending and index >= skip and (stop is None or index < stop) and len(kept) <= cap:
        kept += pending
        count += 1
    truncated = len(kept) > cap or (len(pending) > cap and bool(chunk))
    return {
        "text": bytes(kept[:cap]).decode("utf-8", "replace"),
        "truncated": truncated,
        "first_line": skip + 1,
        "lines": count,
    }


def git_env(git_dir, work_tree, index):
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": SANDBOX_TMP,
        "LANG": "C.UTF-8",
        "GIT_DIR": git_dir,
        "GIT_WORK_TREE": work_tree,
        "GIT_INDEX_FILE": index,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_ATTR_NOSYSTEM": "1",
    }
    return env


def git(args, env, sink=None):
    """Run git (trusted arguments) to the end; (exit code, stdout or b"", stderr tail)."""
    path = next(
        (d + "/git" for d in env["PATH"].split(":") if d and os.access(d + "/git", os.X_OK)), None
    )
    if path is None:
        raise StepError("DiffFailed", "git is not available in the sandbox")
    argv = [path] + GIT_CONFIG + ["-c", "core.worktree=" + env["GIT_WORK_TREE"]] + args
    pid, out_r, err_r = spawn(argv, env["GIT_WORK_TREE"], env)
    out, err, fds = bytearray(), bytearray(), [out_r, err_r]
    while fds:
        for fd in select.select(fds, [], [])[0]:
            data = os.read(fd, CHUNK)
            if not data:
                fds.remove(fd)
                os.close(fd)
            elif fd == err_r:
                err = (err + data)[-8192:]
            elif sink is not None:
                sink.write(data)
            else:
                out += data
    return exit_code(os.waitpid(pid, 0)[1]), bytes(out), bytes(err)
