"""Mutants of the evaluations authors bring (issue 33): the channel's checks of what a
program reports, the program's sandbox and the relay to the candidate's player, the checks of
an artifact's outputs and paths, the storing of an uploaded evaluation (immutable, by whom),
which packs it may score, whose fault a broken program is, and who reads its files."""

from __future__ import annotations

from tests.mutation.engine import Mutant

MESSAGES = "verifiers/evaluation_messages.py"
PROGRAM = "verifiers/evaluation_program.py"
RELAY = "verifiers/evaluation_relay.py"
OUTPUTS = "verifiers/artifact_outputs.py"
PATHS = "verifiers/artifact_paths.py"
ARTIFACT = "verifiers/families/artifact_task.py"
BUNDLE = "runs/bundle_artifact.py"
SCHEMAS = "packs/compiler/outputs.py"
SERVICES = "evaluations/services.py"
MANIFEST = "evaluations/manifest.py"
EXECUTION = "evaluations/execution.py"
ACCESS = "evaluations/access.py"
PRIVILEGED = "runs/privileged.py"
RUN_SERVICES = "runs/services.py"

MESSAGE_TESTS = "tests/verifiers/test_evaluation_messages.py"
PROGRAM_TESTS = "tests/verifiers/test_evaluation_program.py"
RELAY_TESTS = "tests/verifiers/test_evaluation_relay.py"
ARTIFACT_TESTS = "tests/verifiers/test_artifact_task.py"
BUNDLE_TESTS = "tests/runs/test_bundle_artifact.py"
SCHEMA_TESTS = "tests/compiler/test_required_outputs.py"
IMPORT_TESTS = "tests/evaluations/test_import_evaluation.py"
SCORING_TESTS = "tests/evaluations/test_scoring.py"
PAGE_TESTS = "tests/evaluations/test_pages.py"
READS_TESTS = "tests/evaluations/test_reads.py"

BAD_METRIC = (MESSAGE_TESTS, "-k each_bad_metric")
BAD_LINE = (MESSAGE_TESTS, "-k anything_else_is_refused")
_NO_AUDIT = "(lambda *_args, **_fields: None)("

_MESSAGE_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="evaluation-undeclared-metric",
        module=MESSAGES,
        defence="a metric name the evaluation did not declare is refused",
        find='        if metric is None:\n            return {}, f"metric {excerpt(name)}',
        replace=(
            "        if metric is None:\n            continue\n"
            '            return {}, f"metric {excerpt(name)}'
        ),
        tests=BAD_METRIC,
        fast=True,
    ),
    Mutant(
        id="evaluation-primary-required",
        module=MESSAGES,
        defence="a final message without the primary metric is refused",
        find="        if metric.primary and metric.name not in metrics:",
        replace="        if False:",
        tests=BAD_METRIC,
    ),
    Mutant(
        id="evaluation-finite-numbers",
        module=MESSAGES,
        defence="NaN and infinities are no metric value",
        find="    if not math.isfinite(number):",
        replace="    if False:",
        tests=BAD_METRIC,
    ),
    Mutant(
        id="evaluation-range-interval-ends",
        module=MESSAGES,
        defence="an interval's ends are held to the declared range like the value",
        find="        if not problem:\n            problem = _outside_range(metric, label, number)",
        replace=(
            '        if not problem and key == "value":\n'
            "            problem = _outside_range(metric, label, number)"
        ),
        tests=BAD_METRIC,
    ),
    Mutant(
        id="evaluation-range",
        module=MESSAGES,
        defence="a value outside the declared range is refused",
        find="    if (low is not None and number < low) or (high is not None and number > high):",
        replace="    if False:",
        tests=BAD_METRIC,
    ),
    Mutant(
        id="evaluation-ci-order",
        module=MESSAGES,
        defence="ci_low <= value <= ci_high",
        find="    if not low <= value <= high:",
        replace="    if False:",
        tests=BAD_METRIC,
    ),
    Mutant(
        id="evaluation-duplicate-keys",
        module=MESSAGES,
        defence="a line repeating a key is refused (no parser picks a copy)",
        find="        if key in result:\n            raise _Duplicate(key)",
        replace="        if False:\n            raise _Duplicate(key)",
        tests=BAD_LINE,
    ),
    Mutant(
        id="evaluation-deep-nesting",
        module=MESSAGES,
        defence="a nesting bomb on a line is refused, not a crash of the host",
        find="    except (ValueError, RecursionError):  # RecursionError",
        replace="    except ValueError:  # RecursionError",
        tests=BAD_LINE,
    ),
)

