"""The layers stay visible, checked by import-linter (pyproject.toml ``[tool.importlinter]``):
securebench_site → dashboard → operations → episodes → pack_health → runs → packs →
verifiers | job_queue, each importing only the layers below it; ``verifiers`` imports no Django
app; nothing imports an app's background jobs; no import cycle inside any app. grimp reads every
import statement, those inside functions too, so an import moved into a function to dodge a
contract still breaks it.

And no private name crosses a module boundary: a name with a leading underscore is imported
or read only by the module that defines it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# Everything the project ships; tests may reach into a module they test.
PACKAGES = (
    "securebench_site",
    "dashboard",
    "operations",
    "episodes",
    "pack_health",
    "runs",
    "packs",
    "verifiers",
    "job_queue",
    "bench",
)

pytestmark = pytest.mark.database_independent


def lint_imports(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_import_contract_is_kept() -> None:
    checked = lint_imports()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 broken" in checked.stdout, checked.stdout


def test_a_loop_through_an_import_inside_a_function_breaks_the_contract(tmp_path: Path) -> None:
    # The same contract type as the project's, on a throwaway package whose only loop runs
    # through an import placed inside a function: the kind of loop the project once had.
    package = tmp_path / "probe_app"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def helper():\n    from probe_app import high\n")
    (package / "high.py").write_text("from probe_app import low\n")
    (tmp_path / ".importlinter").write_text(
        textwrap.dedent(
            """\
            [importlinter]
            root_package = probe_app

            [importlinter:contract:cycles]
            name = no cycle
            type = acyclic_siblings
            ancestors = probe_app
            """
        )
    )
    checked = subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "BROKEN" in checked.stdout


# --- private names --------------------------------------------------------------------------


def first_party_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_crossings(module: str, path: Path, known: set[str]) -> list[str]:
    """``from ours import _name`` and ``ours_module._name`` in ``module``, for another module of
    ours: where a private name leaves the module that defines it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases: dict[str, str] = {}  # local name -> first-party module it stands for
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in known:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target in known:
                    aliases[alias.asname or alias.name] = target
                elif is_private(alias.name) and node.module != module:
                    found.append(f"{module} imports {node.module}.{alias.name} (l.{node.lineno})")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and is_private(node.attr)
            and aliases[node.value.id] != module
        ):
            owner = aliases[node.value.id]
            found.append(f"{module} reads {owner}.{node.attr} (l.{node.lineno})")
    return found


def test_no_private_name_crosses_a_module_boundary() -> None:
    modules = first_party_modules()
    known = set(modules)
    offences = [
        crossing
        for module, path in sorted(modules.items())
        for crossing in private_crossings(module, path, known)
    ]
    assert offences == []


def test_the_check_sees_a_private_name_imported_and_read(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from verifiers.families.terminal_task import _hidden\n"
        "from verifiers import verdict\n"
        "verdict._internal()\n"
    )
    known = {"verifiers", "verifiers.families.terminal_task", "verifiers.verdict"}
    assert private_crossings("runs.probe", probe, known) == [
        "runs.probe imports verifiers.families.terminal_task._hidden (l.1)",
        "runs.probe reads verifiers.verdict._internal (l.3)",
    ]
