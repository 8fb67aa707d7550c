"""Staging every trusted file a verifier mounts, once, when a worker starts.

The copies themselves are made by ``verifiers.sandbox.trusted_files``; this module only knows
who mounts what (the families, live workspaces, the bwrap stand-ins), so it sits above them
all and nothing in ``verifiers`` imports it. Its caller is the Celery worker's start hook.
"""

from __future__ import annotations

from pathlib import Path

from verifiers.families.code_completion import script_mounts
from verifiers.live.runner import helper_folder
from verifiers.sandbox.base import SandboxUnavailable
from verifiers.sandbox.standins import pylib_mounts, standin_bin
from verifiers.sandbox.trusted_files import staging_root
from verifiers.trusted_runner import runner_mounts


def stage_all() -> Path:
    """Stage every trusted file a verifier mounts (worker start); returns the folder."""
    standin_bin()  # bwrap's stand-ins for a pack image's python and pytest
    helper_folder()  # live workspaces' in-sandbox helper, compiled once per worker
    for mount in (*runner_mounts(), *pylib_mounts(), *script_mounts()):
        if not Path(mount.source).exists():
            raise SandboxUnavailable(f"trusted file {mount.source} was not staged")
    return staging_root()
