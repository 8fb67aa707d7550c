"""The health rules shared by the site's checks and ``audit_pack`` (verifiers.pack_findings)."""

from __future__ import annotations

import pytest

from verifiers import pack_findings
from verifiers.pack_findings import (
    FAILING,
    INFO,
    WARNING,
    Finding,
    Outcome,
    adversarial_findings,
    check_counts,
    null_findings,
    oracle_findings,
    repeat_findings,
    report_verdict,
    timing_summary,
)
from verifiers.verdict import Reason, error, failed, passed

PASSED = Outcome("passed", None, 0.5)
FAILED = Outcome("failed", Reason.WRONG_ANSWER, 0.2, output="expected 4, got 5")
ERRORED = Outcome("error", Reason.SANDBOX_UNAVAILABLE, 0.0, output="no backend")
PENDING = Outcome("pending", Reason.NO_VERIFIER, 0.0)


def codes(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.check, f.code, f.severity) for f in findings]


def test_an_outcome_keeps_the_verdicts_status_reason_time_and_output():
    verdict = failed(
        Reason.TESTS_FAILED,
        stdout="out",
        stderr="err",
        details={"failed_test_line": 3},
        duration_seconds=1.25,
    )

    outcome = Outcome.of_verdict(verdict)

    assert (outcome.status, outcome.reason, outcome.seconds) == ("failed", "tests_failed", 1.25)
    assert "out" in outcome.output and "err" in outcome.output
    assert '"failed_test_line": 3' in outcome.output
    assert Outcome.of_verdict(passed()).output == ""


def test_the_oracle_must_pass():
    assert oracle_findings("t1", PASSED) == []

    (finding,) = oracle_findings("t1", FAILED)

    assert codes([finding]) == [("oracle", "oracle_failed", FAILING)]
    assert finding.task_id == "t1" and "wrong_answer" in finding.message
    # Verifier output may echo test source or inputs: sealed, never in the message.
    assert finding.sealed_evidence == {"output": "expected 4, got 5"}
    assert "expected 4" not in finding.message and "expected 4" not in str(finding.evidence)


def test_a_task_without_reference_or_verifier_is_unverifiable_info():
    assert codes(oracle_findings("t1", None)) == [("oracle", "unverifiable", INFO)]
    assert codes(oracle_findings("t1", PENDING)) == [("oracle", "unverifiable", INFO)]


def test_an_error_is_a_failing_check_error_not_a_verdict_on_the_task():
    (finding,) = oracle_findings("t1", ERRORED)

    assert codes([finding]) == [("oracle", "check_error", FAILING)]
    assert "could not be checked" in finding.message and "sandbox_unavailable" in finding.message
    assert codes(null_findings("t1", ERRORED)) == [("null", "check_error", FAILING)]
    assert codes(adversarial_findings("t1", "a", ERRORED)) == [
        ("adversarial", "check_error", FAILING)
    ]


def test_the_empty_candidate_must_not_pass():
    assert null_findings("t1", FAILED) == []
    assert null_findings("t1", None) == []  # a family without an empty candidate

    assert codes(null_findings("t1", PASSED)) == [("null", "null_passed", FAILING)]


def test_a_flip_between_two_reference_runs_is_flaky():
    assert repeat_findings("t1", PASSED, PASSED) == []
    assert repeat_findings("t1", FAILED, FAILED) == []  # the oracle check reports that one
    assert repeat_findings("t1", None, None) == []

    (finding,) = repeat_findings("t1", PASSED, FAILED)

    assert codes([finding]) == [("repeat", "flaky", FAILING)]
    assert "passed once and failed" in finding.message
    assert finding.evidence["first"]["status"] == "passed"
    assert finding.evidence["second"]["reason"] == Reason.WRONG_ANSWER


def test_an_infrastructure_error_is_not_a_flip():
    # The first run's error is the oracle check's finding; the second's is this check's.
    assert repeat_findings("t1", ERRORED, PASSED) == []
    assert codes(repeat_findings("t1", PASSED, ERRORED)) == [("repeat", "check_error", FAILING)]


def test_a_passing_attack_is_a_verifier_weakness_named_in_the_message():
    assert adversarial_findings("t1", "mc_every_letter", FAILED) == []
    assert adversarial_findings("t1", "mc_every_letter", None) == []

    (finding,) = adversarial_findings(
        "t1", "mc_every_letter", PASSED, "answer spraying: every choice letter"
    )

    assert codes([finding]) == [("adversarial", "attack_passed", FAILING)]
    assert "mc_every_letter" in finding.message and "answer spraying" in finding.message
    assert finding.evidence["attack"] == "mc_every_letter"


def finding(severity: str, check: str = "leak") -> Finding:
    return Finding(check=check, code="x", severity=severity, task_id=None, message="m")


@pytest.mark.parametrize(
    ("severities", "verdict"),
    [
        ([], "healthy"),
        ([INFO, INFO], "healthy"),
        ([INFO, WARNING], "warnings"),
        ([WARNING, FAILING, INFO], "failing"),
    ],
)
def test_the_report_verdict_is_the_worst_severity_info_never_counts(severities, verdict):
    assert report_verdict(finding(s) for s in severities) == verdict


def test_counts_name_every_check_with_what_it_checked_and_found():
    findings = [
        finding(FAILING, "oracle"),
        finding(INFO, "oracle"),
        finding(WARNING, "leak"),
        finding(WARNING, "leak"),
    ]

    counts = check_counts(findings, {"oracle": 3, "leak": 3, "null": 3})

    assert set(counts) == set(pack_findings.CHECKS)
    assert counts["oracle"] == {"checked": 3, "failing": 1, "warning": 0, "info": 1}
    assert counts["leak"] == {"checked": 3, "failing": 0, "warning": 2, "info": 0}
    assert counts["null"] == {"checked": 3, "failing": 0, "warning": 0, "info": 0}
    assert counts["adversarial"]["checked"] == 0


def test_timing_names_the_five_slowest_tasks():
    durations = {f"t{i}": float(i) for i in range(1, 8)}

    summary = timing_summary(durations)

    assert summary["median_seconds"] == 4.0
    assert summary["total_seconds"] == 28.0
    assert [item["task_id"] for item in summary["slowest"]] == ["t7", "t6", "t5", "t4", "t3"]
    assert summary["slowest"][0] == {"task_id": "t7", "seconds": 7.0}
    assert timing_summary({}) == {"median_seconds": 0.0, "total_seconds": 0.0, "slowest": []}


def test_an_error_verdict_maps_to_a_check_error():
    outcome = Outcome.of_verdict(error(Reason.INFRASTRUCTURE))

    assert codes(oracle_findings("t1", outcome)) == [("oracle", "check_error", FAILING)]
