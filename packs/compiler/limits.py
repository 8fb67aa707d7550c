"""Size and shape limits of a pack; every one can be overridden from site settings."""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class CompileLimits:
    max_manifest_bytes: int = 256 * KIB
    max_tasks_file_bytes: int = 512 * MIB
    max_line_bytes: int = 1 * MIB
    max_rows: int = 1_000_000
    max_json_depth: int = 64
    max_problems: int = 50


def human_bytes(size: int) -> str:
    """'1 MiB', '256 KiB' or '1000 bytes', for limit messages an author can act on."""
    for unit, name in ((MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"
