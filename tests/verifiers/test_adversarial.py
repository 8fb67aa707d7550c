"""The built-in attack candidates of the adversarial health check (verifiers.adversarial).

Each family's attacks must fail on our verifiers (sandboxed families on both backends), and
each kind of attack must be real: it passes a deliberately weak verifier or a task whose
verification has a hole, so a failing attack shows a defence, not a dud.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from packs.audit import check_task
from packs.compiler import compile_pack, compiled_task_lanes
from tests.conftest import EXAMPLES
from tests.verifiers.test_repo_patch import git, repo_task
from tests.verifiers.test_terminal_task import terminal_lanes
from verifiers.adversarial import MAX_ATTACKS, TEXT_BUDGET, Attack, attack_candidates
from verifiers.families import FAMILIES
from verifiers.scoring import VerifierSettings, verify
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Reason, secret_strings


def example_task(task_id: str) -> TaskLanes:
    pack = compile_pack(EXAMPLES / task_id.split("/")[0])
    (task,) = [t for t in pack.tasks if t.task_id == task_id]
    return compiled_task_lanes(task, pack.files)


def attacks_by_name(task: TaskLanes) -> dict[str, Candidate]:
    return {attack.name: attack.candidate for attack in attack_candidates(task)}


def verdicts(task: TaskLanes, sandbox=None) -> dict[str, tuple[str, str | None]]:
    settings = VerifierSettings(sandbox=sandbox)
    return {
        attack.name: (v.status, v.reason)
        for attack in attack_candidates(task)
        for v in [verify(task, attack.candidate, settings)]
    }


def assert_all_fail(results: dict[str, tuple[str, str | None]], expected: int) -> None:
    assert len(results) == expected, results
    assert all(status == "failed" for status, _ in results.values()), results


# --- what an attack is built from ----------------------------------------------------------

ONE_TASK_PER_FAMILY = (
    "arithmetic-mc/product",
    "capitals-short-answer/bolivia-passage",
    "facts-free-response/moon-same-side",
    "python-functions/roman-to-int",
    "tiny-repo-patch/median-even-count",
    "terminal-files/organise-logs",
)


def candidate_text(attack: Attack) -> str:
    files = attack.candidate.files.values()
    return attack.candidate.text + "".join(f.content.decode() for f in files)


@pytest.mark.parametrize("task_id", ONE_TASK_PER_FAMILY)
def test_attacks_carry_no_sealed_value(task_id):
    task = example_task(task_id)
    sealed = [
        s
        for s in secret_strings([*task.hidden.values(), *task.evaluation_inputs.values()])
        if len(s) >= 8
    ]

    attacks = attack_candidates(task)

    assert 2 <= len(attacks) <= MAX_ATTACKS
    assert len({attack.name for attack in attacks}) == len(attacks)
    leaked = [(a.name, s[:40]) for a in attacks for s in sealed if s in candidate_text(a)]
    assert leaked == []


def test_max_attacks_is_the_most_any_family_gets_and_deferred_families_get_none():
    counts = {t: len(attack_candidates(example_task(t))) for t in ONE_TASK_PER_FAMILY}
    assert max(counts.values()) == MAX_ATTACKS

    deferred = [name for name, spec in FAMILIES.items() if not spec.active]
    for family in deferred:
        task = TaskLanes("t", family, {"instructions": "x"}, {}, {})
        assert attack_candidates(task) == []


# --- text families: fail on ours, pass a naive grader ----------------------------------------


def test_answer_spraying_fails_our_multiple_choice_verifier_but_fools_a_naive_one():
    task = example_task("arithmetic-mc/product")  # answer B
    attacks = attacks_by_name(task)

    assert_all_fail(verdicts(task), 3)

    # A grader that looks for the expected letter anywhere in the answer.
    def naive(text: str) -> bool:
        return "B" in re.findall(r"\b[A-Z]\b", text)

    assert naive(attacks["mc_every_letter"].text)
    assert naive(attacks["mc_letter_per_line"].text)


@pytest.mark.parametrize(
    "task_id", ["capitals-short-answer/bolivia-passage", "facts-free-response/moon-same-side"]
)
def test_echoes_sprays_and_judge_injection_fail_our_text_verifiers(task_id):
    assert_all_fail(verdicts(example_task(task_id)), 4)


def test_echo_and_keyword_spray_fool_a_containment_grader():
    # The passage holds the answer: a grader that accepts any answer containing "Sucre"
    # passes both, ours (whole answer, or the answer with at most one more word) neither.
    task = example_task("capitals-short-answer/bolivia-passage")
    attacks = attacks_by_name(task)

    for name in ("short_echo_prompt", "short_keyword_spray"):
        assert "sucre" in attacks[name].text.lower()
        assert verify(task, attacks[name]).status == "failed"


def free_task(
    prompt: str, accepted: str, reference: str, rejected: tuple[str, ...] = ()
) -> TaskLanes:
    rubric = {"type": "contains_any", "accepted_answers": [accepted]}
    if rejected:
        rubric["rejected_answers"] = list(rejected)
    hidden = {"rubric": rubric, "reference_answer": reference}
    return TaskLanes("t", "free_response", {"prompt": prompt}, {}, hidden)


WESTPHALIA = "In which year was the Peace of Westphalia signed?"
WATER = "Is water made of hydrogen and oxygen? Answer in one word."


def smoke_findings(task: TaskLanes) -> list[tuple[str, str, str | None]]:
    """The health check of one task as audit_pack runs it: (check, code, attack) each."""
    findings = check_task(task, VerifierSettings()).findings()
    return [(f.check, f.code, f.evidence.get("attack")) for f in findings]


@pytest.mark.parametrize(
    ("prompt", "accepted", "reference"),
    [(WESTPHALIA, "1648", "It was signed in 1648."), (WATER, "yes", "Yes.")],
    ids=["year", "yes"],
)
def test_vocabulary_spray_passes_a_rubric_accepting_a_bare_word_and_the_smoke_reports_it(
    prompt, accepted, reference
):
    # Neither the prompt nor its keyword spray holds the answer; a generic list does.
    task = free_task(prompt, accepted, reference)

    assert smoke_findings(task) == [("adversarial", "attack_passed", "free_vocabulary_spray")]


@pytest.mark.parametrize(
    ("prompt", "accepted", "reference", "rejected"),
    [
        (WESTPHALIA, "1648", "It was signed in 1648.", ("1618",)),
        (WATER, "yes", "Yes.", ("no",)),
        (WESTPHALIA, "signed in 1648", "It was signed in 1648.", ()),
    ],
    ids=["year_rejecting_1618", "yes_rejecting_no", "phrase"],
)
def test_a_rubric_rejecting_a_wrong_answer_or_asking_a_phrase_defeats_every_spray(
    prompt, accepted, reference, rejected
):
    task = free_task(prompt, accepted, reference, rejected)

    assert_all_fail(verdicts(task), 4)
    assert smoke_findings(task) == []


@pytest.mark.parametrize("accepted", ["yes", "1648", 1648, "B"])
def test_vocabulary_spray_fails_short_answer_as_a_guess_list(accepted):
    task = TaskLanes(
        "t", "short_answer", {"question": "Name it."}, {}, {"accepted_answers": [accepted]}
    )
    spray = attacks_by_name(task)["short_vocabulary_spray"]

    # Whole and within the answer cap; a grader taking the answer as any word would pass it.
    assert len(spray.text) <= TEXT_BUDGET and spray.text.endswith(", 2099, 2100")
    assert str(accepted).lower() in re.findall(r"\w+", spray.text.lower())
    assert verify(task, spray).status == "failed"


# --- code_completion ----------------------------------------------------------------------------


def naive_harness(task: TaskLanes, candidate: Candidate) -> bool:
    """Candidate and tests in one interpreter, passed on exit status 0 (HumanEval-like).
    Runs on the host: only for our own attack code, never for a submission."""
    program = f"{candidate.text}\n\n{task.evaluation_inputs['tests']['code']}\n"
    run = subprocess.run(
        [sys.executable, "-I", "-c", program], capture_output=True, timeout=60, check=False
    )
    return run.returncode == 0


def test_code_attacks_fail_in_our_sandboxes(sandbox):
    task = example_task("python-functions/roman-to-int")

    # The exit ends the candidate's own sandbox only; the equal-to-anything result cannot
    # cross the codec to the test sandbox.
    assert verdicts(task, sandbox) == {
        "code_exit_at_import": ("failed", Reason.INVALID_CANDIDATE),
        "code_always_equal": ("failed", Reason.TESTS_FAILED),
    }


def test_code_attacks_fool_an_in_process_harness():
    task = example_task("python-functions/roman-to-int")
    attacks = attacks_by_name(task)

    assert naive_harness(task, attacks["code_exit_at_import"])
    assert naive_harness(task, attacks["code_always_equal"])
    assert not naive_harness(task, Candidate.of_code("def roman_to_int(s):\n    return 0\n"))


# --- repo_patch ---------------------------------------------------------------------------------


def test_repo_attacks_fail_on_a_task_with_protected_tests(sandbox):
    task = example_task("tiny-repo-patch/median-even-count")
    attacks = attacks_by_name(task)
    # The rewrite targets the repository's own tests (known from the public assets), not
    # the file the sealed test patch adds.
    assert "tests/test_stats.py" in attacks["repo_rewrite_tests"].text
    assert "test_median_even" not in attacks["repo_rewrite_tests"].text

    # The report rewrite goes where the policy lets a patch go: the package's own code.
    assert "diff --git a/src/calc/__init__.py " in attacks["repo_forced_outcome"].text

    # Tests, conftest.py and pytest.py are sensitive paths: refused before any sandbox. The
    # package code runs inside pytest and forges every report: the guard's honeypot passes.
    assert verdicts(task, sandbox) == {
        **{
            name: ("failed", Reason.POLICY_DENIED)
            for name in ("repo_rewrite_tests", "repo_root_conftest", "repo_shadow_pytest")
        },
        "repo_forced_outcome": ("failed", Reason.TAMPER_DETECTED),
    }


def test_forcing_reports_passes_a_test_command_pytest_runs_under(sandbox, tmp_path):
    # The runner guards a command that is pytest itself; one run through a shell is graded
    # by its exit status alone, which the forged reports make 0. The health check reports
    # exactly this weakness of such a task.
    root = tmp_path / "proj"
    (root / "mylib").mkdir(parents=True)
    (root / "mylib/__init__.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests").mkdir()
    (root / "tests/test_add.py").write_text(
        "from mylib import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    head = git(root, "rev-parse", "HEAD").strip()
    command = ["sh", "-c", "python3 -m pytest -q -p no:cacheprovider tests"]
    task = repo_task(root, head, command=command)
    attack = attacks_by_name(task)["repo_forced_outcome"]
    settings = VerifierSettings(sandbox=sandbox)

    forged = verify(task, attack, settings)
    readme = "diff --git a/README b/README\nnew file mode 100644\n--- /dev/null\n+++ b/README\n"
    unfixed = verify(task, Candidate.of_patch(readme + "@@ -0,0 +1 @@\n+x\n"), settings)

    assert "a/mylib/__init__.py" in attack.text
    assert forged.status == "passed", (forged.reason, forged.stderr[-500:])
    assert unfixed.status == "failed"


CHECK_SCRIPT = "from mylib import add\n\nassert add(2, 3) == 5\n"


def test_rewriting_the_tests_passes_when_the_task_leaves_them_unprotected(sandbox, tmp_path):
    # A task whose test is a plain script (not under tests/, not named test_*): nothing
    # protects it, so a patch rewriting it passes. The health check reports exactly this.
    root = tmp_path / "proj"
    (root / "mylib").mkdir(parents=True)
    (root / "mylib/__init__.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "check_add.py").write_text(CHECK_SCRIPT)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    head = git(root, "rev-parse", "HEAD").strip()
    task = repo_task(root, head, command=["python3", "check_add.py"])
    attack = attacks_by_name(task)["repo_rewrite_tests"]

    verdict = verify(task, attack, VerifierSettings(sandbox=sandbox))

    assert "check_add.py" in attack.text
    assert verdict.status == "passed", (verdict.reason, verdict.stderr[-500:])


# --- terminal_task ------------------------------------------------------------------------------


def test_terminal_attacks_fail_on_a_trusted_pytest_checker(sandbox):
    task = example_task("terminal-files/organise-logs")

    assert_all_fail(verdicts(task, sandbox), 3)


@pytest.mark.parametrize(
    ("attack", "command"),
    [
        # Trusts a report file in the workspace.
        (
            "terminal_forged_report",
            "import json, sys; sys.exit(0 if json.load(open('result.json'))['passed'] else 1)",
        ),
        # Imports json with the workspace first on sys.path (python -c puts it there).
        (
            "terminal_shadow_modules",
            "import json, sys; sys.exit(0 if json.load(open('settings.json')) else 1)",
        ),
    ],
    ids=["forged_report", "shadow_modules"],
)
def test_terminal_attacks_pass_a_command_checker_that_trusts_the_workspace(
    sandbox, attack, command
):
    checker = {"command": ["python3", "-c", command], "workdir": "/workspace"}
    task = terminal_lanes(checker)  # and no expected_state to compare with
    candidate = attacks_by_name(task)[attack]

    verdict = verify(task, candidate, VerifierSettings(sandbox=sandbox))

    assert verdict.status == "passed", (verdict.reason, verdict.stderr[-500:])
    null = verify(task, Candidate.of_workspace({}), VerifierSettings(sandbox=sandbox))
    assert null.status == "failed"


def test_forged_reports_claim_a_pass():
    files = attacks_by_name(terminal_lanes({"command": "true"}))["terminal_forged_report"].files
    assert json.loads(files["result.json"].content)["passed"] is True
    assert files["reward.txt"].content == b"1\n"


def test_repo_attacks_are_canonical_patches_that_apply_to_the_public_repository(tmp_path):
    task = example_task("tiny-repo-patch/median-even-count")
    repo = tmp_path / "repo"
    for item in task.files["assets"]:
        target = repo / item.path.split("/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(item.source.read_bytes())
    git(repo, "init", "-q")

    for attack in attack_candidates(task):
        patch = tmp_path / f"{attack.name}.patch"
        patch.write_text(attack.candidate.text)
        git(repo, "apply", "--check", str(patch))


def test_a_repository_baked_into_the_image_gets_no_rewrite_of_unknown_files():
    task = TaskLanes(
        "t",
        "repo_patch",
        {"repo": "x", "base_commit": "abc", "instructions": "fix it"},
        {"tests": {"source": "command", "command": ["pytest", "tests/test_a.py"]}},
        {"gold_patch": "diff --git a/x b/x\n"},
        environment={"workdir": "/testbed"},
        metadata={"fail_to_pass": ["tests/test_a.py::test_one"]},
    )

    names = [attack.name for attack in attack_candidates(task)]

    assert names == ["repo_root_conftest", "repo_shadow_pytest"]


def test_paths_are_read_from_names_only():
    # The test patch's content (sealed) never reaches an attack; only the paths it names do.
    task = example_task("tiny-repo-patch/median-even-count")
    patch = task.evaluation_inputs["tests"]["test_patch"]["patch"]
    body = [line[1:] for line in patch.splitlines() if line.startswith("+") and len(line) > 12]
    for attack in attack_candidates(task):
        assert not any(line in attack.candidate.text for line in body if "median" in line)
