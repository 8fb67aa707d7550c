"""Host tools standing in for a pack's Python image in the bwrap sandbox.

Packs say `python`, `pytest`, `git`, `patch` because their image has them; the bwrap sandbox
runs the host's /usr, where a Debian host has no `python` at all. These tests run what a
pack author writes, in real sandboxes, and read the result page a user reads.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from tests.conftest import make_user
from tests.verifiers import test_repo_patch as repo_tests
from tests.verifiers import test_terminal_task as terminal_tests
from verifiers.families import terminal_task
from verifiers.sandbox import Sandbox, SandboxSpec
from verifiers.sandbox.standins import (
    PYLIB_DIR,
    STANDIN_BIN,
    bin_scripts,
    image_standins,
    standin_bin,
)
from verifiers.sandbox.trusted_files import TRUSTED_DIR_ENV
from verifiers.task import Candidate

sandbox = repo_tests.sandbox  # the backend-parametrized fixture (bwrap and Docker)
PYTHON_CHECK = terminal_tests.PYTHON_CHECK


def bwrap(monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return repo_tests.open_backend("bwrap", monkeypatch)


def test_docker_runs_the_image_itself_so_nothing_stands_in() -> None:
    standins = image_standins("docker", "python:3.12-slim")
    assert (standins.mounts, standins.env, standins.notes) == ((), {}, ())


def test_on_bwrap_the_note_names_the_image_and_each_host_tool() -> None:
    (note,) = image_standins("bwrap", "python:3.12-slim").notes
    assert note.startswith("image python:3.12-slim not used (bwrap): python → host Python 3.")
    assert "pytest " in note and note.endswith(" stood in")
    for tool in ("git", "patch"):
        assert f"{tool} " in note  # its version, or "<tool> absent" on a host without it
    (unnamed,) = image_standins("bwrap", None).notes
    assert unnamed.startswith("no image named (bwrap): python → host Python")


def test_the_image_commands_run_inside_bwrap_and_their_folder_is_read_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    standins = image_standins("bwrap", "python:3.12-slim")
    script = (
        "python -c 'import sys; print(sys.executable)'\n"
        "python -m pytest --version\n"
        "python3 -m pytest --version\n"
        "pytest --version\n"
        "py.test --version\n"
        "env -u PYTHONPATH python -m pytest --version\n"  # a caller that cleared it
        "git --version\n"
        "patch --version | head -n 1\n"
        f"echo LISTING; ls {STANDIN_BIN}; echo END\n"
        f"touch {STANDIN_BIN}/planted && echo WRITABLE\n"
        f"touch {PYLIB_DIR}/pytest/planted.py && echo WRITABLE\n"
        "exit 0\n"
    )
    spec = SandboxSpec(command=["sh", "-c", script], env=standins.env, mounts=standins.mounts)
    result = bwrap(monkeypatch).run(spec)
    out = result.stdout.decode()
    assert result.exit_code == 0, (out, result.stderr)
    assert out.startswith("/usr/bin/python3\n")
    assert out.count("pytest ") == 5, out
    assert "git version" in out and "GNU patch" in out
    # Only our entry points are in the folder: nothing of any task, nothing writable.
    listed = out.split("LISTING\n")[1].split("END\n")[0].split()
    assert sorted(listed) == sorted(bin_scripts())
    assert "WRITABLE" not in out


def test_the_commands_folder_comes_back_after_a_tmp_cleaner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "trusted"
    monkeypatch.setenv(TRUSTED_DIR_ENV, str(root))
    folder = standin_bin()
    assert sorted(os.listdir(folder)) == sorted(bin_scripts())
    assert all(os.access(folder / name, os.X_OK) for name in bin_scripts())
    assert all(not (folder / name).stat().st_mode & 0o222 for name in bin_scripts())
    for path in (folder.parent, folder):
        path.chmod(0o700)
    shutil.rmtree(folder.parent)  # what a /tmp cleaner does
    assert standin_bin() == folder and (folder / "python").is_file()


# --- the result page -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_result_page_says_which_host_tools_stood_in_for_the_image(
    client, make_pack, sandbox: Sandbox
) -> None:
    from runs.models import TaskResult  # noqa: PLC0415 - Django is set up by then
    from tests.runs.pages.support import (  # noqa: PLC0415
        FAILED,
        PASSED,
        import_version,
        make_evaluation,
        make_run,
        page,
    )

    task = terminal_tests.terminal_lanes({"command": ["python", "-c", PYTHON_CHECK]})
    candidate = Candidate.of_workspace({"output.txt": "hello\n"})
    verdict = terminal_task.verify(task, candidate, sandbox=sandbox)
    assert verdict.status == "passed", (verdict.reason, verdict.details, verdict.stderr)
    run = make_run(import_version(make_pack, tasks=2))
    make_evaluation(run, [PASSED, FAILED])
    result = TaskResult.objects.get(evaluation__run=run, task__task_id="q1")
    TaskResult.objects.filter(pk=result.pk).update(
        details=verdict.details, sandbox_backend=verdict.sandbox_backend or ""
    )
    client.force_login(make_user("reader", "viewer"))

    body = page(client, reverse("runs:result", args=[run.pk, result.pk]))

    if sandbox.name == "bwrap":
        (note,) = verdict.details["sandbox_standins"]
        assert escape(note) in body
    else:
        assert "stood in" not in body
