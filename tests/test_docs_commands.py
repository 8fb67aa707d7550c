"""Every command the README and the guides print is run as printed by some test — or, for the
few that a test cannot run (the suite itself, the mutation proof, timed benchmarks), by CI or
by hand, and the table below says which and why. A printed command no entry accounts for
fails here: run it in a test, or print it differently.

Run here: the production exports (they configure a site whose deploy check is clean) and the
`make worker` lines (each starts a worker on the queues and with the host name it names). The
operators' guide names every setting the site reads, and reads every one it names.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.common import django_env, manage
from bench.site import CollectedProcess
from tests.conftest import REPO_ROOT
from tests.test_layers import PACKAGES
from tests.test_readme_commands import newcomer_env

DOCUMENTS = (REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")))
OPERATORS = REPO_ROOT / "docs" / "operators.md"
# A line or a code span that starts with one of these is a command a reader may paste.
COMMAND = re.compile(
    r"(?:make|curl|export|celery|python3?|pip3?|pytest|bash|sh|sudo|apt-get|apt|docker"
    r"|\.venv/bin/\S+)(?:\s|$)"
)
# In a shell block, a line that sets a shell variable is part of what is pasted.
ASSIGNMENT = re.compile(r"[A-Z][A-Z0-9_]*=")
SECONDS = 180
BACKSLASH = "\\"

pytestmark = pytest.mark.database_independent


@dataclass(frozen=True)
class Runner:
    """Who runs the printed commands matching ``pattern``: ``where`` (a test, or CI's script)
    holds ``evidence``, the text that runs them; ``how`` says what differs from the print."""

    pattern: str
    where: str
    evidence: str
    how: str


RUNNERS = (
    Runner(
        r"\.venv/bin/python manage\.py .+",
        "tests/test_readme_commands.py",
        "def test_a_readme_command_works_as_printed_after_make_run",
        "every variant of the usage line, placeholders filled in, against `make run`'s site",
    ),
    Runner(
        r"make run",
        "bench/site.py",
        '["make", "--no-print-directory", target, f"PORT={port}"]',
        "on a free port, by every test that starts a site (tests/test_readme_commands.py, e2e/)",
    ),
    Runner(
        r"make serve( HOST=\S+)?( PORT=\S+)?",
        "tests/test_serve.py",
        'target="serve"',
        "on 127.0.0.1 and a free port",
    ),
    Runner(
        r"make worker( [A-Z_]+=\S+)*",
        "tests/test_docs_commands.py",
        "def test_a_printed_make_worker_line_starts_a_worker",
        "as printed",
    ),
    Runner(
        r"export .+",
        "tests/test_docs_commands.py",
        "def test_the_production_exports_configure_a_site_the_deploy_check_passes",
        "as printed, with a real key for the SECRET_KEY placeholder",
    ),
    Runner(
        r"curl .+|API=.+|RUN=.+|ART=.+",
        "tests/test_readme_commands.py",
        "def test_the_guides_curl_session_works_as_printed",
        "against the started site's address, with the run ids the site answered",
    ),
    Runner(
        r"\.venv/bin/python agent\.py BENCHMARK_URL",
        "tests/episodes/test_documented_agent.py",
        "[sys.executable, str(agent), opened.url]",
        "the guide's agent saved as agent.py, with a live run's URL",
    ),
    Runner(
        r"\.venv/bin/python examples/agents/scripted_agent\.py BENCHMARK_URL \[--limit N\]",
        "tests/e2e/conftest.py",
        "[sys.executable, str(EXAMPLE_AGENT), url]",
        "with a live run's URL, without --limit",
    ),
    Runner(
        r"\.venv/bin/lint-imports --no-logo",
        "tests/test_layers.py",
        '[str(LINT_IMPORTS), "--no-logo", "--no-cache", *args]',
        "with --no-cache",
    ),
    Runner(
        r"make test( PYTEST_ARGS=\S+)?",
        ".ci/run",
        'make test PYTEST_ARGS="--durations=40"',
        "by CI: the suite cannot run itself",
    ),
    Runner(
        r"make mutation( MUTATION_ARGS=--fast)?",
        ".ci/run",
        "make mutation MUTATION_ARGS=--fast",
        "by CI, the fast subset; a full run (20 minutes) by hand",
    ),
    Runner(
        r"make sandbox-image",
        ".ci/run",
        "make --no-print-directory sandbox-image",
        "by CI: it needs root, the network and a Docker engine",
    ),
    Runner(
        r"make bench( BENCH_ARGS=.+)?",
        "tests/test_bench_smoke.py",
        '"-m", "bench.run_all", "--smoke"',
        "what `make bench BENCH_ARGS=--smoke` runs; full runs time things, by hand only",
    ),
)


# --- what the documents print ---------------------------------------------------------------


def code_blocks_and_prose(text: str) -> tuple[list[list[str]], str]:
    """The fenced blocks without an info string (shell, listings), and the text outside every
    block."""
    blocks: list[list[str]] = []
    prose: list[str] = []
    block: list[str] | None = None
    plain = False
    for line in text.splitlines():
        if line.startswith("```"):
            if block is None:
                block, plain = [], line.strip() == "```"
            else:
                if plain:
                    blocks.append(block)
                block = None
        elif block is not None:
            block.append(line)
        else:
            prose.append(line)
    return blocks, "\n".join(prose)


def logical_lines(block: list[str]) -> list[str]:
    """A block's lines with continuations joined: a trailing backslash, or an indented line
    after a command (a usage line wrapped, a JSON body)."""
    lines: list[str] = []
    for line in block:
        wrapped = bool(lines) and lines[-1].endswith(BACKSLASH)
        if lines and (wrapped or (line[:1].isspace() and line.strip())):
            lines[-1] = lines[-1].removesuffix(BACKSLASH).rstrip() + " " + line.strip()
        else:
            lines.append(line.strip())
    return lines


def without_comment(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line).strip()


def printed_commands(text: str) -> list[str]:
    blocks, prose = code_blocks_and_prose(text)
    found: list[str] = []
    for block in blocks:
        lines = [without_comment(line) for line in logical_lines(block)]
        if any(COMMAND.match(line) for line in lines):
            found += [line for line in lines if COMMAND.match(line) or ASSIGNMENT.match(line)]
    # A span of one word names a program (`python`, `docker`), one with braces a tool's
    # signature (`bash {command, timeout?}`); with arguments it is a command.
    for span in re.findall(r"`([^`]+)`", prose):
        words = " ".join(span.split())
        if COMMAND.match(words) and " " in words and "{" not in words:
            found.append(words)
    return found


def all_printed() -> dict[str, set[str]]:
    """Each printed command and the documents that print it."""
    printed: dict[str, set[str]] = {}
    for document in DOCUMENTS:
        for line in printed_commands(document.read_text()):
            printed.setdefault(line, set()).add(document.name)
    return printed


def runner_of(line: str) -> Runner | None:
    return next((r for r in RUNNERS if re.fullmatch(r.pattern, line)), None)


def test_every_printed_command_has_a_runner():
    unaccounted = {
        line: sorted(where) for line, where in all_printed().items() if runner_of(line) is None
    }

    assert unaccounted == {}, (
        "printed commands no test runs: run each in a test (and add it to RUNNERS), "
        "or print it differently"
    )


def test_every_runner_runs_what_it_says_and_is_still_needed():
    used = {runner_of(line) for line in all_printed()}
    for runner in RUNNERS:
        assert runner in used, f"nothing printed matches {runner.pattern!r}: remove the entry"
        source = (REPO_ROOT / runner.where).read_text()
        assert runner.evidence in source, f"{runner.where} no longer holds {runner.evidence!r}"


def test_the_extraction_finds_each_kind_of_command():
    printed = all_printed()

    assert {"make run", "make test", "make serve HOST=0.0.0.0 PORT=8000"} <= set(printed)
    assert any(line.startswith("curl -s -H") for line in printed)
    assert any(line.startswith("export SECRET_KEY=") for line in printed)
    assert sum(line.startswith("make worker") for line in printed) >= 3


# --- run here ---------------------------------------------------------------------------------


def printed_block(document: Path, first_word: str) -> list[str]:
    """The logical lines of the document's one shell block whose lines start with
    ``first_word``."""
    blocks, _ = code_blocks_and_prose(document.read_text())
    found = [
        logical_lines(block)
        for block in blocks
        if block and all(line.startswith(first_word) for line in logical_lines(block))
    ]
    assert len(found) == 1, f"{document.name}: one block of {first_word!r} lines expected"
    return found[0]


def test_the_production_exports_configure_a_site_the_deploy_check_passes(tmp_path):
    """Every host's settings, pasted: they parse (PostgreSQL, Redis, both buckets) and, with a
    real key in place of the placeholder, `check --deploy` has nothing to say."""
    exports = printed_block(OPERATORS, "export ")
    key = "k3Q9-a-production-like-secret-for-the-guides-exports-x7Vb2mZpR4tN8wYeLq"
    pasted = "\n".join(exports).replace("SECRET_KEY=...", f"SECRET_KEY={key}", 1)
    assert pasted != "\n".join(exports), "the exports no longer set SECRET_KEY=..."
    probe = (
        "from django.conf import settings as s; "
        "print(s.DATABASES['default']['HOST'], s.CELERY_BROKER_URL, s.SECUREBENCH_STORAGE)"
    )
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = newcomer_env(data_dir)

    done = subprocess.run(
        [
            "bash",
            "-c",
            f"{pasted}\n.venv/bin/python manage.py check --deploy --fail-level WARNING"
            f"\n.venv/bin/python manage.py shell -c {shlex.quote(probe)}",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SECONDS,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout
    assert "db.internal redis://redis.internal:6379/0 s3" in done.stdout


def printed_worker_lines() -> list[str]:
    return sorted(line for line in all_printed() if line.startswith("make worker"))


class Worker(CollectedProcess):
    """A printed line run in a shell of its own session, its output collected."""

    def __init__(self, line: str, env: dict[str, str]) -> None:
        super().__init__(["bash", "-c", line], env)

    def stop(self) -> None:
        """Ctrl-C as a person would (the Makefile's trap stops the worker warmly); whatever
        of the session is left after that is killed."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        for pid in self.session_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def heartbeats(data_dir: Path) -> list[tuple[str, str]]:
    """(host, queues) of the workers that wrote a heartbeat."""
    with contextlib.closing(sqlite3.connect(data_dir / "db.sqlite3", timeout=20)) as db:
        return db.execute("SELECT host, queues FROM operations_workerbeat").fetchall()


@pytest.mark.parametrize("line", printed_worker_lines())
def test_a_printed_make_worker_line_starts_a_worker(line: str, tmp_path: Path):
    data_dir = tmp_path / "data"
    manage(data_dir, "migrate", "--noinput")
    named = dict(re.findall(r"([A-Z_]+)=(\S+)", line))
    queues = named.get("WORKER_QUEUES", "text,sandbox,actions").split(",")
    worker = Worker(line, django_env(data_dir))
    try:
        worker.wait_for(r"celery@\S+ ready", SECONDS)
        deadline = time.monotonic() + SECONDS
        while not heartbeats(data_dir) and time.monotonic() < deadline:
            time.sleep(0.5)
        beats = heartbeats(data_dir)
    finally:
        worker.stop()

    output = worker.output()
    assert "Traceback" not in output, output[-4000:]
    assert len(beats) == 1, beats
    host, consumed = beats[0]
    assert sorted(consumed.split(",")) == sorted(queues), (consumed, line)
    if "SECUREBENCH_HOST_NAME" in named:
        assert host == named["SECUREBENCH_HOST_NAME"]
    beat_started = "beat: Starting" in output
    assert beat_started == (named.get("WORKER_BEAT", "1") == "1"), output[-4000:]


# --- the operators' guide and the settings ------------------------------------------------------

# Where the site reads its environment: settings, the apps, the sandboxes, gunicorn's config.
SOURCES = tuple(package for package in PACKAGES if package != "bench")
READ = re.compile(
    r"""(?:env_(?:str|bool|int|list)\(|environ\.get\(|getenv\(|_ENV\s*=\s*)\s*"([A-Z][A-Z0-9_]+)\""""
)
# Set by the site for the programs it runs in sandboxes, or the shell's own: not settings.
NOT_SETTINGS = {"PATH", "SECUREBENCH_WORKSPACE", "SECUREBENCH_EVALUATOR", "SECUREBENCH_GUARD_TESTS"}
# Read by boto3 (the S3 credentials), not by our code.
FOREIGN = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}


def settings_read() -> set[str]:
    files = [REPO_ROOT / "deploy" / "gunicorn.conf.py"]
    for package in SOURCES:
        files += [p for p in (REPO_ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    names = {name for path in files for name in READ.findall(path.read_text())}
    return names - NOT_SETTINGS


def make_variables() -> set[str]:
    """The variables the Makefile reads (`make worker WORKER_QUEUES=text`)."""
    return set(re.findall(r"\$\(([A-Z][A-Z0-9_]+)\)", (REPO_ROOT / "Makefile").read_text()))


def settings_the_guide_lists() -> set[str]:
    """The variables in the first column of the operators' guide's tables."""
    cells = re.findall(r"^\| ([^|]+) \|", OPERATORS.read_text(), re.M)
    return {name for cell in cells for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}


def test_the_operators_guide_lists_every_setting_the_site_reads():
    read = settings_read()

    assert len(read) > 80, sorted(read)  # the extraction still sees the settings
    assert sorted(read - settings_the_guide_lists()) == []


def test_every_setting_the_operators_guide_lists_is_read_by_the_site():
    listed = settings_the_guide_lists()

    assert sorted(listed - settings_read() - make_variables() - FOREIGN) == []