_PROGRAM_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="program-line-cap",
        module=PROGRAM,
        defence="a stdout line of the program is capped at 1 MiB",
        find="MAX_STDOUT_LINE = 1 * MiB",
        replace="MAX_STDOUT_LINE = 64 * MiB",
        tests=(PROGRAM_TESTS, "-k bwrap and a_bad_program and over"),
    ),
    Mutant(
        id="program-stdout-cap",
        module=PROGRAM,
        defence="the program's stdout is capped at 8 MiB in all",
        find="        if reading.stdout_bytes > MAX_STDOUT_TOTAL:",
        replace="        if False:",
        tests=(RELAY_TESTS, "-k bwrap and flooding"),
    ),
    Mutant(
        id="program-folder-links",
        module=PROGRAM,
        defence="a link to a folder in an uploaded folder is refused, never descended",
        find="                if entry.is_dir(follow_symlinks=False):",
        replace="                if entry.is_dir():",
        tests=(PROGRAM_TESTS, "-k bwrap and host_folder"),
    ),
    Mutant(
        id="program-read-only-mounts",
        module=PROGRAM,
        defence="the program's files, sealed data and inputs are mounted read-only",
        find='            Mount(root / "evaluation", EVALUATION_ROOT),',
        replace='            Mount(root / "evaluation", EVALUATION_ROOT, read_only=False),',
        tests=(PROGRAM_TESTS, "-k mounted_read_only"),
    ),
    Mutant(
        id="program-host-deadline",
        module=PROGRAM,
        defence="the host stops reading the program's stdout at its own deadline",
        find="        deadline = time.monotonic() + spec.timeout_seconds + HOST_GRACE_SECONDS",
        replace="        deadline = time.monotonic() + spec.timeout_seconds + 3600",
        tests=(PROGRAM_TESTS, "-k never_ends"),
        survivor_note=(
            "equivalent: the backend kills the program at its wall limit (the same timeout), "
            "which closes its stdout, so the host's read ends then and the backend's timed_out "
            "names the same problem; the host's own deadline only bounds a backend that failed "
            "to kill (test_a_program_that_never_ends_times_out checks the outcome and its time)"
        ),
    ),
    Mutant(
        id="program-stdin-closed",
        module=PROGRAM,
        defence="without a player the program's stdin is closed (it reads EOF, never blocks)",
        find="            _close(process.stdin)  # nothing will ever be written",
        replace="            pass  # nothing will ever be written",
        tests=(PROGRAM_TESTS, "-k bwrap and empty_stdin"),
    ),
    Mutant(
        id="program-no-player-no-requests",
        module=PROGRAM,
        defence="to_candidate is the program's error when the evaluation declares no player",
        find="        elif self.player is None:\n            reading.problem = (",
        replace='        elif self.player is None:\n            reading.problem = "" and (',
        tests=(PROGRAM_TESTS, "-k bwrap and a_bad_program and candidate_program"),
    ),
    Mutant(
        id="program-one-final",
        module=PROGRAM,
        defence="a second final message is refused (the first one is not replaced)",
        find="        elif reading.final is not None:\n",
        replace="        elif reading.final is not None and message.kind != FINAL:\n",
        tests=(PROGRAM_TESTS, "-k bwrap and a_bad_program and more"),
    ),
)

