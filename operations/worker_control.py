"""Remote-control commands a worker answers (registered when the Celery app loads).

"pull now" from the operations page reaches every worker as a broadcast; each pulls on its own
engine in a thread of its own (the control channel must not wait minutes for a registry),
then probes its images again at its next heartbeat, so the page shows the result.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.worker.control import control_command

from operations import heartbeat
from verifiers.sandbox import SandboxUnavailable, get_sandbox
from verifiers.sandbox.docker_engine import pull_image, pull_policy

logger = logging.getLogger(__name__)

PULL_COMMAND = "securebench_pull_image"


@control_command(name=PULL_COMMAND, args=[("image", str)], signature="<image>")
def pull_image_now(state: Any, image: str) -> dict[str, str]:
    threading.Thread(target=_pull, args=(image,), name="sb-pull", daemon=True).start()
    return {"ok": f"pulling {image}"}


def _pull(image: str) -> None:
    try:
        sandbox = get_sandbox()
        if sandbox.name != "docker":
            return  # this host's verifications use no images
        if pull_policy() == "never":
            logger.warning("not pulling %s: this host's pull policy is `never`", image)
            return
        pull_image(sandbox.client, image)  # type: ignore[attr-defined]
        logger.info("pulled %s on request", image)
    except SandboxUnavailable as exc:
        logger.warning("could not pull %s on request: %s", image, exc)
    finally:
        heartbeat.probe_at_next_beat()
