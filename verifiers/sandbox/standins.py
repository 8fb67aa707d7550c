"""Host tools standing in for a pack's image where the sandbox cannot run that image.

Packs name images such as ``python:3.12-slim`` and their commands say ``python``,
``pytest``, ``git``, ``patch``. On Docker those come from the image. The bubblewrap sandbox
runs the host's read-only ``/usr`` instead, and a Debian host has no ``python`` command at
all: an honest ``["python", "-m", "pytest", …]`` would end ``task_misconfigured`` on bwrap
for that reason alone. So bwrap sandboxes get what a Python image offers:

* a small read-only folder at ``/opt/securebench/bin``, first on ``PATH``, holding
  ``python`` and ``python3`` (the host's ``/usr/bin/python3``) and the ``pytest`` /
  ``py.test`` entry points; scripts of ours, generated here, nothing of any task;
* the site's own pytest (the worker's pure-Python packages) read-only at ``PYLIB_DIR``, on
  ``PYTHONPATH``;
* git and patch straight from the host's ``/usr``.

Which host tools stood in is said in a note that reaches the result page, so a verdict
reached on bwrap never pretends it ran the pack's image.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from verifiers.sandbox.base import Mount, SandboxUnavailable
from verifiers.sandbox.capture import PATH_VALUE
from verifiers.sandbox.trusted_files import FOLDER_MODE, staged, staging_root

STANDIN_BIN = "/opt/securebench/bin"
PYLIB_DIR = "/opt/securebench/pylib"
SANDBOX_PYTHON = "/usr/bin/python3"  # what the bwrap sandbox runs (its wrapper needs it too)
# Pure-Python packages that make up pytest, mounted read-only for sandboxes whose
# interpreter has no pytest of its own (bwrap runs the host's /usr/bin/python3).
PYTEST_MODULES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py")
HOST_TOOLS = ("git", "patch")
SCRIPT_MODE = 0o555
PROBE_TIMEOUT = 10.0  # seconds; a version probe never holds a verification for long
_VERSION = re.compile(r"\d+(?:\.\d+)+")

_PYTHON_SCRIPT = f"""#!/bin/sh
# SecureBench stand-in for an image's python (bwrap sandbox): the host's Python, with the
# site's pytest on its import path even when the caller cleared PYTHONPATH.
case ":${{PYTHONPATH-}}:" in
  *":{PYLIB_DIR}:"*) ;;
  *) PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{PYLIB_DIR}"; export PYTHONPATH ;;
esac
exec {SANDBOX_PYTHON} "$@"
"""

_PYTEST_SCRIPT = """#!{python}
# SecureBench stand-in for an image's pytest entry point (bwrap sandbox): the console
# script pip would install for the site's pytest (the working folder stays off sys.path).
import sys

if {pylib!r} not in sys.path:
    sys.path.insert(1, {pylib!r})
from {module} import {function}