_RELAY_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="relay-player-reply-timeout",
        module=RELAY,
        defence="each player reply is awaited for the reply timeout only",
        find="        deadline = time.monotonic() + self._program.reply_timeout_seconds",
        replace="        deadline = time.monotonic() + 3600",
        tests=(RELAY_TESTS, "-k bwrap and never_answers"),
    ),
    Mutant(
        id="relay-late-player-killed",
        module=RELAY,
        defence="a player that missed its reply is killed (a late line answers nothing)",
        find="        except DeadlinePassed:\n            return self._lose(TIMEOUT)",
        replace=(
            "        except DeadlinePassed:\n"
            '            return {"from_candidate": None, "problem": TIMEOUT}'
        ),
        tests=(RELAY_TESTS, "-k bwrap and late_reply"),
        fast=True,
    ),
    Mutant(
        id="relay-overlong-player-killed",
        module=RELAY,
        defence="a player whose reply is over the cap is killed",
        find="        except FrameTooLarge:\n            return self._lose(TOO_LONG)",
        replace=(
            "        except FrameTooLarge:\n"
            '            return {"from_candidate": None, "problem": TOO_LONG}'
        ),
        tests=(RELAY_TESTS, "-k bwrap and broken_player"),
        survivor_note=(
            "equivalent: the line reader keeps the overlong bytes, so every later read of that "
            "player is refused as too_long as well (never a late or partial answer), and the "
            "call's end kills the player whatever happened; the early kill only frees its CPU "
            "sooner (relay-player-line-cap and relay-late-player-killed are killed)"
        ),
    ),
    Mutant(
        id="relay-player-line-cap",
        module=RELAY,
        defence="a player's reply line is capped at 64 KiB",
        find="            line = self._reader.read_line(deadline, MAX_LINE_BYTES)",
        replace="            line = self._reader.read_line(deadline, 1000 * MAX_LINE_BYTES)",
        tests=(RELAY_TESTS, "-k bwrap and broken_player"),
    ),
    Mutant(
        id="relay-restart-cap",
        module=RELAY,
        defence="restarts of the player are capped per call",
        find="        if self.restarts >= MAX_RESTARTS:",
        replace="        if False:",
        tests=(RELAY_TESTS, "-k bwrap and restarts"),
    ),
    Mutant(
        id="relay-player-sees-no-evaluation",
        module=RELAY,
        defence="/evaluation (program, sealed data, input) is kept out of the player's sandbox",
        find="            work_files=self._candidate_dir,\n",
        replace=(
            "            work_files=self._candidate_dir,\n"
            '            mounts=(__import__("verifiers.sandbox.base", fromlist=["Mount"]).Mount(\n'
            '                self._candidate_dir.parent.parent / "evaluation", "/evaluation"),),\n'
        ),
        tests=(RELAY_TESTS, "-k bwrap and sealed_data"),
    ),
    Mutant(
        id="relay-command-file-inside",
        module=RELAY,
        defence="the command file's name may not climb out of the candidate's files",
        find="    unsafe = unsafe_relative_path(name)\n",
        replace='    unsafe = ""\n',
        tests=(MESSAGE_TESTS, "-k command_file"),
    ),
    Mutant(
        id="relay-command-file-link",
        module=RELAY,
        defence="a command file that is a link is refused",
        find="    if path.is_symlink() or not path.is_file():",
        replace="    if not path.is_file():",
        tests=(MESSAGE_TESTS, "-k command_file"),
    ),
    Mutant(
        id="relay-command-file-size",
        module=RELAY,
        defence="a command file over 1 KiB is refused",
        find="    if path.stat().st_size > MAX_COMMAND_FILE_BYTES:",
        replace="    if False:",
        tests=(MESSAGE_TESTS, "-k command_file"),
    ),
    Mutant(
        id="relay-command-file-nul",
        module=RELAY,
        defence="a command file holding a NUL byte is refused",
        find='    if b"\\0" in data:',
        replace="    if False:",
        tests=(MESSAGE_TESTS, "-k command_file"),
    ),
)

