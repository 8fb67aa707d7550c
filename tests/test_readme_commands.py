"""The `manage.py` command lines of the README and its guides (docs/) work as printed in a
fresh clone once `make run` has set the site up, from a shell that exports neither DEBUG nor
SECRET_KEY, and so does the agents' guide's curl session against that site; and the key
generated for that never passes for production: with DATABASE_URL set the site refuses to start
without SECRET_KEY, and `check --deploy` flags the generated key (securebench.W002).

Every test here starts its own processes on a data folder of its own (embedded defaults), so
it runs once, in the embedded pass (conftest marks it database_independent).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.common import manage
from bench.site import ADMIN_USERNAME, Site
from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
# The README and the guides it links to: what a newcomer reads and runs.
DOCUMENTS = (README, *sorted((REPO_ROOT / "docs").glob("*.md")))
PREFIX = ".venv/bin/python manage.py"
# Commands that serve until stopped or ask a person something: listed here with the reason
# instead of being run (none is printed today; a README that adds one gets it reported).
SKIPPED_BY_DESIGN = {
    "runserver": "serves until stopped (`make run` starts it; the browser journeys use it)",
    "createsuperuser": "asks for a password (`setup_site` creates the first admin)",
    "changepassword": "asks for a password",
    "shell": "interactive",
    "dbshell": "interactive",
}
# Upper-case words the README prints as literal values, not placeholders.
LITERAL_WORDS = frozenset({"WARNING"})
# Named by issue 11: if the extraction stops finding these, it is broken, not the README.
EXPECTED_SUBCOMMANDS = frozenset({"import_pack", "submit_run", "drf_create_token", "check"})
# What the operators' guide says `check --deploy` needs (HTTPS and sign-in): SECRET_KEY and
# ALLOWED_HOSTS, nothing else.
PRODUCTION_KEY = "k3Q9-production-like-secret-for-the-readme-commands-only-x7Vb2mZpR4tN8wYe"
PRODUCTION_ENV = {"SECRET_KEY": PRODUCTION_KEY, "ALLOWED_HOSTS": "bench.example.org"}
ENV_THE_README_NAMES = {"check": PRODUCTION_ENV}
# Set by the test run (pyproject.toml, CI) or by a developer's shell, never by a newcomer who
# just ran `make run` in another terminal.
NOT_IN_A_NEWCOMERS_SHELL = (
    "DEBUG",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "DJANGO_SETTINGS_MODULE",
    "ALLOWED_HOSTS",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
)
# A text pack `setup_site` imports: its evaluations need a worker but no sandbox.
PACK_ID = "arithmetic-mc"
COMMAND_SECONDS = 600


# --- reading the README --------------------------------------------------------------------


def readme_command_lines(text: str) -> list[str]:
    """Every command line starting with PREFIX, in README order: lines of fenced code blocks
    (with their indented continuation lines) and inline code spans of the prose."""
    code_lines, prose = _split_code_and_prose(text)
    found = _code_block_commands(code_lines)
    # An inline span may wrap across lines of the Markdown source.
    for span in re.finditer(r"`([^`]+)`", prose):
        words = " ".join(span.group(1).split())
        if words.startswith(PREFIX):
            found.append((span.start(), words))
    return [line for _, line in sorted(found)]


def _split_code_and_prose(text: str) -> tuple[list[tuple[int, str] | None], str]:
    """The lines inside fenced code blocks with their offsets (None where a block ends), and
    the text with those blocks blanked out, so that offsets in it stay the README's."""
    code_lines: list[tuple[int, str] | None] = []
    prose: list[str] = []
    in_code = False
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            in_code = not in_code
            code_lines.append(None)
            prose.append(" " * len(line.rstrip("\n")) + "\n")
        elif in_code:
            code_lines.append((offset, line.rstrip("\n")))
            prose.append(" " * len(line.rstrip("\n")) + "\n")
        else:
            prose.append(line)
        offset += len(line)
    return code_lines, "".join(prose)


