"""The defence-removing edits ``make mutation`` applies, one at a time, to a scratch copy.

Each mutant removes or weakens exactly one defence and names the tests that must then fail.
Anchors (``find``) are short and must occur exactly once in their module: when the code moves
on, the runner reports the mutant as stale and fails, so the catalogue cannot rot silently.
``fast`` marks the subset CI runs (quick tests, one per module at least).

Hand-chosen rather than generated: every test here starts real sandboxes or a Django test
database, so a few dozen meaningful removals beat thousands of arithmetic flips.
"""

from __future__ import annotations

from tests.mutation.engine import Mutant

PATCH_POLICY = "verifiers/patch_policy.py"
PATCH_TESTS = "tests/verifiers/test_patch_policy.py"
POLICY_DISGUISES = "tests/verifiers/test_patch_policy_disguises.py"
ARCHIVE = "packs/compiler/archive.py"
ARCHIVE_TESTS = "tests/compiler/test_archive.py"
VISIBILITY = "packs/compiler/visibility.py"
PACK_ACCESS = "packs/access.py"
RUN_ACCESS = "runs/access.py"
PRIVILEGED = "runs/privileged.py"
ROLES_TESTS = "tests/test_roles_and_debug_mode.py"
DEBUG_TESTS = "tests/security/test_debug_mode_guards.py"
BUNDLE = "runs/bundle.py"
BUNDLE_GUARDS = "tests/security/test_bundle_workspace_guards.py"
CODEC = "verifiers/families/code_codec.py"
RELAY = "verifiers/families/code_relay.py"
HARNESS = "verifiers/families/code_harness.py"
WORKER = "verifiers/families/code_worker.py"
CHANNEL_TESTS = "tests/security/test_verdict_channel.py"
CODEC_TESTS = "tests/verifiers/test_code_completion.py"

