"""Mutants of the layers (pyproject.toml ``[tool.importlinter]``): each puts back one kind of
import the contracts forbid, placed inside a function the way the old loops were hidden, and
tests/test_layers.py must then fail."""

from __future__ import annotations

from tests.mutation.engine import Mutant

LAYER_TESTS = "tests/test_layers.py"
CONTRACTS = (LAYER_TESTS, "-k every_import_contract_is_kept")

LAYER_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="layers-loop-inside-an-app",
        module="packs/access.py",
        defence="no import cycle inside an app, even through an import inside a function",
        find="\nfrom __future__ import annotations\n",
        replace=(
            "\nfrom __future__ import annotations\n\n\n"
            "def _loop_put_back():\n"
            "    from packs import selectors  # noqa: PLC0415 - selectors imports this module\n\n"
            "    return selectors\n"
        ),
        tests=CONTRACTS,
        fast=True,
    ),
    Mutant(
        id="layers-jobs-module-imported",
        module="runs/stats.py",
        defence="nothing imports an app's background jobs: they are sent by name",
        find="\nfrom __future__ import annotations\n",
        replace=(
            "\nfrom __future__ import annotations\n\n\n"
            "def _send_directly():\n"
            "    from runs import jobs  # noqa: PLC0415\n\n"
            "    return jobs\n"
        ),
        tests=CONTRACTS,
    ),
    Mutant(
        id="layers-verifiers-import-django",
        module="verifiers/text.py",
        defence="verifiers imports no Django app and no Django",
        find="\nfrom __future__ import annotations\n",
        replace=(
            "\nfrom __future__ import annotations\n\n\n"
            "def _read_setting():\n"
            "    from django.conf import settings  # noqa: PLC0415\n\n"
            "    return settings\n"
        ),
        tests=CONTRACTS,
    ),
    Mutant(
        id="layers-upward-import",
        module="job_queue/__init__.py",
        defence="a layer imports only the layers below it (the bottom imports no app)",
        find="\nlogger = logging.getLogger(__name__)\n",
        replace=(
            "\nlogger = logging.getLogger(__name__)\n\n\n"
            "def _upward():\n"
            "    from runs import models  # noqa: PLC0415\n\n"
            "    return models\n"
        ),
        tests=CONTRACTS,
    ),
)
