"""Mutants of pack health: where the static leak audit looks, and the adversarial smoke's
attacks. Each removes one reach of the audit (or one attack) and names the tests that find a
leak (or a weak verifier) only through it."""

from __future__ import annotations

from tests.mutation.engine import Mutant

AUDIT = "verifiers/leak_audit/audit.py"
CONTAINERS = "verifiers/leak_audit/containers.py"
TEXT = "verifiers/leak_audit/text.py"
REPORT = "verifiers/leak_audit/report.py"
ADVERSARIAL = "verifiers/adversarial.py"
REACH_TESTS = "tests/verifiers/test_leak_audit_reach.py"
AUDIT_TESTS = "tests/verifiers/test_leak_audit.py"
ADVERSARIAL_TESTS = "tests/verifiers/test_adversarial.py"

HEALTH_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="leak-audit-short-values-in-files",
        module=AUDIT,
        defence="a value too short for a passage is looked for whole in public files too",
        find="            self.has_short = True\n",
        replace="            self.has_short = False\n",
        tests=(REACH_TESTS, "-k short_answer_in_a_public_file"),
        fast=True,
    ),
    Mutant(
        id="leak-audit-nested-containers",
        module=CONTAINERS,
        defence="a compressed stream holding an archive is walked into",
        find="        if container_kind(head) is not None:",
        replace="        if False:",
        tests=(REACH_TESTS, "-k nested_containers"),
    ),
    Mutant(
        id="leak-audit-text-of-binary-files",
        module=CONTAINERS,
        defence="a binary file's printable runs are audited as text",
        find="            reader.text(carried, runs)",
        replace="            pass",
        tests=(REACH_TESTS, "-k sqlite"),
    ),
    Mutant(
        id="leak-audit-compressed-tar-stops",
        module=CONTAINERS,
        defence="a compressed tar is not decompressed on past a member read in part",
        find="                if member.read(1):",
        replace="                if False:",
        tests=(REACH_TESTS, "-k stops_after"),
    ),
    Mutant(
        id="leak-audit-json-documents",
        module=AUDIT,
        defence="a public JSON document (a notebook) is read as its strings",
        find="        if complete and self.json:",
        replace="        if False:",
        tests=(REACH_TESTS, "-k notebook"),
    ),
    Mutant(
        id="leak-audit-public-dict-keys",
        module=TEXT,
        defence="the keys of public values are public text",
        find="                stack.extend(key for key in item if isinstance(key, str))",
        replace="                pass",
        tests=(REACH_TESTS, "-k dict_key"),
    ),
    Mutant(
        id="leak-audit-boilerplate-dropped",
        module=AUDIT,
        defence="passages shared by many sealed values do not dilute a leaked value's share",
        find="        self._drop_boilerplate()",
        replace="        pass",
        tests=(REACH_TESTS, "-k boilerplate"),
    ),
    Mutant(
        id="leak-audit-small-eval-copies",
        module=AUDIT,
        defence="a small eval-root file copied with other spacing is the same file",
        find="            if text_digest:",
        replace="            if False:",
        tests=(REACH_TESTS, "-k line_endings"),
    ),
    Mutant(
        id="leak-audit-mc-answers-outside-tasks",
        module=REPORT,
        defence="a multiple-choice answer is exempt only within tasks, not in files",
        find='        return not (self.tasks_state_it and place[0] == "task")',
        replace="        return not self.tasks_state_it",
        tests=(REACH_TESTS, "-k multiple_choice"),
    ),
    Mutant(
        id="leak-audit-json-nesting-no-crash",
        module=AUDIT,
        defence="a JSON file nested past what Python parses is no crash",
        find="        except (ValueError, RecursionError):",
        replace="        except ValueError:",
        tests=(REACH_TESTS, "-k json_nested"),
    ),
    Mutant(
        id="leak-audit-file-cpu-budget",
        module=CONTAINERS,
        defence="a file that costs CPU without giving content (a gzip-member bomb) is stopped",
        find="        if now > self.cpu_start + allowed:",
        replace="        if False:",
        tests=(REACH_TESTS, "-k empty_gzip_members"),
    ),
    Mutant(
        id="leak-audit-decompression-charged",
        module=CONTAINERS,
        defence="every decompressed byte counts, also what tarfile skips over",
        find="        self.budget.charge(len(data))",
        replace="        pass",
        tests=(REACH_TESTS, "-k skipped_by_decompressing"),
    ),
    Mutant(
        id="leak-audit-tar-entry-cap",
        module=CONTAINERS,
        defence="entries of any type count against a tar's cap",
        find="                if entries > MAX_ARCHIVE_MEMBERS + MAX_NAMES_PAST_CAP:",
        replace="                if False:",
        tests=(REACH_TESTS, "-k entries_past_the_caps"),
    ),
    Mutant(
        id="leak-audit-canonical-forms",
        module=TEXT,
        defence="text is compared in NFKC with invisible characters dropped",
        find='    return unicodedata.normalize("NFKC", text.translate(_INVISIBLE))',
        replace="    return text",
        tests=(REACH_TESTS, "-k another_encoding_or_form"),
    ),
    Mutant(
        id="leak-audit-lzma-header-checked",
        module=CONTAINERS,
        defence="raw data starting with 93 is not taken for an lzma file",
        find="    if _lzma_alone(head):",
        replace=r'    if head[:3] == b"\x5d\x00\x00":',
        tests=(REACH_TESTS, "-k lzma_header"),
    ),
    Mutant(
        id="leak-audit-binary-files-read-whole",
        module=CONTAINERS,
        defence="a binary file past 8 MB is read to its end, in windows",
        find="MAX_BINARY_BYTES = 256 * 1024 * 1024",
        replace="MAX_BINARY_BYTES = 8 * 1024 * 1024",
        tests=(REACH_TESTS, "-k big_binary_file"),
    ),
    Mutant(
        id="leak-audit-embedded-streams-past-noise",
        module=CONTAINERS,
        defence="embedded zlib streams are looked for past the header-like pairs of noise",
        find="MAX_EMBEDDED_STREAMS = 4096",
        replace="MAX_EMBEDDED_STREAMS = 256",
        tests=(REACH_TESTS, "-k behind_a_big_image"),
    ),
    Mutant(
        id="leak-audit-rejected-answers-no-secret",
        module=AUDIT,
        defence="answers a rubric rejects are not looked for as secrets",
        find='NOT_SECRET_KEYS = frozenset({"rejected_answers"})',
        replace="NOT_SECRET_KEYS = frozenset()",
        tests=(REACH_TESTS, "-k rejected_answer"),
    ),
    Mutant(
        id="leak-audit-terminal-expected-outputs",
        module=AUDIT,
        defence="a terminal task's expected output found in public is a warning, not a failure",
        find='        return any(top == named or top.startswith(named + "/") for named in self',
        replace="        return False and any(top == named for named in self",
        tests=(REACH_TESTS, "-k expected_output_derived"),
    ),
    Mutant(
        id="leak-audit-prose-view",
        module=TEXT,
        defence="public text is also read as prose, without comment, string and emphasis marks",
        find="    for view in (unmarked(text), decoded(text), prose(text)):",
        replace="    for view in (unmarked(text), decoded(text)):",
        tests=(REACH_TESTS, "-k wrapped_in_comments"),
    ),
    Mutant(
        id="leak-audit-prose-linear-time",
        module=TEXT,
        defence="the prose view strips line ends in linear time (a regex backtracked on blanks)",
        find='    result = "\\n".join(_bare_line(line) for line in result.split("\\n"))',
        replace=(
            '    result = re.sub(r"[ \\t]*(?:\\*/|[\\"\'`][ \\t]*[+,;]?|\\+|\\\\)?[ \\t]*$", "",'
            " result, flags=re.M)"
        ),
        tests=(REACH_TESTS, "-k long_run_of_blanks"),
    ),
    Mutant(
        id="leak-audit-zstd-truncation",
        module=CONTAINERS,
        defence="a Zstandard stream cut short is damaged, not read and empty",
        find='raise zstandard.ZstdError("the Zstandard stream ends inside a frame")',
        replace="return 0",
        tests=(REACH_TESTS, "-k truncated_zstandard"),
    ),
    Mutant(
        id="leak-audit-public-keys-shown",
        module=AUDIT,
        defence="an evaluation input equal to a public key is no secret",
        find="        shown = public_strings(task) | {text for _, text in pieces}",
        replace="        shown = public_strings(task)",
        tests=(REACH_TESTS, "-k equal_to_a_public_key"),
    ),
    Mutant(
        id="adversarial-vocabulary-spray",
        module=ADVERSARIAL,
        defence="text tasks are attacked with a task-independent vocabulary spray",
        find="                Candidate.of_text(VOCABULARY_SPRAY),",
        replace="                Candidate.of_text(JUDGE_INJECTION),",
        tests=(ADVERSARIAL_TESTS, "-k vocabulary_spray_passes"),
    ),
)
