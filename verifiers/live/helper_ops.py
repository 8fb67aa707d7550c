"""The operations of the live-workspace helper (see ``shell.py``), run inside the sandbox."""

import marshal
import os
import select
import stat
import time

if __package__:  # imported on the host (tests)
    from verifiers.live.helper_io import (
        SANDBOX_TMP,
        Chunked,
        Extractor,
        Out,
        Source,
        StepError,
        Stream,
        ancestors,
        changes,
        close_on_exec_all,
        describe,
        exit_code,
        git,
        git_env,
        kill_others,
        make_undumpable,
        others,
        read_text,
        safe_parts,
        scan,
        send_tree,
        signal,
        signature,
        spawn,
        tar_members,
        text,
        to_json,
        totals,
        under,
    )  # fmt: skip
else:  # inside the sandbox, next to helper_io.py (shell.py put this folder on sys.path)
    from helper_io import (  # type: ignore[no-redef]
        SANDBOX_TMP,
        Chunked,
        Extractor,
        Out,
        Source,
        StepError,
        Stream,
        ancestors,
        changes,
        close_on_exec_all,
        describe,
        exit_code,
        git,
        git_env,
        kill_others,
        make_undumpable,
        others,
        read_text,
        safe_parts,
        scan,
        send_tree,
        signal,
        signature,
        spawn,
        tar_members,
        text,
        to_json,
        totals,
        under,
    )  # fmt: skip

LIST_MAX_ENTRIES = 1000
TICK = 0.05  # seconds between process counts while the command runs


