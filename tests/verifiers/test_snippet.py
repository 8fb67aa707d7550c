"""run_python snippets (verifiers.snippet): what an agent sees when it runs its own code.

Every run goes through a real sandbox (the ``sandbox`` fixture: bwrap and Docker); refusals
are checked before any sandbox starts. The attacks are in tests/security/test_snippet_isolation.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import sandbox_or_skip
from verifiers.sandbox import Sandbox, SandboxUnavailable
from verifiers.snippet import (
    MAX_CODE_BYTES,
    MAX_STDIN_BYTES,
    OUTPUT_CAP_BYTES,
    SnippetOutcome,
    SnippetRejected,
    capped_text,
    run_snippet,
)

TRUNCATED = f"[… output truncated at {OUTPUT_CAP_BYTES} bytes"


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A private system temp dir for one test: run_snippet's folders must be gone from it
    afterwards, whatever the outcome. Traversable by sandbox uids (0711)."""
    private = Path(tempfile.mkdtemp(prefix="sb-snippet-test-"))
    private.chmod(0o711)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(private))
        try:
            yield private
            assert os.listdir(private) == [], "run_snippet left its scratch folder behind"
        finally:
            shutil.rmtree(private, ignore_errors=True)


def run(sandbox: Sandbox, code: str, stdin: str = "") -> SnippetOutcome:
    return run_snippet(sandbox, textwrap.dedent(code), stdin)


# --- what a snippet prints -------------------------------------------------------------------


def test_printed_lines_come_back_on_stdout(sandbox: Sandbox, scratch: Path) -> None:
    outcome = run(sandbox, "print('hello')\nprint(6 * 7)\n")

    assert (outcome.stdout, outcome.stderr) == ("hello\n42\n", "")
    assert (outcome.exit_code, outcome.limit) == (0, None)
    assert outcome.backend == sandbox.name
    assert outcome.duration_seconds > 0


def test_stdin_reaches_the_snippet_unchanged(sandbox: Sandbox, scratch: Path) -> None:
    data = "3 4\nsecond line ünïcode\n\x00 and a NUL\n"
    code = """
    import sys
    first = input().split()
    print(int(first[0]) + int(first[1]))
    sys.stdout.write(sys.stdin.read())
    """
    outcome = run(sandbox, code, data)

    assert outcome.stdout == "7\nsecond line ünïcode\n\x00 and a NUL\n"
    assert (outcome.exit_code, outcome.limit) == (0, None)


def test_without_stdin_a_read_sees_end_of_file_at_once(sandbox: Sandbox, scratch: Path) -> None:
    outcome = run(sandbox, "import sys\nprint(repr(sys.stdin.read()))\ninput()\n")

    assert outcome.stdout == "''\n"
    assert "EOFError" in outcome.stderr
    assert (outcome.exit_code, outcome.limit) == (1, None)


def test_the_exit_code_is_the_snippets_own(sandbox: Sandbox, scratch: Path) -> None:
    outcome = run(sandbox, "import sys\nprint('before')\nsys.exit(3)\nprint('after')\n")

    assert outcome.stdout == "before\n"
    assert (outcome.exit_code, outcome.limit) == (3, None)


def test_an_uncaught_exception_shows_its_traceback_on_stderr(
    sandbox: Sandbox, scratch: Path
) -> None:
    code = """
    def divide(a, b):
        return a / b

    print("start")
    divide(1, 0)
    """
    outcome = run(sandbox, code)

    assert outcome.stdout == "start\n"
    assert outcome.stderr.startswith("Traceback (most recent call last):\n")
    assert "line 6, in <module>" in outcome.stderr
    assert "line 3, in divide" in outcome.stderr
    assert outcome.stderr.endswith("ZeroDivisionError: division by zero\n")
    assert (outcome.exit_code, outcome.limit) == (1, None)


def test_a_syntax_error_is_reported_like_python_does(sandbox: Sandbox, scratch: Path) -> None:
    outcome = run(sandbox, "print('ok')\ndef broken(:\n")

    assert outcome.stdout == ""
    assert "SyntaxError" in outcome.stderr
    assert (outcome.exit_code, outcome.limit) == (1, None)


def test_unicode_round_trips_and_invalid_bytes_are_replaced(
    sandbox: Sandbox, scratch: Path
) -> None:
    code = """
    import sys
    print("héllo wörld — 世界 🎉")
    sys.stdout.flush()
    sys.stdout.buffer.write(b"bad \\xff\\xfe bytes\\n")
    print("ошибка", file=sys.stderr)
    """
    outcome = run(sandbox, code)

    assert outcome.stdout == "héllo wörld — 世界 🎉\nbad \ufffd\ufffd bytes\n"
    assert outcome.stderr == "ошибка\n"
    assert outcome.exit_code == 0