_ARTIFACT_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="outputs-nesting-scan",
        module=OUTPUTS,
        defence="nesting is measured by a flat scan before any parser or validator recurses",
        find="    if json_nesting_exceeds(text, MAX_JSON_DEPTH):",
        replace="    if False:",
        tests=(ARTIFACT_TESTS, "-k nesting_bomb"),
    ),
    Mutant(
        id="outputs-jsonl-schema-every-line",
        module=OUTPUTS,
        defence="every JSONL line is held to the schema, not only the first",
        find='            problem = _document_problem(line, validator, where=f"line {number}")',
        replace=(
            "            problem = _document_problem(\n"
            '                line, validator if number == 1 else None, where=f"line {number}"\n'
            "            )"
        ),
        tests=(ARTIFACT_TESTS, "-k jsonl_line_failing"),
    ),
    Mutant(
        id="outputs-max-bytes",
        module=OUTPUTS,
        defence="an output over its max_bytes is output_too_large",
        find="    if size <= rule.max_bytes:",
        replace="    if True:",
        tests=(ARTIFACT_TESTS, "-k over_max_bytes"),
        fast=True,
    ),
    Mutant(
        id="outputs-nan-refused",
        module=OUTPUTS,
        defence="NaN and Infinity are no JSON (Python's parser takes them)",
        find="        value = json.loads(text, parse_constant=_refuse_constant)",
        replace="        value = json.loads(text)",
        tests=(ARTIFACT_TESTS, "-k nan_is_not_json"),
    ),
    Mutant(
        id="outputs-late",
        module=OUTPUTS,
        defence="an output written after the budget ran out is output_late",
        find="            if path in late\n",
        replace="            if False\n",
        tests=(ARTIFACT_TESTS, "-k is_late"),
    ),
    Mutant(
        id="artifact-unsafe-paths-invalid",
        module=ARTIFACT,
        defence="an artifact holding a path no artifact may hold is an invalid candidate",
        find="    if unusable:\n        return failed(",
        replace="    if False:\n        return failed(",
        tests=(ARTIFACT_TESTS, "-k unsafe_paths_is_an_invalid"),
    ),
    Mutant(
        id="artifact-device-names",
        module=PATHS,
        defence="device names (CON, nul.txt, COM1) are no artifact path",
        find="        if stem in _DEVICE_NAMES:",
        replace="        if False:",
        tests=(ARTIFACT_TESTS, "-k unsafe_artifact_paths"),
    ),
    Mutant(
        id="artifact-file-folder-clash",
        module=PATHS,
        defence="one name may not be a file and a folder at once",
        find="            if folder in files:",
        replace="            if False:",
        tests=(BUNDLE_TESTS, "-k file_and_a_folder"),
    ),
    Mutant(
        id="bundle-artifact-file-cap",
        module=BUNDLE,
        defence="an artifact holds at most 10,000 files, counted before anything is decoded",
        find="    if len(value) > MAX_ARTIFACT_FILES:",
        replace="    if False:",
        tests=(BUNDLE_TESTS, "-k more_than_the_file_cap"),
    ),
    Mutant(
        id="bundle-artifact-size-cap",
        module=BUNDLE,
        defence="an artifact's files together stay under the candidate size cap",
        find="        if total > max_bytes:",
        replace="        if False:",
        tests=(BUNDLE_TESTS, "-k size_cap"),
    ),
    Mutant(
        id="schema-check-schema",
        module=SCHEMAS,
        defence="a required output's schema must be a valid Draft 2020-12 schema",
        find="        Draft202012Validator.check_schema(schema)\n",
        replace="        pass\n",
        tests=(SCHEMA_TESTS, "-k invalid_schema"),
    ),
    Mutant(
        id="schema-no-remote-ref",
        module=SCHEMAS,
        defence="a schema's $ref may not point outside it (no schema is fetched)",
        find='        if not reference.startswith("#"):',
        replace="        if False:",
        tests=(SCHEMA_TESTS, "-k fetch_anything"),
    ),
    Mutant(
        id="schema-no-dangling-ref",
        module=SCHEMAS,
        defence="a schema's $ref must point to something inside it",
        find="            resolver.lookup(reference)\n",
        replace="            pass\n",
        tests=(SCHEMA_TESTS, "-k point_somewhere"),
    ),
)

