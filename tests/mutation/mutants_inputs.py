"""Mutants of the input defences: the patch policy, archive safety, lanes, run bundles."""

from __future__ import annotations

from tests.mutation.engine import Mutant

PATCH_POLICY = "verifiers/patch_policy.py"
PATCH_TESTS = "tests/verifiers/test_patch_policy.py"
POLICY_DISGUISES = "tests/verifiers/test_patch_policy_disguises.py"
ARCHIVE = "packs/compiler/archive.py"
ARCHIVE_TESTS = "tests/compiler/test_archive.py"
ARCHIVE_BOMBS = "tests/security/test_archive_bombs.py"
VISIBILITY = "packs/compiler/visibility.py"
BUNDLE = "runs/bundle.py"
BUNDLE_GUARDS = "tests/security/test_bundle_workspace_guards.py"

INPUT_MUTANTS: tuple[Mutant, ...] = (
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
        tests=(ARCHIVE_TESTS, ARCHIVE_BOMBS),
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
        tests=(ARCHIVE_TESTS, ARCHIVE_BOMBS),
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
        fast=True,
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
        survivor_note=(
            "equivalent: every folder this walks was written by extract_archive (the bundle's "
            "or the workspace archive's), which refuses links and special files "
            "(archive-links and archive-zip-symlink-bits are killed)"
        ),
    ),
)
