"""Every task with a reference passes with it and fails with an empty candidate, on real packs
(our examples and test packs, the full HumanEval, and the reference packs when present) and on
both sandbox backends."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from packs.compiler import CompiledPack, compile_pack, compiled_task_lanes
from packs.management.commands.import_humaneval import write_humaneval_pack
from tests.components import REFERENCE_PACK_NAMES
from tests.conftest import EXAMPLES, TEST_PACKS, reference_packs_or_skip
from verifiers.oracle import null_candidate, oracle_candidate
from verifiers.scoring import VerifierSettings, verify
from verifiers.task import TaskLanes

# Two cores: two bubblewrap verifications at a time keep both busy. A Docker verification
# mostly waits on the engine (container start and removal), so more overlap pays there.
PARALLEL = {"bwrap": 2, "docker": 6}


def pack_lanes(pack: CompiledPack) -> list[TaskLanes]:
    return [compiled_task_lanes(task, pack.files) for task in pack.tasks]


def real_packs() -> list[str]:
    """Our packs by path, and the reference packs by name (resolved, or skipped through the
    helper, in the test: absent, they are still four visible tests per backend)."""
    ours = [EXAMPLES, TEST_PACKS]
    folders = [
        p for root in ours for p in sorted(root.iterdir()) if (p / "manifest.yaml").is_file()
    ]
    return [str(p.relative_to(EXAMPLES.parent)) for p in folders] + [
        f"reference/{name}" for name in REFERENCE_PACK_NAMES
    ]


def pack_folder(name: str) -> Path:
    where, _, pack = name.partition("/")
    if where == "reference":
        return reference_packs_or_skip() / pack
    return EXAMPLES.parent / name


def verify_all(tasks, make_candidate, sandbox) -> dict[str, object]:
    settings = VerifierSettings(sandbox=sandbox)
    work = [(task, make_candidate(task)) for task in tasks]
    work = [(task, candidate) for task, candidate in work if candidate is not None]
    with ThreadPoolExecutor(PARALLEL.get(sandbox.name, 2)) as pool:
        verdicts = pool.map(lambda item: verify(item[0], item[1], settings), work)
        return {task.task_id: verdict for (task, _), verdict in zip(work, verdicts, strict=True)}


def assert_all(verdicts: dict[str, object], status: str) -> None:
    wrong = {
        task_id: (v.status, v.reason, v.stderr[-300:])
        for task_id, v in verdicts.items()
        if v.status != status
    }
    assert not wrong, wrong


@pytest.fixture(scope="module")
def humaneval(tmp_path_factory) -> list[TaskLanes]:
    folder = tmp_path_factory.mktemp("humaneval")
    write_humaneval_pack(folder)
    return pack_lanes(compile_pack(folder))


@pytest.mark.parametrize("name", real_packs())
def test_every_reference_passes_and_every_empty_candidate_fails(name, sandbox):
    tasks = pack_lanes(compile_pack(pack_folder(name)))

    oracle = verify_all(tasks, oracle_candidate, sandbox)
    null = verify_all(tasks, null_candidate, sandbox)

    assert_all(oracle, "passed")
    assert_all(null, "failed")
    verifiable = [t for t in tasks if null_candidate(t) is not None]
    assert len(null) == len(verifiable)


def humaneval_share(humaneval: list[TaskLanes], sandbox) -> list[TaskLanes]:
    """All 164 problems on bubblewrap; every 4th on Docker, whose image runs the same Debian
    Python as the host (a full Docker pass costs over a minute of CI for no new coverage)."""
    return humaneval if sandbox.name == "bwrap" else humaneval[::4]


def test_humaneval_problems_pass_with_their_canonical_solutions(humaneval, sandbox):
    tasks = humaneval_share(humaneval, sandbox)
    verdicts = verify_all(tasks, oracle_candidate, sandbox)

    assert len(verdicts) == len(tasks) >= 41
    assert_all(verdicts, "passed")


def test_humaneval_problems_fail_with_a_stub_returning_none(humaneval, sandbox):
    """All 164 on bubblewrap, every 4th on Docker (see humaneval_share)."""
    from verifiers.task import Candidate

    def stub(task: TaskLanes) -> Candidate:
        entry = task.metadata["entry_point"]
        return Candidate.of_code(f"def {entry}(*args, **kwargs):\n    return None\n")

    tasks = humaneval_share(humaneval, sandbox)
    verdicts = verify_all(tasks, stub, sandbox)

    assert len(verdicts) == len(tasks) >= 41
    assert_all(verdicts, "failed")


def test_deferred_families_stay_pending():
    tasks = pack_lanes(compile_pack(EXAMPLES / "deferred-tool-call"))

    verdicts = [verify(task, None) for task in tasks]

    assert {v.status for v in verdicts} == {"pending"}