_STORE_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="evaluations-immutable",
        module=SERVICES,
        defence="the same id@version with other content is refused",
        find="    if existing is not None and existing.digest != digest:",
        replace="    if False:",
        tests=(IMPORT_TESTS, "-k other_content"),
    ),
    Mutant(
        id="evaluations-uploader-maintains",
        module=SERVICES,
        defence="an uploader must maintain every pack the evaluation scores (or review)",
        find="        elif not reviewer and not pack.maintainers.filter(",
        replace="        elif False and not pack.maintainers.filter(",
        tests=(IMPORT_TESTS, "-k must_maintain"),
        fast=True,
    ),
    Mutant(
        id="evaluations-no-symlinks",
        module=SERVICES,
        defence="a symlink in an uploaded evaluation is refused, never followed",
        find="            info = path.lstat()",
        replace="            info = path.stat()",
        tests=(IMPORT_TESTS, "-k symlink"),
    ),
    Mutant(
        id="evaluations-no-stray-top-level",
        module=SERVICES,
        defence="anything beside evaluation.yaml, program/ and sealed/ is refused",
        find='        if entry not in TOP_LEVEL and not entry.startswith("."):',
        replace="        if False:",
        tests=(IMPORT_TESTS, "-k symlink"),
    ),
    Mutant(
        id="evaluations-built-in-names",
        module=MANIFEST,
        defence="the built-in scorers' names cannot be taken",
        find='    if data.get("id") in BUILT_IN_NAMES:',
        replace="    if False:",
        tests=(IMPORT_TESTS, "-k built_in"),
    ),
    Mutant(
        id="evaluations-score-declared-packs",
        module=RUN_SERVICES,
        defence="an evaluation scores only the pack versions it declares",
        find="        if definition is None or not scores_version(definition, contract_version):",
        replace="        if definition is None:",
        tests=(SCORING_TESTS, "-k scores_only and bwrap"),
    ),
    Mutant(
        id="evaluations-program-failure-is-error",
        module=EXECUTION,
        defence="a broken program is error/evaluation_error, never the candidate's failure",
        find="        return Verdict(ERROR, reason=Reason.EVALUATION_ERROR, details",
        replace="        return Verdict(FAILED, reason=Reason.WRONG_ANSWER, details",
        tests=(SCORING_TESTS, "-k broken_program and bwrap and exit"),
    ),
    Mutant(
        id="evaluations-reads-filter",
        module=EXECUTION,
        defence="a program gets only the candidate outputs its reads names",
        find="            if not reads_output(reads, path):\n                continue",
        replace="            if False:\n                continue",
        tests=(READS_TESTS,),
    ),
    Mutant(
        id="evaluations-program-readers",
        module=ACCESS,
        defence="a program's files are for the maintainers of a pack it scores and reviewers",
        find="    return [pack_id for pack_id in pack_ids if pack_id in maintained]",
        replace="    return pack_ids",
        tests=(PAGE_TESTS, "-k program_to_its_reviewers"),
    ),
    Mutant(
        id="evaluations-sealed-debug-mode",
        module=PRIVILEGED,
        defence="an evaluation's sealed files are shown in debug mode only",
        find="        state = debug_mode(request)\n        if state is None:\n            raise",
        replace="        state = debug_mode(request)\n        if False:\n            raise",
        tests=(PAGE_TESTS, "-k debug_mode_reveals"),
    ),
    Mutant(
        id="evaluations-sealed-read-audited",
        module=PRIVILEGED,
        defence="each read of an evaluation's sealed file records an AuditEvent",
        find="    def _audit(self, found: EvaluationFile) -> None:\n        audit(",
        replace=f"    def _audit(self, found: EvaluationFile) -> None:\n        {_NO_AUDIT}",
        tests=(PAGE_TESTS, "-k debug_mode_reveals"),
    ),
)

EVALUATION_MUTANTS: tuple[Mutant, ...] = (
    *_MESSAGE_MUTANTS,
    *_PROGRAM_MUTANTS,
    *_RELAY_MUTANTS,
    *_ARTIFACT_MUTANTS,
    *_STORE_MUTANTS,
)
