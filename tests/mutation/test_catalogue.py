"""The mutation catalogue stays in step with the code: every anchor is found exactly once and
every mutated module still compiles, so ``make mutation`` never reports a stale mutant late."""

from __future__ import annotations

import pytest

from tests.mutation.catalogue import MUTANTS
from tests.mutation.engine import REPO_ROOT, anchor_count, mutated_source

pytestmark = pytest.mark.database_independent


def test_mutant_ids_are_unique() -> None:
    ids = [mutant.id for mutant in MUTANTS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.id for mutant in MUTANTS])
def test_each_anchor_occurs_once_and_the_mutant_compiles(mutant) -> None:
    assert anchor_count(mutant) == 1, f"{mutant.id}: anchor not found exactly once (stale)"
    mutated = mutated_source(mutant)
    assert mutated != (REPO_ROOT / mutant.module).read_text(encoding="utf-8")
    compile(mutated, mutant.module, "exec")
    for test in mutant.tests:
        if not test.startswith("-k "):
            assert (REPO_ROOT / test.split("::", 1)[0]).exists(), f"{mutant.id}: no {test}"