class Action:
    def __init__(self, header, out):
        self.h = header
        self.out = out
        self.workdir = header["workdir"].rstrip("/") or "/"
        self.root = os.fsencode(self.workdir)
        self.read_only = tuple(os.fsencode(p) for p in header.get("read_only", ()))
        self.limits = header["limits"]
        self.kill_mode = header.get("kill", "pidns")
        self.keep = ancestors()
        self.notes = []
        self.result = {"phases": {}}
        self.started = time.monotonic()

    def mark(self, phase):
        """Milliseconds since the helper started, per phase (for the benchmark's report)."""
        self.result["phases"][phase] = round((time.monotonic() - self.started) * 1000, 2)

    # -- workspace paths as the agent names them

    def resolve(self, rel):
        """The real path of a workspace-relative name, refusing any way out of it."""
        if not isinstance(rel, str) or "\0" in rel:
            raise StepError("PathRefused", "the path must be a string without NUL characters")
        if rel.startswith("/"):
            raise StepError(
                "PathRefused", "absolute paths are refused: paths are relative to the workspace"
            )
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise StepError("PathRefused", "'..' is refused: paths stay inside the workspace")
        real = os.path.realpath(os.path.join(self.workdir, *parts))
        if not self.inside(real):
            raise StepError(
                "PathRefused", f"{rel} leads outside the workspace (through a symbolic link)"
            )
        return real

    def inside(self, real):
        return real == self.workdir or real.startswith(self.workdir.rstrip("/") + "/")

    def relative(self, real):
        return os.path.relpath(real, self.workdir)

    def is_read_only(self, real):
        rel = os.fsencode(self.relative(real))
        return under(rel, self.read_only)

    # -- tree

    def extract(self, src):
        lengths = self.h.get("tars") or []
        if lengths:
            extractor = Extractor(self.workdir, self.read_only)
            extractor.extract(src, lengths[0])
            self.notes += extractor.notes[:20]

    def tree_entries(self):
        return scan(self.root, self.read_only)

    def send_tree_if(self, entries, changed):
        files, size = totals(entries)
        self.result["tree_totals"] = {"files": files, "bytes": size}
        if not changed:
            return
        if files > self.limits["files"]:
            self.result["over"] = {
                "limit": "workspace_files",
                "value": files,
                "max": self.limits["files"],
            }
        elif size > self.limits["bytes"]:
            self.result["over"] = {
                "limit": "workspace_bytes",
                "value": size,
                "max": self.limits["bytes"],
            }
        else:
            self.result["tree"] = send_tree(self.out, self.root, entries, self.notes)

    # -- ops

    def op_seed(self, src):
        self.extract(src)
        self.result["text"] = self.listing(self.workdir)
        entries = self.tree_entries()
        self.send_tree_if(entries, self.h.get("send_tree") == "always")

    def op_list(self, src):
        self.extract(src)
        self.result["text"] = self.listing(self.resolve(self.h["args"].get("path") or "."))

    def op_read(self, src):
        self.extract(src)
        args = self.h["args"]
        real = self.resolve(args["path"])
        fd = self.open_regular(real, args["path"])
        try:
            self.result.update(
                read_text(fd, args.get("offset"), args.get("limit"), self.limits["read"])
            )
        finally:
            os.close(fd)

    def open_regular(self, real, shown):
        try:
            info = os.lstat(real)
        except FileNotFoundError:
            raise StepError("NotFound", f"{shown} does not exist") from None
        if stat.S_ISDIR(info.st_mode):
            raise StepError("IsADirectory", f"{shown} is a folder (use list_files)")
        if not stat.S_ISREG(info.st_mode):
            raise StepError("NotAFile", f"{shown} is not a regular file (FIFO, socket or device)")
        try:
            return os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise StepError("NotReadable", f"{shown} cannot be read: {exc.strerror}") from None

    def op_write(self, src):
        self.extract(src)
        before = signature(self.tree_entries())
        args = self.h["args"]
        shown = args["path"]
        target = self.writable_target(shown)
        if budget_left(args) == 0.0:
            # Copying the workspace in took the episode past its wall-time budget: a file
            # written now would be produced after the budget ran out.
            raise StepError(
                "BudgetExhausted",
                "the episode's wall-time budget ran out before the file could be written; "
                "nothing was written",
            )
        data = args["content"].encode("utf-8", "surrogatepass")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(target, flags, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as exc:
            if exc.errno in (28, 27, 122):  # ENOSPC, EFBIG, EDQUOT
                raise StepError(
                    "WorkspaceLimit", f"the workspace is full: {exc.strerror}"
                ) from None
            raise StepError("NotWritable", f"{shown} cannot be written: {exc.strerror}") from None
        entries = self.tree_entries()
        self.result["written"], self.result["deleted"] = changes(before, signature(entries))
        self.result["written"] = sorted(set(self.result["written"]) | {self.relative(target)})
        self.send_tree_if(entries, True)

    def writable_target(self, shown):
        self.resolve(shown)  # the refusals of every path: absolute, '..', links leading out
        parts = [p for p in shown.split("/") if p not in ("", ".")]
        if not parts:
            raise StepError("PathRefused", "write_file needs a file path, not the workspace")
        parent = self.resolve("/".join(parts[:-1]) or ".")
        if self.is_read_only(parent):
            raise StepError("ReadOnlyPath", f"{shown} is inside a read-only part of the workspace")
        current = self.workdir
        for part in self.relative(parent).split("/"):
            if part in ("", "."):
                continue
            current = current + "/" + part
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                os.mkdir(current, 0o755)
                continue
            if not stat.S_ISDIR(info.st_mode):
                raise StepError("NotADirectory", f"{self.relative(current)} is not a folder")
        target = parent + "/" + parts[-1]
        if os.path.islink(target):  # inside the workspace (resolve checked): write through it
            target = os.path.realpath(target)
        if self.is_read_only(target):
            raise StepError("ReadOnlyPath", f"{shown} is read-only")
        if os.path.lexists(target) and not os.path.isfile(target):
            kind = "a folder" if os.path.isdir(target) else "not a regular file"
            raise StepError("NotAFile", f"{shown} is {kind}")
        return target

    def op_bash(self, src):
        self.extract(src)
        before = signature(self.tree_entries())
        self.mark("extracted")
        args = self.h["args"]
        shell = next(
            (s for s in ("/bin/bash", "/usr/bin/bash") if os.access(s, os.X_OK)), "/bin/sh"
        )
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        started = time.monotonic()
        seconds, by_budget = float(args["timeout"]), False
        left = budget_left(args)
        if left is not None and left < seconds:
            # The budget's end is a moment on the wall clock: the time the workspace took to
            # be copied in is not added to it, so nothing the command writes is late.
            seconds, by_budget = left, True
        if seconds <= 0:
            self.result.update(killed="budget", exit_code=None, seconds=0.0)
            self.result.update(omitted=[0, 0], totals=[0, 0], written=[], deleted=[])
            return
        pid, out_r, err_r = spawn([shell, "-c", args["command"]], self.workdir, dict(os.environ))
        streams = {
            out_r: Stream(self.out, b"1", b"3", self.limits["output"]),
            err_r: Stream(self.out, b"2", b"4", self.limits["output"]),
        }
        killed, status = self.watch(pid, streams, wake_r, started + seconds)
        if killed == "timeout" and by_budget:
            killed = "budget"
        self.mark("command")
        kill_others(self.kill_mode, self.keep)
        self.mark("killed")
        if status is None:
            try:
                status = os.waitpid(pid, 0)[1]
            except ChildProcessError:
                status = None
        self.drain(streams)
        self.result["seconds"] = round(time.monotonic() - started, 3)
        self.result["killed"] = killed
        self.result["exit_code"] = None if killed or status is None else exit_code(status)
        self.result["omitted"] = [s.finish() for s in streams.values()]
        self.result["totals"] = [s.total for s in streams.values()]
        entries = self.tree_entries()
        after = signature(entries)
        self.result["written"], self.result["deleted"] = changes(before, after)
        self.send_tree_if(entries, after != before)
        self.mark("tree")

    def watch(self, pid, streams, wake_r, deadline):
        """Forward output until the command exits, its deadline, or a limit; (killed, status)."""
        open_fds = list(streams)
        last_count = time.monotonic()
        flood = self.limits["flood"]
        threshold = max(self.limits["pids"] - 4, 1)
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done:
                return None, status
            now = time.monotonic()
            if now >= deadline:
                return "timeout", None
            ready = select.select(open_fds + [wake_r], [], [], min(TICK, deadline - now))[0]
            for fd in ready:
                if fd == wake_r:
                    try:  # noqa: SIM105 - contextlib would cost start-up on every step
                        os.read(wake_r, 512)
                    except BlockingIOError:
                        pass
                    continue
                data = os.read(fd, 65536)
                if not data:
                    open_fds.remove(fd)
                    continue
                streams[fd].feed(data)
                if streams[fd].total > flood:
                    return "output", None
            if time.monotonic() - last_count >= TICK:
                last_count = time.monotonic()
                count = len(others(self.kill_mode, self.keep))
                self.result["processes_peak"] = max(count, self.result.get("processes_peak", 0))
                if count >= threshold:
                    return "processes", None

    @staticmethod
    def drain(streams):
        """What the command's processes wrote before they died (every writer is dead now)."""
        for fd, stream in streams.items():
            os.set_blocking(fd, False)
            while True:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if not data:
                    break
                stream.feed(data)
            os.close(fd)

    def listing(self, start):
        try:
            info = os.lstat(start)
        except FileNotFoundError:
            raise StepError("NotFound", f"{self.relative(start)} does not exist") from None
        if not stat.S_ISDIR(info.st_mode):
            return describe(self.relative(start), info, start, self.is_read_only(start))
        base = os.fsencode(start)
        prefix = b"" if start == self.workdir else os.fsencode(self.relative(start)) + b"/"
        lines, more = [], 0
        for rel, entry in scan(base, descend=lambda r: r.rsplit(b"/", 1)[-1] != b".git"):
            if len(lines) >= LIST_MAX_ENTRIES:
                more += 1
                continue
            full = prefix + rel
            lines.append(
                describe(
                    text(full), entry, os.fsdecode(base + b"/" + rel), under(full, self.read_only)
                )
            )
        if more:
            lines.append(f"... {more} more entries not listed (use bash: find)")
        return "\n".join(lines) if lines else "(empty)"

    def op_diff(self, src):
        """The agent's tree against the PRISTINE repository (the seed's), never the agent's .git.

        git runs with GIT_DIR = a copy of the seed's .git (else a commit of the seed's files),
        GIT_WORK_TREE = the agent's files without any .git folder, and an index of its own."""
        args, lengths = self.h["args"], self.h["tars"]
        repo = os.fsencode(args["repo"])
        work = self.workdir + "/tree"
        pristine, base_tree = SANDBOX_TMP + "/sb-pristine.git", SANDBOX_TMP + "/sb-base"
        for folder in (work, pristine, base_tree):
            os.mkdir(folder, 0o700)
        agent = Extractor(work)
        for member in tar_members(src, lengths[0]):
            name = repo_relative(member[0], repo)
            if name and b".git" not in name.split(b"/"):  # every .git of the agent stays out
                agent.add(src, name, *member[1:])
        agent.close()
        git_copy, files = Extractor(pristine), Extractor(base_tree)
        has_git = False
        for member in tar_members(src, lengths[1]):
            name = repo_relative(member[0], repo)
            parts = name.split(b"/") if name else []
            if parts and parts[0] == b".git":
                has_git = True
                if len(parts) > 1:
                    git_copy.add(src, b"/".join(parts[1:]), *member[1:])
            elif parts and not has_git and b".git" not in parts:
                files.add(src, name, *member[1:])
        git_copy.close()
        files.close()
        base = args["base"] if has_git else self.commit_seed(pristine, base_tree)
        env = git_env(pristine, work, SANDBOX_TMP + "/sb-index")
        if has_git and git(["rev-parse", "--verify", "--quiet", base + "^{commit}"], env)[0] != 0:
            self.notes.append(f"base_commit {base} is not in the repository: diffed against HEAD")
            base = "HEAD"
        for argv in (["read-tree", base], ["add", "-A"]):
            code, _, err = git(argv, env)
            if code != 0:
                raise StepError("DiffFailed", f"git {argv[0]} failed: {text(err[-2000:])}")
        code, names, err = git(["diff", "--cached", "--name-only", "-z", "--no-renames", base], env)
        patch = Chunked(self.out, b"P")
        code2, _, err2 = git(
            ["diff", "--cached", "--binary", "--no-renames", "--no-ext-diff",
             "--no-textconv", "--no-color", "--src-prefix=a/", "--dst-prefix=b/", base],
            env, sink=patch,
        )  # fmt: skip
        if code != 0 or code2 != 0:
            raise StepError("DiffFailed", f"git diff failed: {text((err + err2)[-2000:])}")
        self.result["patch"] = patch.summary()
        self.result["paths"] = [text(p) for p in names.split(b"\0") if p][:10000]
        self.result["base"] = base

    def commit_seed(self, pristine, base_tree):
        """No .git in the seed: its files, committed here, are the base."""
        self.notes.append("the repository has no .git: diffed against the files it started with")
        env = git_env(pristine, base_tree, SANDBOX_TMP + "/sb-base-index")
        steps = (["init", "-q"], ["add", "-A", "--force"],
                 ["commit", "-q", "--no-verify", "--allow-empty", "-m", "seed"])  # fmt: skip
        for argv in steps:
            code, _, err = git(argv, env)
            if code != 0:
                raise StepError("DiffFailed", f"git {argv[0]} failed: {text(err[-2000:])}")
        return text(git(["rev-parse", "HEAD"], env)[1].strip())


def budget_left(args):
    """Seconds left of the episode's wall-time budget (``until``: its end on the wall clock,
    which the sandbox shares with the host), 0.0 when spent; None when there is none."""
    until = args.get("until")
    if until is None:
        return None
    return max(float(until) - time.time(), 0.0)


def repo_relative(name, repo):
    """A tar member's name relative to the repository folder (None when outside it)."""
    parts = safe_parts(name)
    if parts is None:
        return None
    name = b"/".join(parts)
    if not repo:
        return name
    return name[len(repo) + 1 :] if name.startswith(repo + b"/") else None


OPS = {
    "seed": Action.op_seed,
    "list_files": Action.op_list,
    "read_file": Action.op_read,
    "write_file": Action.op_write,
    "bash": Action.op_bash,
    "diff": Action.op_diff,
}


def main():
    undumpable = make_undumpable()
    close_on_exec_all()
    os.umask(0o022)
    out = Out(1)
    src = Source(0)
    # The header is the host's (trusted) own marshal data, never anything of the agent's.
    header = marshal.loads(src.read(int.from_bytes(src.read(8), "big")))  # noqa: S302
    result = {"nonce": header["nonce"], "undumpable": undumpable, "ok": True}
    action = Action(header, out)
    try:
        OPS[header["op"]](action, src)
    except StepError as exc:
        action.result.update(ok=False, error_type=exc.error_type, message=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported, never a hang
        import traceback

        traceback.print_exc()
        action.result.update(ok=False, error_type="HelperError", message=repr(exc)[:2000])
        action.result.pop("tree", None)
        action.result.pop("patch", None)
    result.update(action.result)
    result["notes"] = action.notes[:50]
    out.frame(b"R", to_json(result).encode("utf-8", "replace"))
    return 0
