"""Defence in depth: the only read of non-public values is the evaluator's, never a view's."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

WEB_MODULES = ["packs/views.py", "packs/api.py", "packs/forms.py", "packs/admin.py"]
SEALED_READS = re.compile(r"evaluator_task_lanes|SealedValue|\.sealed\b|sealed__")


def test_no_view_api_or_admin_module_reads_sealed_values():
    for module in WEB_MODULES:
        source = (REPO_ROOT / module).read_text()
        assert not SEALED_READS.search(source), f"{module} reads sealed values"


def test_no_template_reads_sealed_values():
    for template in (REPO_ROOT / "templates").rglob("*.html"):
        assert not re.search(r"\.sealed\b|sealed_value|public_value", template.read_text()), (
            template
        )


def test_only_the_audited_privileged_views_read_one_sealed_value_or_file():
    allowed = {"packs/sealed.py", "runs/privileged_views.py"}
    for module in [*REPO_ROOT.glob("packs/**/*.py"), *REPO_ROOT.glob("runs/**/*.py")]:
        relative = module.relative_to(REPO_ROOT).as_posix()
        if relative in allowed or "/migrations/" in relative:
            continue
        source = module.read_text()
        imports = re.search(
            r"^\s*(from packs\.sealed import|import packs\.sealed|from packs import .*\bsealed\b)",
            source,
            re.MULTILINE,
        )
        assert not imports, relative
        assert "sealed_resource(" not in source and "sealed_file(" not in source, relative
