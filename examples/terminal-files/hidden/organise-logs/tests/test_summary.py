"""Trusted checker for terminal-files/organise-logs.

Expected counts are written out here instead of being recomputed from logs/,
so that editing the logs cannot change the expected answer.
"""

import csv
import os
from pathlib import Path

WORKSPACE = Path(os.environ.get("SECUREBENCH_WORKSPACE", "."))

EXPECTED_ROWS = [
    {"date": "2025-02-28", "errors": "3", "warnings": "1"},
    {"date": "2025-03-01", "errors": "2", "warnings": "1"},
    {"date": "2025-03-02", "errors": "0", "warnings": "2"},
]


def read_summary():
    with (WORKSPACE / "summary.csv").open(newline="") as fh:
        return list(csv.reader(fh))


def test_summary_has_the_exact_header():
    assert read_summary()[0] == ["date", "errors", "warnings"]


def test_summary_has_one_row_per_day_sorted_by_date():
    header, *rows = read_summary()
    assert [dict(zip(header, row, strict=True)) for row in rows] == EXPECTED_ROWS


def test_logs_are_left_unchanged():
    names = sorted(p.name for p in (WORKSPACE / "logs").iterdir())
    assert names == ["app-2025-02-28.log", "app-2025-03-01.log", "app-2025-03-02.log"]
