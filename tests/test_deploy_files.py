"""The deploy/ folder says what the operators' guide's "Production" section says: its services
run the Makefile's own targets, and every setting it names is one the site reads (a typo in an
environment variable is silently ignored by everything, so it is caught here)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY = REPO_ROOT / "deploy"
# Read by the images of the other services, or by boto3 (the site's S3 credentials).
FOREIGN_SETTINGS = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}
FOREIGN_PREFIXES = ("AWS_",)


def make_targets() -> set[str]:
    phony = re.search(r"^\.PHONY:(.*)$", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert phony
    return set(phony.group(1).split())


def settings_read() -> str:
    """The code that reads the environment: settings, the sandboxes (their own variables,
    read where the sandbox is built) and gunicorn's configuration."""
    sources = [*(REPO_ROOT / "securebench_site").glob("*.py"), DEPLOY / "gunicorn.conf.py"]
    sources += (REPO_ROOT / "verifiers" / "sandbox").glob("*.py")
    return "\n".join(path.read_text() for path in sources)


def env_file(path: Path) -> dict[str, str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    pairs = [line.split("=", 1) for line in lines if line and not line.startswith("#")]
    return {key: value for key, value in pairs}


def test_every_site_service_runs_a_make_target_of_ours() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"web", "beat-worker", "worker", "postgres", "redis", "s3"} <= set(services)
    site = [name for name, spec in services.items() if "build" in spec]
    assert set(site) == {"web", "beat-worker", "worker"}
    for name in site:
        command = services[name]["command"]
        assert command[0] == "make" and command[1] in make_targets(), (name, command)
    beats = [name for name in site if "WORKER_BEAT=1" in services[name]["command"]]
    assert beats == ["beat-worker"], "exactly one service runs the schedule"


def test_every_setting_the_deploy_files_name_is_read_by_the_site() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    named = set(env_file(DEPLOY / "site.env.example"))
    for spec in compose["services"].values():
        named |= set(spec.get("environment", {}))
    source = settings_read()
    unknown = {
        name
        for name in named - FOREIGN_SETTINGS
        if not name.startswith(FOREIGN_PREFIXES) and f'"{name}"' not in source
    }
    assert not unknown, f"settings nobody reads: {sorted(unknown)}"
    assert {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "SECUREBENCH_STORAGE"} <= named
