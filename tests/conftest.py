from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from securebench_site.storage import pack_storages
from tests.components import (
    LOCAL_IMAGE,
    REFERENCE_PACKS,
    probe_reference_packs,
    require,
    required_components,
    stop_if_a_required_component_is_missing,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"
# Packs written for the test suite (security and verifier suites run on them first).
TEST_PACKS = REPO_ROOT / "tests" / "packs"


# Suites that never touch the database or the broker: CI's PostgreSQL + Redis pass skips them
# (they already ran once on the embedded defaults, and sandboxes do not care about the DB).
# Browser tests start `make run` on the embedded defaults whatever the environment says, so
# they too run once.
DATABASE_INDEPENDENT = ("compiler", "verifiers", "e2e")
DATABASE_INDEPENDENT_FILES = (
    "test_code_gaming.py",
    "test_patch_and_workspace_gaming.py",
    "test_answer_gaming.py",
    # Runs pytest in child processes on modules that touch no database.
    "test_components.py",
    "test_sandbox_escapes.py",
    # Benchmarks start their own sites on the embedded defaults, whatever the test run uses.
    "test_bench_smoke.py",
    # `make serve` on the embedded defaults.
    "test_serve.py",
)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Every component CI requires is probed before anything is collected, so a missing one
    cannot hide behind tests that were never collected."""
    stop_if_a_required_component_is_missing(required_components())
    # Django's advice for test suites: a fast hasher for the test users' passwords (PBKDF2's
    # million rounds cost about a second of CPU per user made or signed in). Nothing here
    # tests hashing; the sites that tests start (`make run`, workers) keep the real hasher.
    from django.conf import settings  # noqa: PLC0415 - pytest-django has configured Django

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# A test reaches the database or the broker only through one of these fixtures (directly or
# through the fixtures it uses: `fixturenames` is the whole closure) or a django_db mark.
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_setup", "live_server", "settings", "workers", "broker"}
)


def _needs_database(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(names & DATABASE_FIXTURES)


# The slowest files (minutes each, by CI's --durations), scheduled first: pytest-xdist hands
# out files in collection order, and one of these started last would leave the other
# processes idle while it ran on alone.
SLOWEST_FIRST = (
    "test_bench_smoke.py",
    "pack_health/test_reference_packs.py",
    "episodes/test_live_episodes.py",
    "e2e/test_infrastructure_journey.py",
    "episodes/test_episode_attacks.py",
    "runs/test_make_run_stop.py",
    "test_readme_commands.py",
    "test_docs_commands.py",
    "e2e/test_narrow_screens.py",
    "pack_health/test_repeat_check.py",
)
TESTS_ROOT = Path(__file__).resolve().parent


def _schedule_rank(item: pytest.Item) -> int:
    # Paths under tests/: a file name alone would also match a fast namesake elsewhere.
    relative = item.path.resolve().relative_to(TESTS_ROOT).as_posix()
    return SLOWEST_FIRST.index(relative) if relative in SLOWEST_FIRST else len(SLOWEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_schedule_rank)  # stable: the rest keep their order
    for item in items:
        relative = item.path.resolve().relative_to(TESTS_ROOT)
        if (
            relative.parts[0] in DATABASE_INDEPENDENT
            or item.path.name in DATABASE_INDEPENDENT_FILES
            or not _needs_database(item)
        ):
            item.add_marker(pytest.mark.database_independent)


@pytest.fixture(autouse=True)
def isolated_data_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Each test that touches Django gets its own pack-file roots and upload scratch space."""
    if "settings" not in request.fixturenames and not _uses_django(request):
        yield None
        return
    settings = request.getfixturevalue("settings")
    # A stored version's health checks would score runs of their own beside the test's, in
    # its worker and its counts; tests/pack_health turns them on where they are the subject.
    settings.SECUREBENCH_HEALTH_ON_UPLOAD = False
    # Without those checks nothing would publish a stored version: packs are stored published
    # here, and the gate's own tests (tests/pack_health, tests/packs/test_publish_gate.py)
    # store drafts.
    settings.SECUREBENCH_PUBLISH_GATE = False
    root = tmp_path_factory.mktemp("data")
    # The same layout settings.py derives from SECUREBENCH_DATA_DIR, so that a worker
    # process started with SECUREBENCH_DATA_DIR=root reads the files this test stored.
    settings.UPLOAD_WORK_ROOT = root / "uploads"
    settings.STORAGES = {
        **settings.STORAGES,
        **pack_storages("local", root / "pack-files", None),
    }
    settings.SECUREBENCH_BLOB_CACHE_DIR = root / "cache" / "blobs"
    yield root


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """SQLite tests use a database file, not memory, so real worker processes can share it."""
    from django.conf import settings  # noqa: PLC0415

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        import tempfile  # noqa: PLC0415

        folder = tempfile.mkdtemp(prefix="securebench-test-db-")
        database.setdefault("TEST", {})["NAME"] = os.path.join(folder, "test.sqlite3")


def _uses_django(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("django_db") is not None or any(
        name in request.fixturenames for name in ("client", "admin_client", "live_server", "db")
    )


@pytest.fixture
def reference_packs() -> Path:
    return reference_packs_or_skip()


def reference_packs_or_skip() -> Path:
    """The reference packs folder; a skip (or, when required, a failure) without it."""
    problem = probe_reference_packs()
    if problem is not None:
        require("reference-packs", problem)
    return REFERENCE_PACKS


PackBuilder = Callable[..., Path]


@pytest.fixture
def make_pack(tmp_path: Path) -> PackBuilder:
    """Write a pack folder: manifest dict, task rows, and files under it ({relpath: text})."""
    counter = iter(range(10_000))

    def build(
        manifest: dict[str, Any] | None = None,
        rows: list[dict[str, Any]] | None = None,
        files: dict[str, str | bytes] | None = None,
    ) -> Path:
        root = tmp_path / f"pack-{next(counter)}"
        root.mkdir()
        manifest = manifest or {"id": "demo", "version": 1}
        (root / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
        rows = rows if rows is not None else [mc_row("q1")]
        (root / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        for relpath, content in (files or {}).items():
            target = root / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
        return root

    return build


def mc_row(task_id: str, answer: str = "B", family: str = "multiple_choice") -> dict[str, Any]:
    return {
        "id": task_id,
        "family": family,
        "input": {"question": f"Question {task_id}?", "choices": ["one", "two", "three"]},
        "eval": {"answer": answer},
    }


def zip_folder(folder: Path, *, top: str | None = None) -> bytes:
    """Zip a folder the way a user would: under one top-level directory by default."""
    top = folder.name if top is None else top
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                name = path.relative_to(folder).as_posix()
                archive.write(path, f"{top}/{name}" if top else name)
    return buffer.getvalue()


# --- real sandboxes ------------------------------------------------------------------------

SANDBOX_BACKENDS = ("bwrap", "docker")


def _docker_image_present(tag: str) -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(
        ["docker", "image", "inspect", tag], capture_output=True, check=False, timeout=30
    )
    return probe.returncode == 0


def sandbox_or_skip(backend: str):
    """A real backend; skipped with the reason when absent, a failure when required."""
    from verifiers.sandbox import SandboxUnavailable, get_sandbox

    try:
        return get_sandbox(backend)
    except SandboxUnavailable as exc:
        require(backend, f"{backend} sandbox unavailable: {exc}")


@pytest.fixture(scope="module", params=SANDBOX_BACKENDS)
def sandbox(request: pytest.FixtureRequest):
    with pytest.MonkeyPatch.context() as patch:
        wants_image = request.param == "docker" and "SECUREBENCH_DEFAULT_IMAGE" not in os.environ
        if wants_image and _docker_image_present(LOCAL_IMAGE):
            patch.setenv("SECUREBENCH_DEFAULT_IMAGE", LOCAL_IMAGE)
        yield sandbox_or_skip(request.param)


# --- roles ----------------------------------------------------------------------------------

TEST_PASSWORD = "pw-for-tests-only"


def make_user(username: str, *roles: str, superuser: bool = False):
    """A user in the given role groups (viewer, submitter, pack maintainer, reviewer, admin),
    or a superuser; the groups come from the migration (runs.0003)."""
    from django.contrib.auth.models import Group, User  # noqa: PLC0415

    if superuser:
        return User.objects.create_superuser(username, password=TEST_PASSWORD)
    user = User.objects.create_user(username, password=TEST_PASSWORD)
    groups = list(Group.objects.filter(name__in=roles))
    assert len(groups) == len(roles), f"unknown role in {roles}"
    user.groups.add(*groups)
    return user
