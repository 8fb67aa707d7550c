"""Mutants of the code_completion verdict channel: codec, relay, harness, worker."""

from __future__ import annotations

from tests.mutation.engine import Mutant

CODEC = "verifiers/families/code_codec.py"
RELAY = "verifiers/families/code_relay.py"
HARNESS = "verifiers/families/code_harness.py"
WORKER = "verifiers/families/code_worker.py"
CHANNEL_TESTS = "tests/security/test_verdict_channel.py"
CODEC_TESTS = "tests/verifiers/test_code_completion.py"

CHANNEL_MUTANTS: tuple[Mutant, ...] = (
    # --- the verdict channel (code_codec, code_relay, code_harness, code_worker) ----------------
    Mutant(
        id="codec-frame-is-object",
        module=CODEC,
        defence="a frame must be a JSON object",
        find="    if type(frame) is not dict:\n",
        replace="    if False:\n",
        tests=(CHANNEL_TESTS,),
        fast=True,
    ),
    Mutant(
        id="codec-depth",
        module=CODEC,
        defence="decoded values nest at most MAX_DEPTH deep",
        find=(
            "    if depth > MAX_DEPTH:\n"
            '        raise CodecError("value nests too deeply")\n'
            "    kind = type(raw)"
        ),
        replace="    kind = type(raw)",
        tests=(CODEC_TESTS + "::test_codec_refuses_malformed_frames", CHANNEL_TESTS),
    ),
    Mutant(
        id="codec-exact-tagged-shape",
        module=CODEC,
        defence="a tagged value has exactly the keys t and v",
        find='if kind is not dict or set(raw) != {"t", "v"}:',
        replace='if kind is not dict or not {"t", "v"} <= set(raw):',
        tests=(CODEC_TESTS + "::test_codec_refuses_malformed_frames",),
    ),
    Mutant(
        id="codec-refuses-objects",
        module=CODEC,
        defence="only plain data is encoded (an object's __eq__ never crosses)",
        find='raise CodecError(f"{_type_name(value)} is not plain data")',
        replace="return repr(value)",
        tests=(CODEC_TESTS + "::test_codec_refuses_anything_but_plain_data",),
    ),
    Mutant(
        id="relay-reply-id",
        module=RELAY,
        defence="a worker reply must answer the pending request (else tamper_detected)",
        find='if reply.get("id") != request_id or reply.get("gone") or "ok" not in reply:',
        replace='if reply.get("gone") or "ok" not in reply:',
        tests=(CHANNEL_TESTS,),
        fast=True,
    ),
    Mutant(
        id="relay-forged-gone",
        module=RELAY,
        defence="only the host may say the worker is gone",
        find='if reply.get("id") != request_id or reply.get("gone") or "ok" not in reply:',
        replace='if reply.get("id") != request_id or "ok" not in reply:',
        tests=(CHANNEL_TESTS,),
    ),
    Mutant(
        id="relay-malformed-is-tamper",
        module=RELAY,
        defence="a malformed worker frame is recorded as tampering",
        find='self.outcome.tamper = "the candidate wrote a malformed protocol frame"',
        replace="pass",
        tests=(CHANNEL_TESTS,),
    ),
    Mutant(
        id="relay-frame-cap",
        module=RELAY,
        defence="frames longer than MAX_FRAME are cut off (memory bound)",
        find="if end > limit or (end < 0 and len(self._buffer) > limit):",
        replace="if False:",
        tests=(CHANNEL_TESTS,),
    ),
    Mutant(
        id="relay-kills-broken-worker",
        module=RELAY,
        defence="a worker that broke the protocol is killed and gets no second chance",
        find="            self.worker.kill()  # a half-broken worker gets no second chance\n",
        replace="",
        tests=(CHANNEL_TESTS,),
        survivor_note=(
            "equivalent: once the worker is gone every later request gets the host's gone "
            "reply without reaching it (relay-gone-is-sticky), the flag that decides the "
            "verdict (tamper, oversize) is already set, and the session's end kills the worker "
            "whatever happened; the early kill only frees its CPU sooner"
        ),
    ),
    Mutant(
        id="relay-gone-is-sticky",
        module=RELAY,
        defence="once the worker is gone every later request gets a gone reply",
        find="        if self.outcome.worker_gone is not None:\n            return self._gone(",
        replace="        if False:\n            return self._gone(",
        tests=(CHANNEL_TESTS,),
        survivor_note=(
            "equivalent: the relay kills the worker when it first marks it gone, so a request "
            "forwarded anyway meets a closed pipe and gets the same gone reply; the verdict "
            "flag (tamper, oversize) is already set"
        ),
    ),
    Mutant(
        id="harness-gone-not-catchable",
        module=HARNESS,
        defence="a dead candidate cannot be swallowed by the tests' `except Exception`",
        find="class CandidateGone(BaseException):",
        replace="class CandidateGone(Exception):",
        tests=(CHANNEL_TESTS,),
        fast=True,
    ),
    Mutant(
        id="harness-builtins-not-shadowed",
        module=HARNESS,
        defence="a candidate name cannot shadow a builtin the tests use",
        find="and not hasattr(builtins, name)",
        replace="",
        tests=(CHANNEL_TESTS,),
    ),
    Mutant(
        id="harness-stop-iteration",
        module=HARNESS,
        defence="a StopIteration from the candidate cannot end a test loop early",
        find="and kind not in NEVER_REBUILT",
        replace="",
        tests=(CHANNEL_TESTS,),
    ),
    Mutant(
        id="harness-check-is-called",
        module=HARNESS,
        defence="tests that only define check() get it called on the entry point",
        find="        if defines_check and not calls_check:\n            if entry_point",
        replace="        if False:\n            if entry_point",
        tests=(CHANNEL_TESTS,),
    ),
    Mutant(
        id="harness-test-prints-off-channel",
        module=HARNESS,
        defence="the test source's prints go to stderr, never onto the result channel",
        find="    os.dup2(2, 1)  # the test source's prints go to stderr",
        replace="    pass  # the test source's prints go to stderr",
        tests=(CHANNEL_TESTS,),
    ),
    Mutant(
        id="harness-reply-id",
        module=HARNESS,
        defence="the harness checks the reply id itself too",
        find='        if reply.get("id") != self._next_id:\n',
        replace="        if False:\n",
        tests=(CHANNEL_TESTS,),
        survivor_note=(
            "equivalent: the host relay refuses every worker reply whose id differs from the "
            "pending request before the harness sees it (relay-reply-id is killed), and only the "
            "relay writes the harness's pipe; the harness's own check is defence in depth"
        ),
    ),
    Mutant(
        id="worker-prints-off-channel",
        module=WORKER,
        defence="an honest candidate's prints never land on the protocol pipe",
        find="    os.dup2(2, 1)  # print(), os.write(1, ...)",
        replace="    pass  # print(), os.write(1, ...)",
        tests=(CHANNEL_TESTS,),
    ),
)
