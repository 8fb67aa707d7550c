"""The layers stay visible: dashboard → operations → episodes → pack_health → runs → packs →
verifiers. A lower layer never imports an upper one (not even inside a function), so no import
cycle can form between them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each layer, and the layers above it that it must never import.
LAYERS = ["verifiers", "packs", "runs", "pack_health", "episodes", "operations", "dashboard"]

pytestmark = pytest.mark.database_independent


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_no_layer_imports_a_layer_above_it(layer):
    above = set(LAYERS[LAYERS.index(layer) + 1 :])
    offences = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & above)
        for path in (ROOT / layer).rglob("*.py")
        if imported_packages(path) & above
    }
    assert offences == {}, f"{layer} must not import {sorted(above)}: {offences}"


def test_the_check_sees_an_upward_import(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("def f():\n    from episodes import services\n")
    assert "episodes" in imported_packages(module)