sys.exit({function}())
"""
# Where pytest's console script starts when its metadata does not say (pytest < 9.1 names).
FALLBACK_PYTEST_ENTRY = ("pytest", "console_main")


@dataclass(frozen=True)
class Standins:
    """What a sandbox adds so that an image's usual commands work without the image."""

    mounts: tuple[Mount, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # for the commands the task names
    notes: tuple[str, ...] = ()  # which host tools stood in, for the result's notes


def image_standins(backend: str, image: str | None) -> Standins:
    """Stand-ins for ``image`` on ``backend``: none on Docker (the image itself runs)."""
    if backend != "bwrap":
        return Standins()
    return Standins(
        mounts=(Mount(standin_bin(), STANDIN_BIN), *pylib_mounts()),
        env={"PATH": f"{STANDIN_BIN}:{PATH_VALUE}", "PYTHONPATH": PYLIB_DIR},
        notes=(standin_note(image),),
    )


def merge_mounts(*groups: tuple[Mount, ...]) -> tuple[Mount, ...]:
    """Mounts of several groups, each target once (the first wins)."""
    merged: dict[str, Mount] = {}
    for group in groups:
        for mount in group:
            merged.setdefault(mount.target, mount)
    return tuple(merged.values())


def standin_note(image: str | None) -> str:
    subject = f"image {image} not used (bwrap)" if image else "no image named (bwrap)"
    return f"{subject}: {', '.join(_tool_descriptions())} stood in"


@functools.cache
def _tool_descriptions() -> tuple[str, ...]:
    """Versions read once per process: they change only when the host is upgraded."""
    python = _version([SANDBOX_PYTHON, "--version"])
    pytest = _pytest_version()
    parts = [
        f"python → host Python {python}" if python else "python → host Python (version unknown)",
        f"pytest {pytest} (the site's)" if pytest else "pytest absent",
    ]
    for name in HOST_TOOLS:
        path = shutil.which(name, path=PATH_VALUE)  # the sandbox sees the same /usr
        if path is None:
            parts.append(f"{name} absent")
        else:
            parts.append(f"{name} {_version([path, '--version']) or '(version unknown)'}")
    return tuple(parts)


def _version(argv: list[str]) -> str | None:
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            env={"PATH": PATH_VALUE, "LANG": "C"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.search((result.stdout or result.stderr).decode("utf-8", "replace"))
    return found.group(0) if found else None


def _pytest_version() -> str | None:
    if importlib.util.find_spec("pytest") is None:
        return None
    try:
        return importlib.metadata.version("pytest")
    except importlib.metadata.PackageNotFoundError:
        return None


# --- the mounted folders ---------------------------------------------------------------------


def pylib_mounts() -> tuple[Mount, ...]:
    """The worker's pytest packages, staged read-only, at ``PYLIB_DIR/<package>``."""
    mounts: list[Mount] = []
    for name in PYTEST_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        mounts.append(Mount(staged(source), f"{PYLIB_DIR}/{source.name}"))
    return tuple(mounts)


def standin_bin() -> Path:
    """The staged folder of entry-point scripts (built on first use, and again if removed).

    ``trusted_files.staged`` copies files read-only without their executable bit, which a
    command found on PATH needs: this folder is built the same way (content-addressed,
    whole or not at all, writable by nobody) with its scripts executable.
    """
    digest = _scripts_digest()
    holder = staging_root() / digest
    target = holder / "bin"
    if not target.is_dir():
        _build(holder)
    return target


@functools.cache
def bin_scripts() -> dict[str, str]:
    """Name → text of every script in the stand-in folder."""
    module, function = _pytest_entry()
    pytest = _PYTEST_SCRIPT.format(
        python=SANDBOX_PYTHON, pylib=PYLIB_DIR, module=module, function=function
    )
    return {
        "python": _PYTHON_SCRIPT,
        "python3": _PYTHON_SCRIPT,
        "pytest": pytest,
        "py.test": pytest,
    }


def _pytest_entry() -> tuple[str, str]:
    """The site's pytest console script, as pip would write it (``module:function``)."""
    try:
        points = importlib.metadata.entry_points(group="console_scripts", name="pytest")
    except Exception:  # noqa: BLE001 - broken metadata: the documented entry point
        return FALLBACK_PYTEST_ENTRY
    for point in points:
        module, _, function = point.value.partition(":")
        if module.replace(".", "").replace("_", "").isalnum() and function.isidentifier():
            return module, function
    return FALLBACK_PYTEST_ENTRY


@functools.cache
def _scripts_digest() -> str:
    hasher = hashlib.sha256(b"securebench-standins\0")
    for name, text in sorted(bin_scripts().items()):
        body = text.encode("utf-8")
        hasher.update(b"%d:%s%d:" % (len(name), name.encode(), len(body)) + body)
    return hasher.hexdigest()


def _build(holder: Path) -> None:
    building = Path(tempfile.mkdtemp(prefix=".staging-", dir=holder.parent))
    try:
        folder = building / "bin"
        folder.mkdir()
        for name, text in bin_scripts().items():
            (folder / name).write_text(text, encoding="utf-8")
            (folder / name).chmod(SCRIPT_MODE)
        folder.chmod(FOLDER_MODE)
        building.chmod(FOLDER_MODE)
        try:
            building.rename(holder)
        except OSError as exc:
            if not (holder / "bin").is_dir():  # not a concurrent builder that won the rename
                raise SandboxUnavailable(f"cannot stage the stand-in commands: {exc}") from exc
    finally:
        if building.exists():
            for path in (building, building / "bin"):
                if path.is_dir():
                    os.chmod(path, 0o700)  # noqa: PTH101 - read-only folders lose no entries
            shutil.rmtree(building, ignore_errors=True)
