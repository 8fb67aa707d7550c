from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE_PACKS = REPO_ROOT.parent / "shared" / "reference-packs"
EXAMPLES = REPO_ROOT / "examples"


@pytest.fixture(autouse=True)
def isolated_data_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Each test that touches Django gets its own pack-file roots and upload scratch space."""
    if "settings" not in request.fixturenames and not _uses_django(request):
        yield None
        return
    settings = request.getfixturevalue("settings")
    root = tmp_path_factory.mktemp("data")
    settings.UPLOAD_WORK_ROOT = root / "uploads"
    settings.STORAGES = {
        **settings.STORAGES,
        "pack_public": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": root / "public", "base_url": None},
        },
        "pack_sealed": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": root / "sealed", "base_url": None},
        },
    }
    yield root


def _uses_django(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("django_db") is not None or any(
        name in request.fixturenames for name in ("client", "admin_client", "live_server", "db")
    )


@pytest.fixture
def reference_packs() -> Path:
    if not REFERENCE_PACKS.is_dir():
        pytest.skip(f"reference packs not found at {REFERENCE_PACKS} (../shared is absent)")
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
