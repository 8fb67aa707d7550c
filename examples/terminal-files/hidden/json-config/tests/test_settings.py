"""Trusted checker for terminal-files/json-config."""

import json
import os
from pathlib import Path

WORKSPACE = Path(os.environ.get("SECUREBENCH_WORKSPACE", "."))
SETTINGS = WORKSPACE / "config" / "settings.json"


def load_settings():
    return json.loads(SETTINGS.read_text(encoding="utf-8"))


def test_settings_file_is_a_regular_file():
    assert SETTINGS.is_file()
    assert not SETTINGS.is_symlink()


def test_settings_hold_exactly_the_requested_values():
    assert load_settings() == {
        "service": "inventory",
        "port": 8080,
        "debug": False,
        "allowed_hosts": ["localhost", "127.0.0.1"],
    }


def test_port_is_an_integer_not_a_string():
    port = load_settings()["port"]
    assert type(port) is int


def test_file_ends_with_a_newline():
    assert SETTINGS.read_bytes().endswith(b"\n")
