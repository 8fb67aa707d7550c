"""Our trusted runner in a verification's sandbox, as repo_patch and terminal_task run it:
where its scripts are mounted, the one nonce'd frame it reports on stdout, and what a
verdict keeps of the run (the limit it hit, its scrubbed logs, the sandbox's notes).

The live workspaces' helper (verifiers.live) takes its nonce from here too.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from verifiers.redaction import output_secrets
from verifiers.sandbox.base import Mount, SandboxResult
from verifiers.sandbox.standins import Standins
from verifiers.sandbox.trusted_files import staged
from verifiers.task import TaskLanes
from verifiers.verdict import Reason, cap_text, scrub

RUNNER_DIR = "/opt/securebench/runner"
FRAME_PREFIX = b"SECUREBENCH-FRAME "
_RUNNER_FILES = ("repo_runner.py", "terminal_runner.py")


def runner_mounts() -> tuple[Mount, ...]:
    # Staged copies: the checkout itself may be unreachable for the sandbox uid.
    here = Path(__file__).resolve().parent / "families"
    return tuple(Mount(staged(here / name), f"{RUNNER_DIR}/{name}") for name in _RUNNER_FILES)


def new_nonce() -> str:
    return secrets.token_hex(16)


def read_frame(stdout: bytes, nonce: str) -> tuple[dict[str, Any] | None, str | None]:
    """The runner's one frame, or why there is none (stdout must hold nothing else)."""
    lines = [line for line in stdout.split(b"\n") if line.strip()]
    if not lines:
        return None, "missing"
    if len(lines) != 1 or not lines[0].startswith(FRAME_PREFIX):
        return None, "forged"
    try:
        frame = json.loads(lines[0][len(FRAME_PREFIX) :].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "forged"
    if not isinstance(frame, dict) or not hmac.compare_digest(str(frame.get("nonce", "")), nonce):
        return None, "forged"
    return frame, None


def limit_reason(result: SandboxResult) -> str | None:
    """The failure reason of a run that hit a sandbox limit (None if none was hit)."""
    if result.timed_out:
        return Reason.TIMEOUT
    if result.memory_exceeded:
        return Reason.MEMORY_LIMIT
    if result.output_exceeded:
        return Reason.OUTPUT_LIMIT
    if result.process_limit:
        return Reason.PROCESS_LIMIT
    return None


MIN_EVAL_SECRET_LENGTH = 12


def log_secrets(task: TaskLanes) -> list[str]:
    """What to scrub from stored logs: every hidden string, and the longer evaluation-input
    strings (short ones such as "pytest" or "tests" would mangle every log line; the
    verifier sandbox, where these logs come from, may see evaluation inputs anyway), less
    the strings the agent was shown too (verifiers.redaction)."""
    return output_secrets(task, min_input_length=MIN_EVAL_SECRET_LENGTH)


def sandbox_fields(result: SandboxResult, secrets_: Iterable[str] = ()) -> dict[str, Any]:
    """Verdict keyword arguments describing the run (capped, scrubbed output)."""
    secret_list = list(secrets_)
    return {
        "stdout": scrub(cap_text(result.stdout.decode("utf-8", "replace"), 64_000), secret_list),
        "stderr": scrub(cap_text(result.stderr.decode("utf-8", "replace"), 64_000), secret_list),
        "duration_seconds": result.duration_seconds,
        "sandbox_backend": result.backend,
        "sandbox_image": result.image,
    }


STANDINS_DETAIL = "sandbox_standins"  # shown on the result page beside the sandbox backend


def notes_details(result: SandboxResult, standins: Standins) -> dict[str, Any]:
    """The run's notes for a verdict's details: the sandbox's own, then which host tools
    stood in for the task's image (bwrap), also under their own key for the result page.

    Stand-in notes come from trusted code only (the public image name, host tool versions)."""
    details: dict[str, Any] = {"notes": [*result.notes, *standins.notes]}
    if standins.notes:
        details[STANDINS_DETAIL] = list(standins.notes)
    return details