MUTANTS: tuple[Mutant, ...] = (
    # --- the patch policy (verifiers/patch_policy.py) -------------------------------------------
    Mutant(
        id="policy-dotdot",
        module=PATCH_POLICY,
        defence="'..' components in a patch path are refused",
        find='if any(part in ("", ".", "..") for part in parts):',
        replace='if any(part in ("", ".") for part in parts):',
        tests=(PATCH_TESTS,),
        fast=True,
    ),
    Mutant(
        id="policy-absolute",
        module=PATCH_POLICY,
        defence="absolute patch paths are refused with their own reason",
        find='if path.startswith("/"):\n        return "absolute path"',
        replace='if False:\n        return "absolute path"',
        tests=(PATCH_TESTS,),
        survivor_note=(
            "equivalent: an absolute path always starts with an empty component, which the "
            "next hard deny refuses as escaping the repository; only the wording of the "
            "reason changes"
        ),
    ),
    Mutant(
        id="policy-control-characters",
        module=PATCH_POLICY,
        defence="control characters in patch paths are refused",
        find='if "\\\\" in path or any(ord(char) < 32 or ord(char) == 127 for char in path):',
        replace='if "\\\\" in path:',
        tests=(PATCH_TESTS, POLICY_DISGUISES),
    ),
    Mutant(
        id="policy-reserved-securebench",
        module=PATCH_POLICY,
        defence="securebench/ is reserved even when sensitive paths are allowed",
        find='if lowered[0] == "securebench":',
        replace="if False:",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-git-dir-variants",
        module=PATCH_POLICY,
        defence="'.git.' and '.git ' (trailing dots/spaces) count as .git",
        find='part == ".git" or part.rstrip(". ") == ".git"',
        replace='part == ".git"',
        tests=(PATCH_TESTS, POLICY_DISGUISES),
    ),
    Mutant(
        id="policy-symlinks",
        module=PATCH_POLICY,
        defence="patches creating symlinks are refused unless the task allows them",
        find="if section.is_gitlink or (section.is_symlink and not policy.allow_symlinks)",
        replace="if section.is_gitlink",
        tests=(PATCH_TESTS,),
        fast=True,
    ),
    Mutant(
        id="policy-gitlinks",
        module=PATCH_POLICY,
        defence="patches creating gitlinks (submodules) are always refused",
        find="if section.is_gitlink or (section.is_symlink and not policy.allow_symlinks)",
        replace="if section.is_symlink and not policy.allow_symlinks",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-sensitive-defaults",
        module=PATCH_POLICY,
        defence="tests, conftest, CI and build files are denied by default",
        find="sensitive = is_sensitive(path, policy.protected_paths) and not",
        replace="sensitive = False and not",
        tests=(PATCH_TESTS,),
        fast=True,
    ),
    Mutant(
        id="policy-allow-paths",
        module=PATCH_POLICY,
        defence="allow_paths narrows what a patch may change",
        find="outside = bool(policy.allow_paths) and not matches_any(path, policy.allow_paths)",
        replace="outside = False",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-protected-test-patch-paths",
        module=PATCH_POLICY,
        defence="files the task's own test patch names are as protected as tests/",
        find="if path in protected or is_test_path(path):",
        replace="if is_test_path(path):",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-startup-hooks",
        module=PATCH_POLICY,
        defence="sitecustomize/usercustomize (interpreter start-up hooks) are sensitive",
        find='SENSITIVE_STEMS = frozenset({"conftest", "sitecustomize", "usercustomize"})',
        replace='SENSITIVE_STEMS = frozenset({"conftest"})',
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-pth-files",
        module=PATCH_POLICY,
        defence=".pth files (run at interpreter start) are sensitive",
        find='SENSITIVE_SUFFIXES = (".sh", ".bash", ".zsh", ".lock", ".pth")',
        replace='SENSITIVE_SUFFIXES = (".sh", ".bash", ".zsh", ".lock")',
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-shadow-test-runner",
        module=PATCH_POLICY,
        defence="a repo-root pytest.py or pluggy/ cannot shadow the test runner",
        find='if parts[0].split(".", 1)[0] in SENSITIVE_TOP_MODULES:',
        replace="if False:",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-rename-headers",
        module=PATCH_POLICY,
        defence="rename/copy from/to paths are checked too",
        find="paths.append(_header_path(line))",
        replace="_header_path(line)",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-marker-paths",
        module=PATCH_POLICY,
        defence="the ---/+++ paths are checked too, not only the diff --git header",
        find="if found is not None:\n                    paths.append(found)",
        replace="if found is None:\n                    paths.append(found)",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-carriage-return",
        module=PATCH_POLICY,
        defence="carriage returns inside lines (ambiguous for git apply) are refused",
        find='if any("\\r" in line.rstrip("\\r\\n") for line in lines):',
        replace="if False:",
        tests=(PATCH_TESTS,),
        survivor_note=(
            "equivalent: parse_patch splits with str.splitlines, which also breaks lines at a "
            "lone carriage return, so no line can hold one before its end and the check never "
            "fires (the split pieces fail parsing instead: refused as noncanonical either way)"
        ),
    ),
    Mutant(
        id="policy-leading-text",
        module=PATCH_POLICY,
        defence="text before the first diff --git header (plain diffs, ed scripts) is refused",
        find='if not lines or not lines[0].startswith("diff --git "):',
        replace="if not lines:",
        tests=(PATCH_TESTS, POLICY_DISGUISES),
    ),
    Mutant(
        id="policy-file-modes",
        module=PATCH_POLICY,
        defence="unknown file modes are refused",
        find="if mode not in FILE_MODES:",
        replace="if False:",
        tests=(PATCH_TESTS,),
    ),
    Mutant(
        id="policy-check-paths-hard-deny",
        module=PATCH_POLICY,
        defence="paths that changed in the sandbox get the hard denies too",
        find="hard = [path for path in unique if hard_deny_reason(path)]",
        replace="hard = []",
        tests=(PATCH_TESTS, POLICY_DISGUISES),
    ),
    Mutant(
        id="policy-pattern-prefix",
        module=PATCH_POLICY,
        defence="a pattern matches whole path components ('src' does not allow 'src_evil')",
        find='path.startswith(pattern + "/")',
        replace="path.startswith(pattern)",
        tests=(PATCH_TESTS,),
    ),
    # --- archive safety (packs/compiler/archive.py) ---------------------------------------------
    Mutant(
        id="archive-links",
        module=ARCHIVE,
        defence="links and special files in an archive are refused",
        find='if kind == "other":',
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
        fast=True,
    ),
    Mutant(
        id="archive-dotdot",
        module=ARCHIVE,
        defence="members with '..' components are refused",
        find='if ".." in parts:',
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
        fast=True,
    ),
    Mutant(
        id="archive-absolute",
        module=ARCHIVE,
        defence="absolute member names are refused",
        find='if raw_name.startswith("/"):',
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-backslash",
        module=ARCHIVE,
        defence="backslashes in member names are refused",
        find='if "\\\\" in raw_name:',
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-member-count",
        module=ARCHIVE,
        defence="the member count is capped",
        find="if len(self.entries) >= self.limits.max_members:",
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-written-bytes",
        module=ARCHIVE,
        defence="real unpacked bytes are counted against the cap (not only declared sizes)",
        find="if self._written > self._limits.max_unpacked_bytes:",
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-stream-cap",
        module=ARCHIVE,
        defence="a decompressed tar stream stops at the cap (gzip bomb)",
        find="if self._read > self._cap:",
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-sparse",
        module=ARCHIVE,
        defence="sparse tar members are refused",
        find="if member.isreg() and not member.issparse():",
        replace="if member.isreg():",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-zip-symlink-bits",
        module=ARCHIVE,
        defence="zip entries whose unix mode says symlink are refused",
        find="if info.create_system == 3 and file_type not in (0, stat.S_IFREG, stat.S_IFDIR):",
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-case-clash",
        module=ARCHIVE,
        defence="names equal after case folding / Unicode normalisation are refused",
        find='return tuple(unicodedata.normalize("NFC", p).casefold() for p in parts)',
        replace="return parts",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-cleanup",
        module=ARCHIVE,
        defence="a failed extraction leaves nothing behind",
        find="    except BaseException:\n        _empty_directory(destination)\n        raise",
        replace="    except BaseException:\n        raise",
        tests=(ARCHIVE_TESTS,),
    ),
    Mutant(
        id="archive-encrypted",
        module=ARCHIVE,
        defence="encrypted zip members are refused with a clear error",
        find="if info.flag_bits & 0x1:",
        replace="if False:",
        tests=(ARCHIVE_TESTS,),
    ),
    # --- lanes (packs/compiler/visibility.py, verifiers/families/base.py) -----------------------
    Mutant(
        id="lanes-unknown-eval-key-hidden",
        module="verifiers/families/base.py",
        defence="an eval key the family does not list is hidden (fails closed)",
        find="return self.eval_lanes.get(key, HIDDEN)",
        replace='return self.eval_lanes.get(key, "public")',
        tests=("tests/compiler/test_families.py",),
        fast=True,
    ),
    Mutant(
        id="lanes-eval-follows-family",
        module=VISIBILITY,
        defence="eval.* goes to the family's lane, never public",
        find="lane = self.spec.lane_for(key)",
        replace="lane = PUBLIC",
        tests=("tests/compiler/test_families.py", "tests/compiler/test_compile.py"),
    ),
    Mutant(
        id="lanes-eval-mount-under-root",
        module=VISIBILITY,
        defence="an eval file's mount stays under its lane's root",
        find="elif not is_within(normalise(mount), root) or normalise(mount) == root:",
        replace="elif False:",
        tests=("tests/compiler/test_families.py", "tests/compiler/test_paths.py"),
    ),
    Mutant(
        id="lanes-public-target",
        module=VISIBILITY,
        defence="a public asset cannot land on a reserved path (e.g. input/hidden.json)",
        find="if why := public_target_problem(target):",
        replace="if why := None:",
        tests=("tests/compiler/test_paths.py", "tests/compiler/test_families.py"),
    ),
    Mutant(
        id="lanes-rejected-files",
        module=VISIBILITY,
        defence="a symlink or special file under an asset root is not a usable source",
        find="if path in tree.rejected:",
        replace="if False:",
        tests=("tests/compiler/test_paths.py", "tests/compiler/test_families.py"),
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
        tests=(ROLES_TESTS, "-k each_role_reaches or first_uploader"),
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
        tests=("tests/runs/test_run_pages.py::test_oracle_candidates_are_withheld",),
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
            "tests/runs/test_run_pages.py::test_only_users_with_the_permission_can_re_evaluate",
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
        tests=(ROLES_TESTS, DEBUG_TESTS, "-k reveals_one_value or expires or losing_every"),
        survivor_note=(
            "equivalent: django.contrib.auth.login() flushes the session when another user "
            "signs in on it, so no request can carry another user's debug-mode state; the "
            "check is defence in depth against a future session backend that does not"
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
        tests=(ROLES_TESTS, "-k viewer_cannot_switch"),
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
    # --- run bundles (runs/bundle.py) -----------------------------------------------------------
    Mutant(
        id="bundle-workspace-path",
        module=BUNDLE,
        defence="workspace file paths may not escape (.., absolute)",
        find="        unsafe = unsafe_relative_path(path)\n",
        replace="        unsafe = None\n",
        tests=("tests/runs/test_submission.py",),
        fast=True,
    ),
    Mutant(
        id="bundle-reference-path",
        module=BUNDLE,
        defence="a workspace archive/folder reference stays inside the bundle",
        find="    unsafe = unsafe_relative_path(reference)\n",
        replace="    unsafe = None\n",
        tests=(BUNDLE_GUARDS, "tests/runs/test_submission.py"),
    ),
    Mutant(
        id="bundle-file-count",
        module=BUNDLE,
        defence="a workspace holds at most MAX_WORKSPACE_FILES files",
        find="if len(files) > MAX_WORKSPACE_FILES:",
        replace="if False:",
        tests=(BUNDLE_GUARDS, "tests/runs/test_submission.py"),
    ),
    Mutant(
        id="bundle-candidate-bytes",
        module=BUNDLE,
        defence="a workspace's files add up to at most the candidate size cap",
        find="    if total > limits.max_candidate_bytes:\n",
        replace="    if False:\n",
        tests=(BUNDLE_GUARDS, "tests/runs/test_submission.py"),
    ),
    Mutant(
        id="bundle-file-modes",
        module=BUNDLE,
        defence="workspace file modes carry no setuid/setgid/sticky bits",
        find="return mode if 0 <= mode <= 0o777 else None",
        replace="return mode",
        tests=(BUNDLE_GUARDS, "tests/runs/test_submission.py"),
    ),
    Mutant(
        id="bundle-folder-links",
        module=BUNDLE,
        defence="a workspace folder in a bundle may hold no links or special files",
        find="if path.is_symlink() or not (path.is_file() or path.is_dir()):",
        replace="if False:",
        tests=("tests/runs/test_submission.py",),
    ),
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
    ),
    Mutant(
        id="relay-gone-is-sticky",
        module=RELAY,
        defence="once the worker is gone every later request gets a gone reply",
        find="        if self.outcome.worker_gone is not None:\n            return self._gone(",
        replace="        if False:\n            return self._gone(",
        tests=(CHANNEL_TESTS,),
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

# Defences whose modules other engineers are reshaping now: mutants to add once they settle.
PENDING: tuple[tuple[str, str], ...] = (
    ("verifiers/sandbox (bwrap)", "--unshare-all, --die-with-parent, --ro-bind of the root"),
    ("verifiers/sandbox (bwrap)", "environment cleared (--clearenv), no host variables leak"),
    ("verifiers/sandbox (docker)", "read_only root filesystem"),
    ("verifiers/sandbox (docker)", "tmpfs size caps on /tmp and /work"),
    ("verifiers/sandbox (docker)", "network_mode none"),
    ("verifiers/sandbox (docker)", "cap_drop ALL and no-new-privileges"),
    ("verifiers/sandbox (both)", "pids limit, memory limit"),
    ("verifiers/sandbox (both)", "output cap on stdout/stderr"),
    ("verifiers/sandbox (both)", "kill of leftover processes at the end and at the wall limit"),
    ("verifiers/sandbox (both)", "collection of outputs refuses symlinks"),
    ("packs/sealed.py", "sealed values reachable only through the audited accessor"),
    ("the scrubber", "sealed strings redacted from verifier output shown to users"),
    ("runs/selectors.py", "public_detail_counts shows counts, never sealed detail"),
    ("verifiers/families/code_completion.py", "tamper/oversize outcomes map to failed verdicts"),
)
