"""Mutants of repo_patch's guard against forged pytest outcomes (canary and honeypot)."""

from __future__ import annotations

from tests.mutation.engine import Mutant

REPO_PATCH = "verifiers/families/repo_patch.py"
GUARD_PLUGIN = "verifiers/families/repo_pytest_guard.py"
TAMPERING = "tests/verifiers/test_repo_tampering.py"
# Routes that forge the report while pytest still exits 1 (the exit status check alone
# cannot see them), on one backend: each distinct set runs once as a baseline.
FORGED_REPORTS = (TAMPERING, "-k bwrap and (junit-writer or report-file or forcing_every)")

REPO_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="repo-guard-honeypot",
        module=REPO_PATCH,
        defence="a honeypot reported as anything but failed is tamper_detected",
        find='    if summary["honeypot"] not in ("failed", "missing"):\n',
        replace="    if False:\n",
        tests=FORGED_REPORTS,
        fast=True,
    ),
    Mutant(
        id="repo-guard-missing",
        module=REPO_PATCH,
        defence="a planted test missing from the report (deselected, never run) is tampering",
        find='    if summary["honeypot"] == "missing" or summary["canary"] != "passed":\n',
        replace='    if summary["canary"] not in ("passed", "missing"):\n',
        tests=(TAMPERING, "-k bwrap and dropping-unknown"),
    ),
    Mutant(
        id="repo-expected-tests",
        module=REPO_PATCH,
        defence="each test the task names must be reported passed (skipped, xfailed or "
        "missing fails the candidate)",
        find="    if missed := unmet(expected or [], real):\n",
        replace="    if missed := []:\n",
        tests=(TAMPERING, "-k bwrap and (kept_from_running or command_names)"),
    ),
    Mutant(
        id="repo-guard-exit-status",
        module=REPO_PATCH,
        defence="exit status 0 beside a failed honeypot is tampering, not a test failure",
        find="    if status == 0:\n        return Reason.TAMPER_DETECTED",
        replace="    if False:\n        return Reason.TAMPER_DETECTED",
        tests=(TAMPERING, "-k bwrap and exit_status"),
    ),
    Mutant(
        id="repo-guard-hold",
        module=GUARD_PLUGIN,
        defence="the planted tests are held back from the task's own -k/-m selection",
        find="    if _planted.file_name and _planted.hold_back:\n",
        replace="    if False:\n",
        tests=(TAMPERING, "-k bwrap and selection_options"),
    ),
    Mutant(
        id="repo-guard-last",
        module=GUARD_PLUGIN,
        defence="the planted tests run last (a -x run stops at the honeypot after the rest)",
        find="        items.extend(self.held + [",
        replace="        items[:0] = (self.held + [",
        tests=(TAMPERING, "-k bwrap and selection_options"),
    ),
)
