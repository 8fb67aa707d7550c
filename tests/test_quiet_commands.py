"""Commands and server starts say what they did, not which libraries loaded: no
"AXES: BEGIN …" banner (issue 17), while lockouts are still logged. And the sign-in page shows
`make run` as code, not as Markdown backticks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import REPO_ROOT


def test_a_management_command_prints_no_library_banner(tmp_path: Path) -> None:
    env = {**os.environ, "SECUREBENCH_DATA_DIR": str(tmp_path), "DEBUG": "1"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "System check identified no issues" in done.stdout
    assert "AXES" not in done.stdout + done.stderr


@pytest.mark.django_db
def test_the_sign_in_page_shows_make_run_as_code() -> None:
    page = Client().get(reverse("login")).content.decode()
    assert "<code>make run</code>" in page and "`make run`" not in page
