"""The defence-removing edits ``make mutation`` applies, one at a time, to a scratch copy.

The mutants themselves live beside this file, by area: mutants_inputs.py (patch policy,
archives, lanes, bundles), mutants_access.py (access control, debug mode) and
mutants_channel.py (the code_completion verdict channel), mutants_episodes.py (live
episodes), mutants_repo.py (repo_patch's guard against forged pytest outcomes),
mutants_health.py (where the leak audit looks, the adversarial smoke's attacks),
mutants_layers.py (the import contracts: loops, upward imports, the jobs modules),
mutants_evaluations.py (uploaded evaluations, their channel and relay, artifact outputs).

Each mutant removes or weakens exactly one defence and names the tests that must then fail.
Anchors (``find``) are short and must occur exactly once in their module: when the code moves
on, the runner reports the mutant as stale and fails, so the catalogue cannot rot silently.
``fast`` marks the subset CI runs (quick tests, one per module at least).

Hand-chosen rather than generated: every test here starts real sandboxes or a Django test
database, so a few dozen meaningful removals beat thousands of arithmetic flips.
"""

from __future__ import annotations

from tests.mutation.engine import Mutant
from tests.mutation.mutants_access import ACCESS_MUTANTS, DEBUG_TESTS, ROLE_VISIBILITY
from tests.mutation.mutants_channel import CHANNEL_MUTANTS, CHANNEL_TESTS
from tests.mutation.mutants_episodes import EPISODE_MUTANTS
from tests.mutation.mutants_evaluations import EVALUATION_MUTANTS, READS_TESTS
from tests.mutation.mutants_health import HEALTH_MUTANTS
from tests.mutation.mutants_inputs import (
    ARCHIVE_BOMBS,
    BUNDLE_GUARDS,
    INPUT_MUTANTS,
    POLICY_DISGUISES,
)
from tests.mutation.mutants_layers import LAYER_MUTANTS
from tests.mutation.mutants_repo import REPO_MUTANTS
from tests.mutation.mutants_sandbox import DEFENCES, SANDBOX_MUTANTS
from tests.mutation.mutants_sealed import SCRUBBER_TESTS, SEALED_MUTANTS

MUTANTS: tuple[Mutant, ...] = (
    *INPUT_MUTANTS,
    *ACCESS_MUTANTS,
    *CHANNEL_MUTANTS,
    *SANDBOX_MUTANTS,
    *SEALED_MUTANTS,
    *EPISODE_MUTANTS,
    *REPO_MUTANTS,
    *HEALTH_MUTANTS,
    *LAYER_MUTANTS,
    *EVALUATION_MUTANTS,
)

# Test files written because a first run let mutants survive (the report points at them).
ADDED_TESTS: tuple[tuple[str, str], ...] = (
    (
        CHANNEL_TESTS,
        "verdict-channel attacks with the project's own tasks (the tamper suite needed the "
        "reference packs): forged, mismatched and malformed frames, frame cap, fd-1 output, "
        "StopIteration, shadowed builtins, check(), a dead candidate caught as an error",
    ),
    (
        POLICY_DISGUISES,
        "control characters, .git with trailing dots/spaces, check_paths hard denies, text "
        "before the first header",
    ),
    (ARCHIVE_BOMBS, "a pax header past the stream cap; an encrypted zip member"),
    (BUNDLE_GUARDS, "workspace folder references climbing out, setuid modes, file/size caps"),
    (DEBUG_TESTS, "debug mode ends with the privilege; audited address is the peer's"),
    (ROLE_VISIBILITY, "upload offered only to uploaders; oracle candidates withheld from owners"),
    (DEFENCES, "Docker tmpfs inode cap; collection after the command killed its own shell"),
    (
        SCRUBBER_TESTS,
        "last scrub of stdout and nested details; workspace logs; no oracle detail counts",
    ),
    (READS_TESTS, "an evaluation's program gets only the candidate outputs its reads names"),
    (
        "tests/verifiers/test_evaluation_program.py",
        "a link to a host folder in an uploaded folder is refused, not descended; the "
        "program's view is mounted read-only (its mount table, not only file modes)",
    ),
    (
        "tests/verifiers/test_evaluation_messages.py",
        "a command file name climbing out of the candidate to a file that exists, or a link "
        "to a short file (a link to /etc/passwd was refused for its size)",
    ),
)

# Defences whose modules other engineers are reshaping now: mutants to add once they settle.
PENDING: tuple[tuple[str, str], ...] = (
    ("verifiers/sandbox (bwrap)", "--die-with-parent, --new-session (no test can tell yet)"),
    ("verifiers/families/code_completion.py", "tamper/oversize outcomes map to failed verdicts"),
)
