"""The candidate's player of an evaluation call (issue 33, ``candidate_program``).

An arena evaluation program plays against the candidate's own program. The player runs in a
sandbox of its own (the candidate's files copied into its /work, no network, no
/evaluation, the code limits), and the two never touch: the host writes each
``to_candidate`` string to the player's stdin, reads one line back within the reply
timeout, and hands that line to the program as data (``{"from_candidate": LINE}``). The
player's stdout reaches only this relay, so nothing it prints can become a message of the
program's channel.

Whatever the player does wrong (no command, never answers, a line over the cap, exits) is
told to the program as a ``problem``, never turned into an error of the evaluation: judging
a bad player is the program's job. A player that missed a reply is killed, since a late
line would otherwise answer the next request; the program may ask for a fresh one.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.families.code_relay import DeadlinePassed, FrameTooLarge, LineReader, write_all
from verifiers.sandbox.base import CODE_LIMITS, Sandbox, SandboxProcess, SandboxSpec
from verifiers.scratch_files import unsafe_relative_path

MAX_COMMAND_FILE_BYTES = 1024
MAX_LINE_BYTES = 64 * 1024  # each way: a request to the player, a reply from it
MAX_RESTARTS = 100  # per call
MAX_NOTES = 20
PLAYER_EXIT_SECONDS = 1.0  # a killed player's sandbox must be torn down by then
MIN_PLAYER_WALL = 1.0

# The problems the program is told about (eval-spec "The channel").
TIMEOUT = "timeout"
EXITED = "exited"
TOO_LONG = "too_long"
NOT_STARTED = "not_started"
TOO_MANY_RESTARTS = "too_many_restarts"


@dataclass(frozen=True)
class CandidateProgram:
    """evaluation.yaml's ``candidate_program``: how to start the candidate's player."""

    command: tuple[str, ...] | None = None
    command_file: str | None = None  # a file of the candidate holding the command line
    reply_timeout_seconds: float = 2.0


def player_command(program: CandidateProgram, candidate_dir: Path) -> tuple[list[str], str]:
    """(argv, "") or ([], why the candidate gives no usable command)."""
    if program.command:
        return list(program.command), ""
    name = program.command_file or ""
    unsafe = unsafe_relative_path(name)
    if unsafe:
        return [], f"command file: {unsafe}"
    path = candidate_dir.joinpath(*name.split("/"))
    # The folder is our own copy (regular files and folders only), so no link to follow.
    if path.is_symlink() or not path.is_file():
        return [], f"the candidate has no command file {name}"
    if path.stat().st_size > MAX_COMMAND_FILE_BYTES:
        return [], f"command file {name} is over {MAX_COMMAND_FILE_BYTES} bytes"
    data = path.read_bytes()
    if b"\0" in data:
        return [], f"command file {name} contains a NUL byte"
    try:
        argv = shlex.split(data.decode("utf-8"))
    except UnicodeDecodeError:
        return [], f"command file {name} is not UTF-8 text"
    except ValueError as exc:  # e.g. an unclosed quote
        return [], f"command file {name} is not a command line: {exc}"
    if not argv:
        return [], f"command file {name} is empty"
    return argv, ""


def request_problem(text: str) -> str:
    """Why the program's ``to_candidate`` string cannot be sent ("" when it can): a newline
    would make it two requests, and the cap bounds what a player must read."""
    if "\n" in text or "\r" in text:
        return "to_candidate string contains a line break"
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_LINE_BYTES - 1:
        return f"to_candidate string is {size} bytes, over the {MAX_LINE_BYTES - 1} byte cap"
    return ""


class Player:
    """At most one player sandbox at a time, started at the first request (lazily: most
    calls of most programs never need one)."""

    def __init__(
        self,
        sandbox: Sandbox,
        program: CandidateProgram,
        candidate_dir: Path,
        image: str | None,
        deadline: float,
    ) -> None:
        self._sandbox, self._program = sandbox, program
        self._candidate_dir, self._image, self._deadline = candidate_dir, image, deadline
        self._process: SandboxProcess | None = None
        self._reader: LineReader | None = None
        self._gone: str | None = None  # why no player can answer now (until a restart)
        self._started = False
        self.restarts = 0
        self.notes: list[str] = []

    def ask(self, text: str) -> dict[str, Any]:
        """The message for the program: the player's one line, or why there is none."""
        if not self._started:
            self._start()
        if self._gone is not None or self._process is None or self._reader is None:
            return {"from_candidate": None, "problem": self._gone or NOT_STARTED}
        deadline = time.monotonic() + self._program.reply_timeout_seconds
        try:
            write_all(self._process.stdin, text.encode("utf-8", "surrogatepass") + b"\n", deadline)
            line = self._reader.read_line(deadline, MAX_LINE_BYTES)
        except DeadlinePassed:
            return self._lose(TIMEOUT)
        except FrameTooLarge:
            return self._lose(TOO_LONG)
        except OSError:  # its stdin is closed: it exited
            return self._lose(EXITED)
        if line is None:
            return self._lose(EXITED)
        return {"from_candidate": line.decode("utf-8", errors="replace")}

    def restart(self) -> dict[str, Any]:
        if self.restarts >= MAX_RESTARTS:
            return {"restarted": False, "problem": TOO_MANY_RESTARTS}
        self.restarts += 1
        self._stop()
        self._start()
        if self._gone is not None:
            return {"restarted": False, "problem": self._gone}
        return {"restarted": True}

    def close(self) -> None:
        """Kill and tear down the player, if any (every path of a call ends here)."""
        self._stop()

    def _start(self) -> None:
        self._started, self._gone = True, None
        command, why = player_command(self._program, self._candidate_dir)
        if not command:
            self._gone = NOT_STARTED
            self._note(why)
            return
        wall = max(self._deadline - time.monotonic(), MIN_PLAYER_WALL)
        spec = SandboxSpec(
            command=command,
            image=self._image,
            work_files=self._candidate_dir,
            limits=CODE_LIMITS.with_wall(wall),
        )
        # SandboxUnavailable (and OSError) propagate: a backend that cannot start a sandbox
        # is our fault, and the whole call is retried.
        self._process = self._sandbox.start(spec)
        self._reader = LineReader(self._process.stdout)

    def _lose(self, problem: str) -> dict[str, Any]:
        self._note(f"player {self.restarts + 1}: {problem}")
        self._stop()
        self._gone = problem
        return {"from_candidate": None, "problem": problem}

    def _stop(self) -> None:
        process, self._process, self._reader = self._process, None, None
        if process is None:
            return
        process.kill()
        # finish() tears the sandbox down; a teardown it cannot complete raises
        # SandboxUnavailable (ours), which the caller lets through after killing the program.
        process.finish(timeout=PLAYER_EXIT_SECONDS)

    def _note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)
        elif len(self.notes) == MAX_NOTES:
            self.notes.append("… further player notes left out")
