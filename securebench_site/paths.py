"""Folders the site derives from its settings, computable without Django (the benchmark
and test harnesses clean up after the sites they start)."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path


def default_episode_workspace_dir(data_dir: Path) -> Path:
    """A folder of this site's own in the system temp folder, named after its data folder,
    so that two sites never share one (each one's reaper removes what its database does not
    know). Workspaces live only as long as their episodes, and bubblewrap's unprivileged uid
    must pass through every folder on the path to mount read-only assets: a data folder
    under a home folder (0700 on many systems) would not do."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"securebench-episodes-{digest}"
