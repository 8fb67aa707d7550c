"""Mutants of access control: pack and run rules, debug mode and its audit trail."""

from __future__ import annotations

from tests.mutation.engine import Mutant

PACK_ACCESS = "packs/access.py"
RUN_ACCESS = "runs/access.py"
PRIVILEGED = "runs/privileged.py"
ROLES_TESTS = "tests/test_roles_and_debug_mode.py"
DEBUG_TESTS = "tests/security/test_debug_mode_guards.py"
ROLE_VISIBILITY = "tests/security/test_role_visibility.py"

HOME_TESTS = "tests/dashboard/test_home.py"

ACCESS_MUTANTS: tuple[Mutant, ...] = (
    # --- the home page and its one-click reference runs (dashboard/, runs/) -------------------
    Mutant(
        id="home-runs-of-any-version",
        module="dashboard/selectors.py",
        defence="the home page lists only runs the reader may see (no draft's, no open run)",
        find=("run__in=run_access.listed_runs(user),\n    )\n\n\ndef now_running"),
        replace="run__in=Run.objects.filter(health_check=False),\n    )\n\n\ndef now_running",
        tests=(HOME_TESTS, "-k reaches_a_viewers_home"),
    ),
    Mutant(
        id="reference-runs-for-anyone",
        module="runs/reference_views.py",
        defence="only users privileged on the pack start its oracle and null runs",
        find="    if not access.can_score_references(request.user, contract_version.pack):",
        replace="    if False:",
        tests=(HOME_TESTS, "-k only_privileged"),
    ),
    # --- access control (packs/access.py, runs/access.py, runs/privileged.py) ------------------
    Mutant(
        id="access-browse-needs-role",
        module=PACK_ACCESS,
        defence="a signed-in user needs the browse permission",
        find="return user.has_perm(BROWSE)",
        replace="return True",
        tests=(ROLES_TESTS, "-k each_role_reaches"),
        fast=True,
    ),
    Mutant(
        id="access-anonymous-browse",
        module=PACK_ACCESS,
        defence="anonymous visitors browse only with public results on",
        find="    return bool(settings.SECUREBENCH_PUBLIC_RESULTS)\n\n\ndef check_browse",
        replace="    return True\n\n\ndef check_browse",
        tests=(ROLES_TESTS, "-k each_role_reaches"),
    ),
    Mutant(
        id="access-privileged-for-any-member",
        module=PACK_ACCESS,
        defence="only reviewers, superusers and the pack's maintainers are privileged",
        find="    return maintains(user, pack)\n",
        replace="    return True\n",
        tests=(ROLES_TESTS, "-k each_role_reaches or maintainer_in_debug_mode"),
        fast=True,
    ),
    Mutant(
        id="access-maintains-this-pack",
        module=PACK_ACCESS,
        defence="maintaining one pack gives no privilege over another",
        find="pack.maintainers.filter(pk=user.pk).exists()",
        replace="Pack.objects.filter(maintainers=user).exists()",
        tests=(ROLES_TESTS, "-k maintainer_in_debug_mode or first_uploader"),
    ),
    Mutant(
        id="access-debug-switch-privilege",
        module=PACK_ACCESS,
        defence="only privileged users may switch debug mode on",
        find="    return Pack.objects.filter(maintainers=user).exists()",
        replace="    return True",
        tests=(ROLES_TESTS, "-k viewer_cannot_switch or viewer_never_sees"),
    ),
    Mutant(
        id="access-upload-permission",
        module=PACK_ACCESS,
        defence="uploading needs the upload permission",
        find="return is_member(user) and user.has_perm(UPLOAD)",
        replace="return is_member(user)",
        tests=(ROLE_VISIBILITY, ROLES_TESTS, "-k upload or first_uploader"),
    ),
    Mutant(
        id="access-new-version-maintainers",
        module=PACK_ACCESS,
        defence="only maintainers and superusers add versions to an existing pack",
        find="return is_member(user) and (user.is_superuser or maintains(user, pack))",
        replace="return is_member(user)",
        tests=(ROLES_TESTS, "-k first_uploader"),
    ),
    Mutant(
        id="access-inactive-users",
        module=PACK_ACCESS,
        defence="inactive accounts are never members",
        find="user.is_authenticated and user.is_active",
        replace="user.is_authenticated",
        tests=(ROLES_TESTS, DEBUG_TESTS, "-k each_role_reaches or inactive"),
        survivor_note=(
            "equivalent: Django signs an inactive account out on its next request (ModelBackend "
            ".get_user refuses it) and DRF's token authentication refuses it too, so no request "
            "reaches these rules with an inactive user; "
            "tests/security/test_debug_mode_guards.py checks that outcome"
        ),
    ),
    Mutant(
        id="runs-drafts-private",
        module=RUN_ACCESS,
        defence="a draft run is visible to its creator alone",
        find="return Run.objects.filter(submitted | Q(submitted_by=user))",
        replace="return Run.objects.all()",
        tests=(ROLES_TESTS, "-k draft_run"),
        fast=True,
    ),
    Mutant(
        id="runs-candidates-owner-only",
        module=RUN_ACCESS,
        defence="only the submitter sees a run's candidates",
        find="return run.origin != CandidateOrigin.ORACLE and owns(user, run)",
        replace="return run.origin != CandidateOrigin.ORACLE",
        tests=(ROLES_TESTS, "-k only_the_submitter_sees"),
    ),
    Mutant(
        id="runs-oracle-candidates-hidden",
        module=RUN_ACCESS,
        defence="oracle candidates (reference solutions) never show without debug mode",
        find="return run.origin != CandidateOrigin.ORACLE and owns(user, run)",
        replace="return owns(user, run)",
        tests=(
            ROLE_VISIBILITY,
            "tests/runs/pages/test_run_pages.py::test_oracle_candidates_are_withheld",
        ),
        survivor_note=(
            "equivalent: the result page computes the oracle banner from the run's origin "
            "alone and its template shows the banner before any candidate, so the candidate "
            "handed to it is never rendered (runs-result-oracle-banner is killed)"
        ),
    ),
    Mutant(
        id="runs-result-oracle-banner",
        module="runs/views.py",
        defence="a result page withholds an oracle candidate, even from the run's submitter",
        find="withheld = run.origin == CandidateOrigin.ORACLE",
        replace="withheld = False",
        tests=(
            ROLE_VISIBILITY,
            "tests/runs/pages/test_run_pages.py::test_oracle_candidates_are_withheld",
        ),
    ),
    Mutant(
        id="runs-write-owner-only",
        module=RUN_ACCESS,
        defence="only a run's creator adds candidates to it or submits it",
        find="return can_submit(user) and owns(user, run)",
        replace="return can_submit(user)",
        tests=(
            "tests/runs/test_run_api.py::test_only_the_runs_creator_may_add_candidates_or_submit",
        ),
    ),
    Mutant(
        id="runs-audit-log-permission",
        module=RUN_ACCESS,
        defence="the audit log needs its permission",
        find="(user.is_superuser or user.has_perm(VIEW_AUDIT))",
        replace="True",
        tests=(ROLES_TESTS, "-k each_role_reaches or audit_log"),
    ),
    Mutant(
        id="runs-reevaluate-permission",
        module=RUN_ACCESS,
        defence="re-evaluation needs its permission",
        find="return pack_access.is_member(user) and user.has_perm(REEVALUATE)",
        replace="return pack_access.is_member(user)",
        tests=(
            "tests/runs/pages/test_run_pages.py::test_only_users_with_the_permission_can_re_evaluate",
            "tests/runs/test_run_api.py::test_re_evaluating_needs_the_add_evaluation_permission",
        ),
    ),
    Mutant(
        id="privileged-needs-privilege",
        module=PRIVILEGED,
        defence="privileged views 404 for users not privileged for the pack",
        find="if not pack_access.can_view_privileged(request.user, pack):",
        replace="if False:",
        tests=(ROLES_TESTS, "-k each_role_reaches or maintainer_in_debug_mode"),
        fast=True,
    ),
    Mutant(
        id="privileged-needs-debug-mode",
        module=PRIVILEGED,
        defence="privileged views need debug mode on",
        find='    if state is None:\n        raise PermissionDenied("Switch debug mode on',
        replace='    if False:\n        raise PermissionDenied("Switch debug mode on',
        tests=(ROLES_TESTS, "-k each_role_reaches or expires or switching_debug_mode_off"),
    ),
    Mutant(
        id="privileged-expiry",
        module=PRIVILEGED,
        defence="debug mode expires",
        find="if expires_at <= timezone.now():",
        replace="if False:",
        tests=(ROLES_TESTS, "-k expires"),
    ),
    Mutant(
        id="privileged-revoked-role",
        module=PRIVILEGED,
        defence="debug mode ends when the user loses every privilege",
        find="if not valid or not pack_access.has_any_privilege(user):",
        replace="if not valid:",
        tests=(DEBUG_TESTS,),
    ),
    Mutant(
        id="privileged-session-bound-to-user",
        module=PRIVILEGED,
        defence="the debug-mode session state belongs to the user who switched it on",
        find='raw.get("user") == user.pk and',
        replace="True and",
        tests=(
            ROLES_TESTS,
            DEBUG_TESTS,
            "-k reveals_one_value or expires or losing_every or belongs_to_the_user",
        ),
    ),
    Mutant(
        id="privileged-start-needs-privilege",
        module=PRIVILEGED,
        defence="switching debug mode on is refused without a privilege",
        find=(
            '    if not pack_access.has_any_privilege(user):\n        raise PermissionDenied("Debug'
        ),
        replace='    if False:\n        raise PermissionDenied("Debug',
        tests=(ROLES_TESTS, DEBUG_TESTS, "-k viewer_cannot_switch or service_refuses"),
    ),
    Mutant(
        id="privileged-reason-required",
        module=PRIVILEGED,
        defence="debug mode needs a reason",
        find="    if not reason:\n        raise DebugModeRefused",
        replace="    if False:\n        raise DebugModeRefused",
        tests=(ROLES_TESTS, "-k needs_a_reason"),
    ),
    Mutant(
        id="privileged-audit-reason",
        module=PRIVILEGED,
        defence="every privileged look is audited with the debug-mode reason",
        find="        reason=mode.reason,\n",
        replace='        reason="",\n',
        tests=(ROLES_TESTS, "-k audited or audit_log"),
    ),
    Mutant(
        id="privileged-forwarded-for",
        module=PRIVILEGED,
        defence="the audited address is the direct peer, never a client-set header",
        find='return request.META.get("REMOTE_ADDR") or None',
        replace=(
            'return request.META.get("HTTP_X_FORWARDED_FOR") or '
            'request.META.get("REMOTE_ADDR") or None'
        ),
        tests=(DEBUG_TESTS,),
    ),
    Mutant(
        id="debug-mode-answers-not-stored",
        module="securebench_site/middleware.py",
        defence="whatever is answered in an active debug mode is no-store",
        find="            add_never_cache_headers(response)",
        replace="            pass",
        tests=("tests/test_cache_headers.py",),
        fast=True,
    ),
)
