"""The complete agent that docs/agents.md prints, run as printed (`python agent.py
BENCHMARK_URL`) against the live site, on a pack of each kind of tool it uses: answers
(multiple choice), code (run_python, submit_code) and a live workspace (bash). A guide whose
example no longer runs against the site is a broken promise to every newcomer.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.episodes.conftest import LiveSite

GUIDE = REPO_ROOT / "docs" / "agents.md"
MARKER = "A complete agent"
STATUSES = {"passed", "failed", "scoring"}


def documented_agent() -> str:
    """The first ```python block after the guide's MARKER."""
    text = GUIDE.read_text()
    found = re.search(r"```python\n(.*?)```", text[text.index(MARKER) :], re.S)
    assert found, f"{GUIDE.name}: no python block after {MARKER!r}"
    return found.group(1)


@pytest.mark.parametrize(
    ("pack", "tasks"), [("arithmetic-mc", 5), ("python-functions", 4), ("terminal-files", 3)]
)
def test_the_guides_complete_agent_runs_as_printed(
    live: LiveSite, tmp_path: Path, pack: str, tasks: int
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(documented_agent())
    opened = live.open_run(pack, agent="the guide's agent")

    done = subprocess.run(
        [sys.executable, str(agent), opened.url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # The benchmark's name first, then one "TASK STATUS REWARD" line per task (the workspace
    # tasks print their `ls -la` observations in between).
    verdict_lines = [line.split() for line in lines if line.startswith(f"{pack}/")]
    assert len(verdict_lines) == tasks, done.stdout
    assert {words[1] for words in verdict_lines} <= STATUSES, done.stdout
    evaluation = live.evaluation(opened.run_id)
    assert (evaluation["status"], evaluation["total"]) == ("done", tasks), evaluation
