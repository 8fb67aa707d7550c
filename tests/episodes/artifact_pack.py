"""A small artifact pack for live-workspace tests: one artifact_task whose contract requires
``predictions.jsonl`` (JSONL, one ``{id, answer}`` object a line), with public prompts mounted
read-only under ``data/`` and a writable ``notes/`` folder (public files the seed holds and the
agent does not produce)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.episodes.repo_pack import IMAGE, write_files, write_manifest

PREDICTIONS = "predictions.jsonl"
PROMPTS = [{"id": "p1", "prompt": "1 + 1"}, {"id": "p2", "prompt": "2 + 3"}]
GOOD_PREDICTIONS = '{"id": "p1", "answer": "2"}\n{"id": "p2", "answer": "5"}\n'
# Line 2 breaks the schema (an answer must be a string).
BAD_PREDICTIONS = '{"id": "p1", "answer": "2"}\n{"id": "p2", "answer": 5}\n'
SEED_FILES = ("data/prompts.jsonl", "notes/readme.txt")
CONTRACT = {
    "required_outputs": [
        {
            "path": PREDICTIONS,
            "format": "jsonl",
            "max_bytes": 4096,
            "schema": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "answer": {"type": "string"}},
                "required": ["id", "answer"],
                "additionalProperties": False,
            },
        }
    ]
}


def build_artifact_pack(make_pack: Callable[..., Path], pack_id: str) -> Path:
    """The pack folder, written with tests/conftest.py's ``make_pack``."""
    manifest: dict[str, Any] = {
        "id": pack_id,
        "version": 1,
        "defaults": {
            "family": "artifact_task",
            "environment": {"image": IMAGE, "timeout_seconds": 120},
        },
        "asset_roots": {"public": "assets/"},
        "contract": CONTRACT,
    }
    row = {
        "id": f"{pack_id}/predict",
        "input": {"instructions": f"Answer every prompt of data/prompts.jsonl in {PREDICTIONS}."},
        "assets": [
            {"path": "prompts", "mount": "data", "read_only": True},
            {"path": "notes", "mount": "notes", "read_only": False},
        ],
    }
    files = {
        "assets/prompts/prompts.jsonl": "".join(json.dumps(p) + "\n" for p in PROMPTS),
        "assets/notes/readme.txt": "Public notes, given with the task.\n",
    }
    return make_pack(manifest, [row], files)


def pack_writer(folder: Path) -> Callable[..., Path]:
    """``make_pack``'s builder for a module-scoped fixture (make_pack itself is per test)."""

    def build(manifest: dict[str, Any], rows: list[dict[str, Any]], files: dict[str, str]) -> Path:
        root = folder / f"pack-{uuid.uuid4().hex[:8]}"
        root.mkdir(parents=True)
        write_manifest(root, manifest, rows)
        write_files(root, files)
        return root

    return build
