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
