"""Mutants of the live episodes (episodes/): capabilities, budgets, the hosted rules CUBE leaves
open (evaluate, privileged_info), throttling, and the live run's evaluation."""

from __future__ import annotations

from tests.mutation.engine import Mutant

LIFECYCLE = "episodes/lifecycle.py"
SERVICES = "episodes/services.py"
PRIVILEGED = "episodes/privileged.py"
BUDGETS = "episodes/budgets.py"
RPC = "episodes/rpc.py"
ENDPOINTS = "episodes/endpoints.py"
LIFECYCLE_TESTS = "tests/episodes/test_lifecycle.py"
LEAK_TESTS = "tests/security/test_leak_episodes.py"
VIEWS = "episodes/views.py"
PAGE_TESTS = "tests/episodes/test_pages.py"
LIVE_COLLECTION = "episodes/live_collection.py"
HELPER_OPS = "verifiers/live/helper_ops.py"
LIVE_WORKSPACE_TESTS = "tests/episodes/test_live_workspaces.py"
ESCAPE_TESTS = "tests/security/test_episode_workspace_escapes.py"

EPISODE_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="episode-evaluate-before-done",
        module=LIFECYCLE,
        defence="cube/evaluate is refused until the episode is done (no oracle to hill-climb)",
        find="    if episode.status == EpisodeStatus.OPEN:\n        raise wire.RpcError(",
        replace="    if False:\n        raise wire.RpcError(",
        tests=(LIFECYCLE_TESTS, "-k evaluate_before_final_step"),
        fast=True,
    ),
    Mutant(
        id="episode-privileged-info-agent-run",
        module=PRIVILEGED,
        defence="privileged_info never answers an agent run",
        find=(
            "    if episode_run.run.origin != CandidateOrigin.ORACLE:\n"
            "        raise wire.RpcError(wire.NOT_PERMITTED, REFUSED)\n"
            "    if not privilege_holds(episode_run):"
        ),
        replace="    if False:",
        tests=(LIFECYCLE_TESTS, "-k privileged_info_answers_oracle"),
    ),
    Mutant(
        id="episode-privilege-expiry",
        module=PRIVILEGED,
        defence="an oracle run's privilege ends at its time",
        find="    if episode_run.privilege_until <= timezone.now():\n        return False",
        replace="    if False:\n        return False",
        tests=(LIFECYCLE_TESTS, "-k privileged_info_answers_oracle"),
    ),
    Mutant(
        id="episode-privilege-bound-to-debug-mode",
        module=PRIVILEGED,
        defence="an oracle run opened in debug mode loses its privilege with that debug mode",
        find=(
            "    return mode is not None and abs(mode.expires_at - episode_run.privilege_until)"
            " < SAME_MODE"
        ),
        replace="    return True",
        tests=(LIFECYCLE_TESTS, "-k loses_its_privilege"),
    ),
    Mutant(
        id="episode-privilege-not-revived-by-a-new-debug-mode",
        module=PRIVILEGED,
        defence="a later debug mode of the same session does not revive an oracle run",
        find=(
            "    return mode is not None and abs(mode.expires_at - episode_run.privilege_until)"
            " < SAME_MODE"
        ),
        replace="    return mode is not None",
        tests=(LIFECYCLE_TESTS, "-k loses_its_privilege"),
    ),
    Mutant(
        id="episode-capability-revoked",
        module=SERVICES,
        defence="a revoked, closed or expired run's URL answers nothing",
        find="        episode_run.revoked_at is None\n        and episode_run.closed_at is None\n",
        replace="        True\n",
        tests=(LIFECYCLE_TESTS, "-k revoked_url or shutdown"),
    ),
    Mutant(
        id="episode-capability-expiry",
        module=SERVICES,
        defence="a run's URL stops working when it expires",
        find="        and episode_run.expires_at > timezone.now()\n",
        replace="",
        tests=(LIFECYCLE_TESTS, "-k url_expired"),
    ),
    Mutant(
        id="episode-step-budget",
        module=BUDGETS,
        defence="the step past budgets.steps ends the episode, truncated",
        find="    if budgets.steps is not None and steps > budgets.steps:",
        replace="    if False:",
        tests=(LIFECYCLE_TESTS, "-k step_budget"),
    ),
    Mutant(
        id="episode-wall-budget",
        module=BUDGETS,
        defence="a step after budgets.wall_time_seconds ends the episode, truncated",
        find="        if elapsed > budgets.wall_time_seconds:",
        replace="        if False:",
        tests=(LIFECYCLE_TESTS, "-k wall_time_budget"),
    ),
    Mutant(
        id="episode-attempts",
        module=SERVICES,
        defence="no more episodes of a task than budgets.attempts",
        find="        if len(earlier) >= attempts:",
        replace="        if False:",
        tests=(LIFECYCLE_TESTS, "-k attempts_allow"),
    ),
    Mutant(
        id="episode-throttle",
        module=RPC,
        defence="steps past the run's rate are refused",
        find="    if request.method in STEPPING_METHODS and lifecycle.steps_throttled(",
        replace="    if False and lifecycle.steps_throttled(",
        tests=(LIFECYCLE_TESTS, "-k rate"),
    ),
    Mutant(
        id="episode-body-limit",
        module=ENDPOINTS,
        defence="request bodies over the limit are refused before parsing",
        find="    if len(raw) > limit:",
        replace="    if False:",
        tests=(LIFECYCLE_TESTS, "-k over_the_limit"),
    ),
    Mutant(
        id="live-evaluation-waits-for-close",
        module="runs/pipeline.py",
        defence="a live run's evaluation finishes only once the run is closed",
        find="run__submitted_at__isnull=False",
        replace="pk__isnull=False",
        tests=(LIFECYCLE_TESTS, "-k waits_for_shutdown"),
    ),
    Mutant(
        id="episode-trajectory-owner-only",
        module=VIEWS,
        defence="another user's trajectory needs privilege and debug mode",
        find="    if not access.can_see_candidates(request.user, run):\n        version",
        replace="    if False:\n        version",
        tests=(PAGE_TESTS, "-k another_submitter_gets_404 or oracle_trajectory"),
        fast=True,
    ),
    Mutant(
        id="episode-oracle-form-needs-debug-mode",
        module=VIEWS,
        defence="an oracle run is opened from the site only in debug mode",
        find="    if mode is None or not session_key:",
        replace="    if False:",
        tests=(PAGE_TESTS, "-k oracle_run_is_refused_without_debug_mode"),
    ),
    Mutant(
        id="workspace-contract-surfaces",
        module=LIVE_COLLECTION,
        defence="a workspace change outside allowed_to_modify or to read_only fails the task",
        find="    if violations:\n        refusal = LiveRefusal(",
        replace="    if False:\n        refusal = LiveRefusal(",
        tests=(LIVE_WORKSPACE_TESTS, "-k contract_forbids"),
    ),
    Mutant(
        id="workspace-link-out-refused",
        module=HELPER_OPS,
        defence="a file tool never follows a link that leaves the workspace",
        find="        if not self.inside(real):",
        replace="        if False:",
        tests=(ESCAPE_TESTS, "-k symlink_out_of_the_workspace"),
        fast=True,
    ),
    Mutant(
        id="live-channel-patch-frames-capped",
        module="verifiers/live/runner.py",
        defence="patch frames are taken only from a diff and only up to twice the workspace",
        find="            if len(report.patch) + len(payload) > self.patch_cap:",
        replace="            if False:",
        tests=("tests/security/test_live_channel.py", "-k patch_frames"),
    ),
    Mutant(
        id="live-channel-kill-reaches-the-slot",
        module="verifiers/sandbox/bwrap.py",
        defence="killing a bwrap sandbox kills every process of its slot uid (a hijacked pid 1)",
        find="        self._slot.kill_all()",
        replace="        pass",
        tests=("tests/security/test_live_channel.py", "-k hijacked and helper"),
    ),
)
