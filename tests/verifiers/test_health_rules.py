"""The health rules shared by the site's checks and ``audit_pack`` (verifiers.pack_findings)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from verifiers import pack_findings
from verifiers.pack_findings import (
    FAILING,
    INFO,
    NOT_CHECKED,
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


NOT_CHECKED_CODE = "not_checked_infrastructure"


def test_a_check_our_infrastructure_could_not_run_is_not_checked_never_failing():
    (finding,) = oracle_findings("t1", ERRORED)

    assert codes([finding]) == [("oracle", NOT_CHECKED_CODE, NOT_CHECKED)]
    assert finding.message.startswith("not checked — infrastructure")
    assert "not the pack" in finding.message and "failing" not in finding.message
    # The verifier's output stays sealed; the public cause is the site's own words.
    assert "no backend" not in finding.message and "no backend" not in str(finding.evidence)
    assert finding.sealed_evidence == {"output": "no backend"}
    assert codes(null_findings("t1", ERRORED)) == [("null", NOT_CHECKED_CODE, NOT_CHECKED)]
    assert codes(adversarial_findings("t1", "a", ERRORED)) == [
        ("adversarial", NOT_CHECKED_CODE, NOT_CHECKED)
    ]
    gone = Outcome("error", Reason.RETRIES_EXHAUSTED, 0.0)
    assert codes(oracle_findings("t1", gone)) == [("oracle", NOT_CHECKED_CODE, NOT_CHECKED)]


@pytest.mark.parametrize(
    "reason", [Reason.INFRASTRUCTURE, Reason.TASK_MISCONFIGURED, Reason.NO_VERIFIER]
)
def test_an_error_the_pack_can_cause_stays_a_failing_check_error(reason):
    # A checker command that does not exist, an image without python3, a task set up wrong:
    # the pack's doing as much as ours, so it is the author's to read, and it holds the gate.
    outcome = Outcome("error", reason, 0.0, output="Traceback ...")

    (finding,) = oracle_findings("t1", outcome)

    assert codes([finding]) == [("oracle", "check_error", FAILING)]
    assert reason in finding.message


def test_the_cause_names_the_image_the_host_and_what_an_operator_can_do():
    image = pack_findings.infrastructure_cause(
        Reason.SANDBOX_UNAVAILABLE, backend="docker", image="python:3.12-slim", host="w1"
    )
    assert "python:3.12-slim" in image and "w1" in image and "make sandbox-image" in image
    assert "SECUREBENCH_DEFAULT_IMAGE" in image
    none = pack_findings.infrastructure_cause(Reason.SANDBOX_UNAVAILABLE, host="w1")
    assert "No sandbox backend" in none and "bubblewrap" in none
    gone = pack_findings.infrastructure_cause(Reason.RETRIES_EXHAUSTED, host="w1")
    assert "stopped before it finished" in gone
    (finding,) = oracle_findings("t1", replace(ERRORED, cause=image))
    assert image in finding.message and finding.evidence["cause"] == image


def test_not_checked_is_neither_healthy_nor_failing_and_not_counted_as_checked():
    not_checked = oracle_findings("t1", ERRORED)
    warned = Finding("leak", "w", WARNING, "t2", "")
    failing = Finding("leak", "f", FAILING, "t2", "")

    assert report_verdict(not_checked) == NOT_CHECKED
    assert report_verdict([*not_checked, warned]) == NOT_CHECKED
    # A fault the pack is proved to have still says so.
    assert report_verdict([*not_checked, failing]) == FAILING
    counts = check_counts(not_checked, {"oracle": 3})
    assert counts["oracle"] == {"checked": 2, FAILING: 0, NOT_CHECKED: 1, WARNING: 0, INFO: 0}


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
    assert codes(repeat_findings("t1", PASSED, ERRORED)) == [
        ("repeat", NOT_CHECKED_CODE, NOT_CHECKED)
    ]


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
    none = {"not_checked": 0}
    assert counts["oracle"] == {"checked": 3, "failing": 1, "warning": 0, "info": 1, **none}
    assert counts["leak"] == {"checked": 3, "failing": 0, "warning": 2, "info": 0, **none}
    assert counts["null"] == {"checked": 3, "failing": 0, "warning": 0, "info": 0, **none}
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