def _code_block_commands(code_lines: list[tuple[int, str] | None]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    current: tuple[int, str] | None = None
    for entry in [*code_lines, None]:
        line = entry[1] if entry else ""
        continues = line[:1].isspace() and line.strip()[:1] in "[(-"
        if current and entry and continues:
            current = (current[0], f"{current[1]} {line.strip()}")
            continue
        if current:
            found.append(current)
        current = (entry[0], line.strip()) if entry and line.startswith(PREFIX) else None
    return found


# A usage line: words, optional parts in [...], alternatives in (a | b).
Node = tuple[str, object]


def parse_usage(line: str) -> list[Node]:
    tokens = re.findall(r"[\[\]()|]|[^\s\[\]()|]+", line)
    nodes, end = _parse_sequence(tokens, 0)
    if end != len(tokens):
        raise ValueError(f"unbalanced usage line: {line!r}")
    return nodes


def _parse_sequence(tokens: list[str], at: int) -> tuple[list[Node], int]:
    nodes: list[Node] = []
    while at < len(tokens) and tokens[at] not in ("]", ")", "|"):
        token = tokens[at]
        if token in ("[", "("):
            alternatives, at = _parse_alternatives(tokens, at + 1)
            closing = "]" if token == "[" else ")"
            if at >= len(tokens) or tokens[at] != closing:
                raise ValueError(f"{token!r} without {closing!r} in {' '.join(tokens)!r}")
            nodes.append(("optional" if token == "[" else "choice", alternatives))
            at += 1
        else:
            nodes.append(("word", token))
            at += 1
    return nodes, at


def _parse_alternatives(tokens: list[str], at: int) -> tuple[list[list[Node]], int]:
    alternatives = []
    while True:
        sequence, at = _parse_sequence(tokens, at)
        alternatives.append(sequence)
        if at < len(tokens) and tokens[at] == "|":
            at += 1
            continue
        return alternatives, at


def _widest_choice(nodes: list[Node]) -> int:
    widest = 1
    for kind, value in nodes:
        if kind != "word":
            alternatives = value
            widest = max(widest, len(alternatives), *(_widest_choice(a) for a in alternatives))
    return widest


def _expand(nodes: list[Node], *, with_optional: bool, choice: int) -> list[str]:
    words: list[str] = []
    for kind, value in nodes:
        if kind == "word":
            words.append(value)
        elif kind == "choice" or with_optional:
            alternatives = value
            chosen = alternatives[choice % len(alternatives)]
            words += _expand(chosen, with_optional=with_optional, choice=choice)
    return words


def variants(line: str) -> list[list[str]]:
    """The concrete command lines a usage line stands for: every optional part given, then
    none, each with every alternative of its choices."""
    nodes = parse_usage(line)
    found: list[list[str]] = []
    for with_optional in (True, False):
        for choice in range(_widest_choice(nodes)):
            words = _expand(nodes, with_optional=with_optional, choice=choice)
            if words not in found:
                found.append(words)
    return found


@dataclass(frozen=True)
class ReadmeCommand:
    printed: str  # the usage line as the README prints it
    words: tuple[str, ...]  # one concrete variant, placeholders still in

    @property
    def subcommand(self) -> str:
        return self.words[len(PREFIX.split())]


def readme_commands() -> list[ReadmeCommand]:
    commands: list[ReadmeCommand] = []
    lines = [line for doc in DOCUMENTS for line in readme_command_lines(doc.read_text())]
    for line in lines:
        for words in variants(line):
            command = ReadmeCommand(printed=line, words=tuple(words))
            if command not in commands:
                commands.append(command)
    return commands


def _param(command: ReadmeCommand):
    marks = ()
    if command.subcommand in SKIPPED_BY_DESIGN:
        reason = f"skipped by design: {command.subcommand} {SKIPPED_BY_DESIGN[command.subcommand]}"
        marks = (pytest.mark.skip(reason=reason),)
    return pytest.param(command, id=" ".join(command.words[2:]), marks=marks)


# --- a newcomer's site and shell -----------------------------------------------------------


def newcomer_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The shell of someone who ran `make run` in another terminal: nothing exported but
    where the data folder is (the README's default `var/` would be the checkout's own)."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_IN_A_NEWCOMERS_SHELL}
    return env | {"SECUREBENCH_DATA_DIR": str(data_dir), **extra}


def run_printed(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The line as a person pastes it into a shell at the repository root."""
    return subprocess.run(
        ["bash", "-c", line],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
        check=False,
    )


@dataclass(frozen=True)
class StartedSite:
    data_dir: Path
    url: str
    placeholders: dict[str, str]
    bundle: Path  # a bundle file for the site's example pack


@pytest.fixture(scope="module")
def started_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedSite]:
    """`make run` (web server and worker) on a fresh data folder, and values for the README's
    placeholders that name things it set up."""
    root = tmp_path_factory.mktemp("readme-site")
    bundle = root / "candidates.jsonl"
    bundle.write_text(
        json.dumps({"run": {"agent_name": "readme-agent"}})
        + "\n"
        + json.dumps(
            {
                "task_id": f"{PACK_ID}/product",
                "candidate": {"kind": "text", "text": "Answer: B"},
                "usage": {"input_tokens": 120, "output_tokens": 4},
            }
        )
        + "\n"
    )
    placeholders = {
        "ID": PACK_ID,
        "N": "1",
        "PATH": f"examples/{PACK_ID}",
        "FILE": str(bundle),
        "USERNAME": ADMIN_USERNAME,
        "NAME": "readme-agent",
        "V": "0.1",
        "M": "model-1",
        "TEXT": "run from the README",
        "S": str(COMMAND_SECONDS // 2),
        "URL": "http://127.0.0.1:8000",
        "EVALUATOR": "securebench@1",
        # An evaluation folder that scores an example pack `make run` imported.
        "FOLDER": "examples/evaluations/w2s-exact-match",
    }
    with Site(data_dir=root / "data", env=NEWCOMER_DEFAULTS) as site:
        # A run of the site's own to re-score, whatever order the README prints things in.
        placeholders["RUN"] = str(first_oracle_run(site.data_dir))
        yield StartedSite(
            data_dir=site.data_dir, url=site.url, placeholders=placeholders, bundle=bundle
        )


# `make run` as a newcomer gets it: the examples' health checks run on its worker and publish
# them (the test and benchmark sites elsewhere turn both off).
NEWCOMER_DEFAULTS = {"SECUREBENCH_HEALTH_ON_UPLOAD": "1", "SECUREBENCH_PUBLISH_GATE": "1"}
PUBLISH_WAIT_SECONDS = 240


def first_oracle_run(data_dir: Path) -> int:
    """An oracle run of the example once its health checks have published it; until then
    submit_run refuses the draft, as it does for a newcomer who types it too early."""
    deadline = time.monotonic() + PUBLISH_WAIT_SECONDS
    while True:
        done = manage(data_dir, "submit_run", "--pack", PACK_ID, "--oracle", "--json", check=False)
        if done.returncode == 0:
            return int(json.loads(done.stdout)["run"])
        assert "is a draft" in done.stderr and time.monotonic() < deadline, done.stderr
        time.sleep(1)


def wait_until_published(data_dir: Path, pack_id: str) -> None:
    """Until `make run`'s health checks have published version 1 of the example (its runs
    are refused while it is a draft)."""
    probe = (
        "from packs.models import ContractVersion as V; "
        f"print(V.objects.get(pack__pack_id={pack_id!r}, version=1).state)"
    )
    deadline = time.monotonic() + PUBLISH_WAIT_SECONDS
    # The last line: the shell may print what it imported first.
    while (state := manage(data_dir, "shell", "-c", probe).stdout.split()[-1]) != "published":
        assert time.monotonic() < deadline, f"{pack_id} is still {state}"
        time.sleep(1)


def substituted(command: ReadmeCommand, placeholders: dict[str, str]) -> str:
    words = []
    for word in command.words:
        if word in placeholders:
            words.append(shlex.quote(placeholders[word]))
        elif re.fullmatch(r"[A-Z][A-Z_]*", word) and word not in LITERAL_WORDS:
            raise AssertionError(
                f"{command.printed!r} has a placeholder {word!r} this test has no value for: "
                "add one to the started_site fixture (or to LITERAL_WORDS)"
            )
        else:
            words.append(word)
    return " ".join(words)


# --- the README's commands, as printed -----------------------------------------------------


def test_the_readme_prints_the_commands_issue_11_names_with_the_venv_python():
    commands = readme_commands()

    assert {command.subcommand for command in commands} >= EXPECTED_SUBCOMMANDS
    # A bare `python manage.py` is whatever python is on the PATH, usually without Django.
    for doc in DOCUMENTS:
        bare = re.findall(r"(?<![/\w])python3? manage\.py", doc.read_text())
        assert bare == [], (
            f"{doc.name} prints `python manage.py`; print `.venv/bin/python manage.py`"
        )


@pytest.mark.parametrize("command", [_param(command) for command in readme_commands()])
def test_a_readme_command_works_as_printed_after_make_run(command, started_site):
    line = substituted(command, started_site.placeholders)
    env = newcomer_env(started_site.data_dir, **ENV_THE_README_NAMES.get(command.subcommand, {}))

    done = run_printed(line, env)

    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{line}\n{output[-4000:]}"
    assert "Traceback" not in output, f"{line}\n{output[-4000:]}"


# --- the agents' guide's curl session -------------------------------------------------------

CURL_GUIDE = REPO_ROOT / "docs" / "agents.md"
# The address the guide's session talks to: `make run`'s.
PRINTED_SITE = "http://127.0.0.1:8000"
# A line of the session that keeps the id of the answer above it (`RUN=7  # the "id" ...`).
KEPT_ID = re.compile(r"([A-Z]+)=\d+(?:\s|$)")


def curl_session() -> list[str]:
    """The lines of the guide's shell block that runs curl, as printed."""
    code_lines, _ = _split_code_and_prose(CURL_GUIDE.read_text())
    blocks: list[list[str]] = [[]]
    for entry in code_lines:
        if entry is None:
            blocks.append([])
        else:
            blocks[-1].append(entry[1])
    sessions = [block for block in blocks if any(line.startswith("curl ") for line in block)]
    assert len(sessions) == 1, f"{CURL_GUIDE.name}: one curl session expected"
    return sessions[0]


def json_answers(output: str) -> list[dict]:
    """The JSON documents curl printed one after the other."""
    decoder = json.JSONDecoder()
    answers, at = [], 0
    while at < len(output):
        if output[at].isspace():
            at += 1
            continue
        answer, at = decoder.raw_decode(output, at)
        answers.append(answer)
    return answers


def test_the_guides_curl_session_works_as_printed(started_site, tmp_path):
    """Run as a person pastes it, in parts: up to a run's creation, then from the line that
    keeps the run's id (`RUN=7`, `ART=9`) on, with the id the site answered in place of the
    example's (and the first line's variables, and the ids kept before, set again)."""
    token = re.search(
        r"token (\w+)", manage(started_site.data_dir, "drf_create_token", ADMIN_USERNAME).stdout
    )
    assert token, "drf_create_token printed no token"
    lines = [line.replace(PRINTED_SITE, started_site.url) for line in curl_session()]
    (tmp_path / "candidates.jsonl").write_text(started_site.bundle.read_text())
    artifact = {
        "predictions.jsonl": b'{"id": "a1", "answer": "42"}\n',
        "run_manifest.json": b'{"run_id": "r1", "dataset_version": "w2s-math-mini@2026-04-10", '
        b'"schema_version": "1"}',
    }
    for name, content in artifact.items():
        (tmp_path / name).write_bytes(content)
    wait_until_published(started_site.data_dir, "w2s-predictions")
    env = newcomer_env(started_site.data_dir, TOKEN=token.group(1))

    def paste(part: list[str]) -> list[dict]:
        done = subprocess.run(
            ["bash", "-c", "\n".join(part)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json_answers(done.stdout)

    segments: list[list[str]] = [[]]
    kept_names: list[str] = []
    for line in lines:
        if kept := KEPT_ID.match(line):
            kept_names.append(kept.group(1))
            segments.append([])
        else:
            segments[-1].append(line)
    assert kept_names == ["RUN", "ART"], kept_names
    answers = paste(segments[0])
    kept_ids: list[str] = []
    for name, segment in zip(kept_names, segments[1:], strict=True):
        assert "id" in answers[-1], answers[-1]
        kept_ids.append(f"{name}={answers[-1]['id']}")
        answers += paste([lines[0], *kept_ids, *segment])
    tasks, created, added, submitted, progress, results, bundled, artifact_run, uploaded = answers
    run = created["id"]

    assert tasks["count"] >= 1 and tasks["results"], tasks
    assert (created["pack"], created["agent_name"]) == (PACK_ID, "my-agent"), created
    assert added == {"added": 1, "candidate_count": 1}, added
    assert (submitted["run"], submitted["evaluation"]) == (run, 1), submitted
    assert {"status", "done", "total", "counts"} <= set(progress), progress
    assert "results" in results, results
    assert bundled["run"]["id"] != run and bundled["evaluation"]["evaluation"] == 1, bundled
    assert artifact_run["pack"] == "w2s-predictions", artifact_run
    assert uploaded["created"] is True and uploaded["file_count"] == 2, uploaded
    assert uploaded["files"] == {
        name: {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "mode": 0o644}
        for name, content in artifact.items()
    }


# --- the generated key and production ------------------------------------------------------


def test_production_without_a_secret_key_refuses_to_start(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = newcomer_env(data_dir, DATABASE_URL=f"sqlite:///{tmp_path / 'production.sqlite3'}")

    done = run_printed(f"{PREFIX} check", env)

    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY (or SECRET_KEY_FILE) must be set" in done.stderr
    assert not (data_dir / "secret_key").exists()


def test_the_deploy_check_flags_the_generated_key(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = newcomer_env(data_dir, ALLOWED_HOSTS=PRODUCTION_ENV["ALLOWED_HOSTS"])

    done = run_printed(f"{PREFIX} check --deploy --fail-level WARNING", env)

    assert done.returncode != 0
    assert "(securebench.W002)" in done.stderr, done.stdout + done.stderr
    assert "Set SECRET_KEY (or SECRET_KEY_FILE) in production" in done.stderr
    key_file = data_dir / "secret_key"
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_the_deploy_check_is_clean_with_the_production_settings_the_readme_names(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    # A generated key left in the data folder by earlier local use is not taken over.
    assert run_printed(f"{PREFIX} check", newcomer_env(data_dir)).returncode == 0
    assert (data_dir / "secret_key").exists()
    database = f"sqlite:///{tmp_path / 'production.sqlite3'}"
    for env in (
        newcomer_env(data_dir, **PRODUCTION_ENV),
        newcomer_env(data_dir, **PRODUCTION_ENV, DATABASE_URL=database),
    ):
        done = run_printed(f"{PREFIX} check --deploy --fail-level WARNING", env)

        assert done.returncode == 0, done.stdout + done.stderr
        assert "no issues" in done.stdout
        assert "securebench.W002" not in done.stdout + done.stderr