def test_the_snippet_may_write_files_in_its_working_folder(sandbox: Sandbox, scratch: Path) -> None:
    code = """
    import os
    with open("notes.txt", "w") as fh:
        fh.write("kept for this run")
    print(open("notes.txt").read(), os.getcwd() == os.environ["HOME"])
    """
    outcome = run(sandbox, code)

    assert outcome.stdout == "kept for this run True\n"
    assert outcome.exit_code == 0


# --- output caps -----------------------------------------------------------------------------


def test_long_output_keeps_its_start_and_end_around_an_explicit_marker(
    sandbox: Sandbox, scratch: Path
) -> None:
    # Twice the cap, then a normal exit: truncated, but no limit ended the run.
    code = f"""
    import sys
    print("FIRST")
    for i in range({OUTPUT_CAP_BYTES * 2 // 100}):
        print(str(i).rjust(99, "."))
    print("LAST")
    print("on stderr too", file=sys.stderr)
    """
    outcome = run(sandbox, code)

    assert (outcome.exit_code, outcome.limit) == (0, None)
    assert outcome.stdout.startswith("FIRST\n")
    assert outcome.stdout.endswith("LAST\n")
    assert outcome.stdout.count(TRUNCATED) == 1
    assert "omitted by the sandbox" not in outcome.stdout  # one marker, ours
    assert len(outcome.stdout.encode()) <= OUTPUT_CAP_BYTES + 100
    assert outcome.stderr == "on stderr too\n"


def test_the_cap_cuts_on_character_boundaries() -> None:
    cap = 10
    data = ("é" * 20).encode()  # two bytes each: no cut may split one

    text = capped_text(data, cap)

    head, tail = text.split("\n[… output truncated at 10 bytes", 1)
    assert head == "éé"  # 5 bytes of room: two whole characters
    assert tail.endswith("]\n" + "é" * 2)
    assert "\ufffd" not in text
    assert capped_text("ok é".encode(), cap) == "ok é"  # at or under the cap: untouched


# --- refusals, before any sandbox starts ------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "stdin", "message"),
    [
        ("x" * (MAX_CODE_BYTES + 1), "", f"code is {MAX_CODE_BYTES + 1} bytes"),
        # Bytes, not characters: under the cap in characters, over it in UTF-8.
        ("é" * (MAX_CODE_BYTES // 2 + 1), "", f"code is {MAX_CODE_BYTES + 2} bytes"),
        ("print(1)", "y" * (MAX_STDIN_BYTES + 1), f"stdin is {MAX_STDIN_BYTES + 1} bytes"),
        ("print(1)\x00", "", "code contains NUL bytes"),
        ("  \n\t", "", "code is empty"),
        ("print('\ud800')", "", "code is not valid Unicode text"),
        ("print(1)", "\udfff", "stdin is not valid Unicode text"),
        (b"print(1)", "", "code must be a string, not bytes"),
        ("print(1)", None, "stdin must be a string, not NoneType"),
    ],
    ids=[
        "code-too-big",
        "code-too-big-in-bytes",
        "stdin-too-big",
        "nul",
        "empty",
        "surrogate-code",
        "surrogate-stdin",
        "bytes-code",
        "none-stdin",
    ],
)
def test_oversized_or_malformed_input_is_refused_with_a_clear_message(
    code: object, stdin: object, message: str, scratch: Path
) -> None:
    # No sandbox is needed to refuse: a backend that cannot run anything proves none ran.
    with pytest.raises(SnippetRejected, match=message.replace("(", r"\(")) as refused:
        run_snippet(NoSandbox(), code, stdin)  # type: ignore[arg-type]

    assert isinstance(refused.value, ValueError)


def test_code_and_stdin_at_exactly_the_caps_are_run(sandbox: Sandbox, scratch: Path) -> None:
    line = "import sys; print(len(sys.stdin.read()))\n"
    code = line + "#" * (MAX_CODE_BYTES - len(line) - 1) + "\n"
    assert len(code.encode()) == MAX_CODE_BYTES

    outcome = run_snippet(sandbox, code, "s" * MAX_STDIN_BYTES)

    assert (outcome.stdout, outcome.exit_code) == (f"{MAX_STDIN_BYTES}\n", 0)


class NoSandbox(Sandbox):
    name = "none"

    def run(self, spec):  # type: ignore[no-untyped-def]
        raise AssertionError("a refused snippet reached the sandbox")

    def start(self, spec):  # type: ignore[no-untyped-def]
        raise AssertionError("a refused snippet reached the sandbox")


# --- a backend that cannot run ----------------------------------------------------------------


def test_an_unusable_backend_raises_sandbox_unavailable_for_the_caller(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docker = sandbox_or_skip("docker")
    # The default image names one this engine does not have (nothing is ever pulled).
    monkeypatch.setenv("SECUREBENCH_DEFAULT_IMAGE", "securebench-missing/none:0")
    with pytest.raises(SandboxUnavailable, match="not available locally"):
        run_snippet(docker, "print('never runs')")
