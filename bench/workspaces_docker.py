"""Workload 8 on Docker: `bash true` steps on a `make run` site whose worker sandboxes with
Docker (`SECUREBENCH_SANDBOX=docker`), reported beside bench.workspaces' bubblewrap figures.
"""

from __future__ import annotations

import sys

from bench.common import Figure, main
from bench.workspaces import run_on


def run(*, smoke: bool) -> list[Figure]:
    return run_on("docker", smoke=smoke)


if __name__ == "__main__":
    sys.exit(main(run))
