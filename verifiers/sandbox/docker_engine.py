"""The Docker engine behind the Docker backend: client, image choice, stale-container janitor."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from verifiers.sandbox.base import SandboxUnavailable

logger = logging.getLogger(__name__)

LABEL = "securebench.sandbox"
DEFAULT_LOCAL_IMAGE = "securebench-local/python:3.11"


def docker_module() -> Any:
    try:
        import docker  # noqa: PLC0415 - optional dependency, imported only when used
    except ImportError as exc:
        raise SandboxUnavailable("the `docker` Python package is not installed") from exc
    return docker


def docker_client(timeout: float = 30.0) -> Any:
    """A client for the engine from the environment; SandboxUnavailable if unreachable."""
    docker = docker_module()
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        raise SandboxUnavailable(f"Docker engine unreachable: {exc}") from exc
    return client


def image_present(client: Any, name: str) -> bool:
    try:
        client.images.get(name)
    except Exception:  # noqa: BLE001 - ImageNotFound or API error: not usable here
        return False
    return True


PULL_POLICIES = ("missing", "never")
# Told when a verification starts waiting for an image to be pulled (image, True) and when the
# wait ends (image, False), so that the caller can show the wait; None: nobody is listening.
PullObserver = Callable[[str, bool], None]
pull_observer: ContextVar[PullObserver | None] = ContextVar("pull_observer", default=None)


def pull_policy() -> str:
    """SECUREBENCH_IMAGE_PULL: `missing` (pull an image the first time it is needed, the
    default) or `never` (air-gapped sites: only images already on the host)."""
    policy = (os.environ.get("SECUREBENCH_IMAGE_PULL") or "missing").strip().lower()
    if policy not in PULL_POLICIES:
        raise SandboxUnavailable(
            f"SECUREBENCH_IMAGE_PULL must be one of {', '.join(PULL_POLICIES)}, got {policy!r}"
        )
    return policy


# Told the image a verification could not get (not on the host, not pullable, no fallback),
# so that the caller can say which, from its own name for it rather than an error's text.
ImageRefused = Callable[[str], None]
image_refused: ContextVar[ImageRefused | None] = ContextVar("image_refused", default=None)


def fallback_image(client: Any) -> str | None:
    """The local image a pack's image runs in when this host lacks it and cannot pull it:
    SECUREBENCH_DEFAULT_IMAGE when set, else the image `make sandbox-image` builds
    (DEFAULT_LOCAL_IMAGE); None when that image is not on the host."""
    name = os.environ.get("SECUREBENCH_DEFAULT_IMAGE") or DEFAULT_LOCAL_IMAGE
    return name if image_present(client, name) else None


def resolve_image(client: Any, image: str | None) -> tuple[str, list[str]]:
    """Alias → the image itself → SECUREBENCH_DEFAULT_IMAGE, the first present locally; when
    none is and the pull policy allows, the pack's image (or its alias) is pulled; when that
    cannot be had either, the locally built sandbox image (fallback_image) stands in."""
    try:
        aliases = json.loads(os.environ.get("SECUREBENCH_IMAGE_ALIASES") or "{}")
    except ValueError as exc:
        raise SandboxUnavailable(f"SECUREBENCH_IMAGE_ALIASES is not JSON: {exc}") from exc
    default = os.environ.get("SECUREBENCH_DEFAULT_IMAGE")
    candidates: list[str] = []
    if image and isinstance(aliases, dict) and isinstance(aliases.get(image), str):
        candidates.append(aliases[image])
    if image:
        candidates.append(image)
    wanted = candidates[0] if candidates else None
    if default:
        candidates.append(default)
    for name in candidates:
        if image_present(client, name):
            notes = [] if name == image else [f"pack image {image} mapped to local image {name}"]
            return name, notes
    problem: SandboxUnavailable
    if wanted is not None and pull_policy() == "missing":
        try:
            pull_image(client, wanted)
        except SandboxUnavailable as exc:
            problem = exc
        else:
            notes = [f"image {wanted} pulled"] + (
                [] if wanted == image else [f"pack image {image} mapped to {wanted}"]
            )
            return wanted, notes
    elif wanted is None:
        problem = SandboxUnavailable(
            f"image {default} (SECUREBENCH_DEFAULT_IMAGE) is not available locally"
        )
    else:
        problem = SandboxUnavailable(
            f"image {wanted} is not available locally and the pull policy is `never`; pull it"
            " on this host, or set SECUREBENCH_IMAGE_ALIASES or SECUREBENCH_DEFAULT_IMAGE"
        )
    # SECUREBENCH_DEFAULT_IMAGE, when set, was looked for above: only the built image is new.
    local = None if default else fallback_image(client)
    if local is not None:
        _say_fallback(wanted or "", local)
        return local, [f"image {wanted} could not be had here: ran in the local image {local}"]
    observer = image_refused.get()
    if observer is not None:
        observer(wanted or default or "")
    raise problem


_fallbacks_said: set[str] = set()


def _say_fallback(wanted: str, local: str) -> None:
    # Once per image and process: the log says which image stands in, not every verification.
    if wanted not in _fallbacks_said:
        _fallbacks_said.add(wanted)
        logger.warning(
            "image %s is not on this host and cannot be pulled: its sandboxes run in the local"
            " image %s (set SECUREBENCH_DEFAULT_IMAGE to choose another)",
            wanted,
            local,
        )


def pull_image(client: Any, reference: str) -> None:
    """Pull ``reference`` (name[:tag] or name@digest); SandboxUnavailable naming the image
    when the registry refuses or cannot be reached (our infrastructure, never the candidate's
    failure: the verification is retried)."""
    observer = pull_observer.get()
    if observer is not None:
        observer(reference, True)
    try:
        repository, _, tag = _split_reference(reference)
        client.images.pull(repository, tag=tag)
    except Exception as exc:  # noqa: BLE001 - not found, refused, unreachable: all "unavailable"
        raise SandboxUnavailable(f"image {reference} could not be pulled: {exc}") from exc
    finally:
        if observer is not None:
            observer(reference, False)


def _split_reference(reference: str) -> tuple[str, str, str]:
    """``host:port/name:tag`` → (``host:port/name``, ":", ``tag``); a digest stays whole."""
    if "@" in reference:
        repository, _, digest = reference.partition("@")
        return repository, "@", digest
    name, _, last = reference.rpartition("/")
    if ":" in last:
        last, _, tag = last.partition(":")
        return (f"{name}/{last}" if name else last), ":", tag
    return reference, ":", "latest"


def remove_stale_containers(
    client: Any,
    older_than_seconds: float,
    *,
    labels: dict[str, str] | None = None,
    now: float | None = None,
) -> list[str]:
    """Force-remove our sandbox containers created more than ``older_than_seconds`` ago.

    A worker killed by SIGKILL (or a host crash) never reaches ``finish()``, and the keeper
    (``sleep infinity``) keeps its container running forever. Pass the task's hard time
    limit: no live run is older than that, so only orphans go. Only containers with our
    label (and every one of ``labels``) are considered. Returns the ids removed.
    """
    filters = [f"{LABEL}=1", *(f"{key}={value}" for key, value in (labels or {}).items())]
    cutoff = (time.time() if now is None else now) - older_than_seconds
    removed: list[str] = []
    for entry in client.api.containers(all=True, filters={"label": filters}):
        # The list endpoint's Created is epoch seconds from the engine (same host clock).
        if int(entry.get("Created", 0)) > cutoff:
            continue
        try:
            client.api.remove_container(entry["Id"], force=True)
        except Exception:  # noqa: BLE001, S112 - gone meanwhile or being removed: nothing to do
            continue
        removed.append(entry["Id"])
    return removed
