"""Mutants of sealed access and of the scrubber: the audited SealedReader, what stored verifier
output redacts, and the verifier facts a result page shows without the privilege."""

from __future__ import annotations

from tests.mutation.engine import Mutant

PRIVILEGED = "runs/privileged.py"
REDACTION = "verifiers/redaction.py"
SCORING = "verifiers/scoring.py"
TRUSTED_RUNNER = "verifiers/trusted_runner.py"
CODE = "verifiers/families/code_completion.py"
SELECTORS = "runs/selectors.py"
SEALED_READS = "tests/security/test_sealed_reads.py"
LEAK = "tests/security/test_leak.py"
REDACTION_TESTS = "tests/verifiers/test_redaction.py"
SCRUBBER_TESTS = "tests/security/test_scrubber_defences.py"
CODE_TESTS = "tests/verifiers/test_code_completion.py"

# An audit call that does nothing: the read goes on, unrecorded.
_NO_AUDIT = "(lambda *_args, **_fields: None)("

SEALED_MUTANTS: tuple[Mutant, ...] = (
    # --- the sealed reader (runs/privileged.py) ------------------------------------------------
    Mutant(
        id="sealed-reader-privilege",
        module=PRIVILEGED,
        defence="opening a SealedReader checks the privilege and debug mode",
        find="        self.mode = require_privileged(request, contract_version.pack)\n",
        replace=('        self.mode = DebugMode(reason="", expires_at=timezone.now())\n'),
        tests=(SEALED_READS,),
        fast=True,
    ),
    Mutant(
        id="sealed-reader-cross-pack",
        module=PRIVILEGED,
        defence="a reader opened for one version reads no task of another",
        find="if task.contract_version_id != self.contract_version.pk:",
        replace="if False:",
        tests=(SEALED_READS, "-k another"),
    ),
    Mutant(
        id="sealed-reader-audits-every-read",
        module=PRIVILEGED,
        defence="every sealed read records an AuditEvent",
        find="    def _audit(self, action: str, **fields: Any) -> None:\n        audit(",
        replace=f"    def _audit(self, action: str, **fields: Any) -> None:\n        {_NO_AUDIT}",
        tests=(SEALED_READS,),
    ),
    Mutant(
        id="sealed-reader-audits-resource",
        module=PRIVILEGED,
        defence="reading a sealed resource value is audited",
        find="        self._audit(\n            AuditAction.VIEW_RESOURCE,",
        replace=f"        {_NO_AUDIT}\n            AuditAction.VIEW_RESOURCE,",
        tests=(SEALED_READS,),
    ),
    Mutant(
        id="sealed-reader-audits-file",
        module=PRIVILEGED,
        defence="reading a sealed file is audited",
        find="        self._audit(\n            AuditAction.VIEW_FILE,",
        replace=f"        {_NO_AUDIT}\n            AuditAction.VIEW_FILE,",
        tests=(SEALED_READS, LEAK, "-k audited or debug_mode"),
    ),
    Mutant(
        id="sealed-reader-audits-file-list",
        module=PRIVILEGED,
        defence="listing the sealed files is audited",
        find="        self._audit(\n            AuditAction.LIST_FILES,",
        replace=f"        {_NO_AUDIT}\n            AuditAction.LIST_FILES,",
        tests=(SEALED_READS, LEAK, "-k audited or debug_mode"),
    ),
    # --- what stored output redacts (verifiers/redaction.py) ----------------------------------
    Mutant(
        id="redaction-sealed-inputs",
        module=REDACTION,
        defence="evaluation-input strings the agent was not shown are redacted",
        find=(
            "    kept = {secret for secret in secrets if secret not in public and "
            "secret.strip() not in public}"
        ),
        replace="    kept: set[str] = set()",
        tests=(REDACTION_TESTS,),
        fast=True,
    ),
    Mutant(
        id="redaction-hidden-always",
        module=REDACTION,
        defence="hidden values stay redacted even when they equal a public string",
        find="    return sorted({*hidden, *sealed_only(inputs, public_strings(task))}",
        replace="    return sorted({*sealed_only([*hidden, *inputs], public_strings(task))}",
        tests=(REDACTION_TESTS,),
    ),
    # --- the scrubbing of stored output (scoring, workspace, code_completion) -----------------
    Mutant(
        id="scoring-scrubs-stdout",
        module=SCORING,
        defence="stored stdout is scrubbed once more before it is saved",
        find="stdout=cap_text(scrub(verdict.stdout, secrets), STORED_OUTPUT_CHARS),",
        replace="stdout=cap_text(verdict.stdout, STORED_OUTPUT_CHARS),",
        tests=(SCRUBBER_TESTS,),
    ),
    Mutant(
        id="scoring-scrubs-stderr",
        module=SCORING,
        defence="stored stderr is scrubbed once more before it is saved",
        find="stderr=cap_text(scrub(verdict.stderr, secrets), STORED_OUTPUT_CHARS),",
        replace="stderr=cap_text(verdict.stderr, STORED_OUTPUT_CHARS),",
        tests=(REDACTION_TESTS,),
    ),
    Mutant(
        id="scoring-scrubs-details",
        module=SCORING,
        defence="stored details are scrubbed value by value",
        find="details=_scrub_details(verdict.details, secrets) if secrets else verdict.details,",
        replace="details=verdict.details,",
        tests=(REDACTION_TESTS, SCRUBBER_TESTS),
    ),
    Mutant(
        id="workspace-scrubs-logs",
        module=TRUSTED_RUNNER,
        defence="sandbox logs of workspace families are scrubbed of sealed strings",
        find=(
            '"stdout": scrub(cap_text(result.stdout.decode("utf-8", "replace"), 64_000), '
            "secret_list),"
        ),
        replace='"stdout": cap_text(result.stdout.decode("utf-8", "replace"), 64_000),',
        tests=(SCRUBBER_TESTS,),
    ),
    Mutant(
        id="code-scrubs-output",
        module=CODE,
        defence="code_completion output is scrubbed of lane values and test-source lines",
        find='cap_text(scrub(data.decode("utf-8", errors="replace"), secrets), OUTPUT_KEPT)',
        replace='cap_text(data.decode("utf-8", errors="replace"), OUTPUT_KEPT)',
        tests=(CODE_TESTS + "::test_failure_details_are_scrubbed",),
    ),
    Mutant(
        id="code-scrubs-error",
        module=CODE,
        defence="a failing test's error message is scrubbed of test-source literals",
        find='details["error"] = cap_text(scrub(result["error"], secrets), 2000)',
        replace='details["error"] = cap_text(result["error"], 2000)',
        tests=(CODE_TESTS + "::test_failure_details_are_scrubbed",),
    ),
    # --- what a result page shows without the privilege (runs/selectors.py) -------------------
    Mutant(
        id="detail-counts-not-full-details",
        module=SELECTORS,
        defence="a result page shows counts and flags of the details, never the details",
        find="    counts: dict[str, int | float | bool] = {}\n    for key, value in sorted(",
        replace=(
            "    return dict(details)\n"
            "    counts: dict[str, int | float | bool] = {}\n    for key, value in sorted("
        ),
        tests=(LEAK, "-k no_request_of_any_role"),
    ),
    Mutant(
        id="detail-counts-numbers-only",
        module=SELECTORS,
        defence="only numbers and flags pass, never a string value",
        find="        if isinstance(value, bool) or (",
        replace="        if isinstance(value, bool | str) or (",
        tests=(LEAK, "-k no_request_of_any_role"),
    ),
    Mutant(
        id="detail-counts-oracle-withheld",
        module=SELECTORS,
        defence="nothing of an oracle run's details shows (every fact of a reference solution)",
        find="    if origin == CandidateOrigin.ORACLE or not isinstance(details, dict):",
        replace="    if not isinstance(details, dict):",
        tests=(LEAK, SCRUBBER_TESTS, "-k no_request_of_any_role or oracle"),
    ),
)
