"""artifact_task: produce a set of files (an artifact) that the contract's outputs describe.

The candidate is an ``artifact``: files by path, like a workspace, but nothing is run. The
built-in verifier (what ``securebench@1`` scores) checks the artifact against the contract:
passed when every required output is present and valid (``verifiers.artifact_outputs``:
format, schema, max_bytes), failed with ``output_missing``, ``output_malformed`` or
``output_too_large`` otherwise, and ``invalid_candidate`` for a path no artifact may hold.
How good the artifact is (against ``reference_artifact`` and ``rubric``, both hidden) is for
an uploaded evaluation program to say; this verifier never reads them, so no detail it writes
can carry them.

A contract that names no required outputs binds nothing but "some file": an empty artifact
fails ``output_missing``, any other passes.

``reference_artifact`` is the reference files: a file reference under the eval root (a file,
which becomes one file of its base name, or a folder, whose files keep their paths below it)
or an inline ``{path: text}`` map. The oracle candidate is built from it (``reference_files``).
"""

from __future__ import annotations

import posixpath
from typing import Any

from verifiers.artifact_outputs import (
    OUTPUT_MALFORMED,
    OUTPUT_MISSING,
    OUTPUT_TOO_LARGE,
    output_problems,
    output_rules,
)
from verifiers.artifact_paths import artifact_path_problem, folder_file_clashes
from verifiers.families.base import (
    FamilySpec,
    Field,
    FieldProblem,
    any_value,
    non_empty_string,
    string_or_object,
)
from verifiers.lanes import HIDDEN
from verifiers.task import Candidate, TaskLanes
from verifiers.verdict import Reason, Verdict, failed, passed

# Keys that make an eval object a file reference (packs.compiler.visibility._is_file_ref).
FILE_REF_KEYS = frozenset({"path", "mount", "read_only"})
MAX_NAMED = 20


def reference_artifact(value: Any, path: str) -> list[FieldProblem]:
    """A file reference ({path, mount?, read_only?}; the compiler checks the file) or a
    non-empty {path: text} map whose paths an artifact could hold."""
    if not isinstance(value, dict) or not value:
        return [(path, "must be a file reference {path} or a non-empty {path: text} map")]
    if is_file_reference(value):
        return []
    problems: list[FieldProblem] = []
    for name, text in value.items():
        why = artifact_path_problem(name)
        if why:
            problems.append((f"{path}.{name}", why))
        elif not isinstance(text, str):
            problems.append((f"{path}.{name}", "must be the file's text (a string)"))
    problems += [
        (f"{path}.{inner}", f"is under {outer}, which is a file too")
        for outer, inner in folder_file_clashes(value)
    ]
    return problems


def is_file_reference(value: Any) -> bool:
    return isinstance(value, dict) and "path" in value and set(value) <= FILE_REF_KEYS


SPEC = FamilySpec(
    name="artifact_task",
    active=True,
    candidate_kind="artifact",
    eval_lanes={
        "reference_artifact": HIDDEN,
        "rubric": HIDDEN,
    },
    input_fields={
        "instructions": Field(non_empty_string, required=True),
        "context": Field(string_or_object),
    },
    open_input=True,
    eval_fields={
        "reference_artifact": Field(reference_artifact),
        # Read only by evaluation programs, which say what shape they take.
        "rubric": Field(any_value),
    },
)

_REASONS = {
    OUTPUT_MISSING: Reason.OUTPUT_MISSING,
    OUTPUT_MALFORMED: Reason.OUTPUT_MALFORMED,
    OUTPUT_TOO_LARGE: Reason.OUTPUT_TOO_LARGE,
}


def verify(task: TaskLanes, candidate: Candidate) -> Verdict:
    """Pure: the artifact against the task's contract (``TaskLanes.contract``)."""
    unusable = unusable_paths(candidate)
    if unusable:
        return failed(
            Reason.INVALID_CANDIDATE,
            details={"problem": "unsafe_paths", "paths": unusable[:MAX_NAMED]},
        )
    if not candidate.files:
        return failed(Reason.OUTPUT_MISSING, details={"problem": "no_files"})
    problems = output_problems(output_rules(task.contract), candidate.files)
    details: dict[str, Any] = {"file_count": len(candidate.files)}
    if not problems:
        return passed(details=details)
    # The first problem's rule names the failure; every problem is listed (candidate paths
    # and the public contract's rules only: nothing hidden).
    listed = [
        {"rule": problem.rule, "path": problem.path, "detail": problem.detail}
        for problem in problems[:MAX_NAMED]
    ]
    return failed(_REASONS[problems[0].rule], details=details | {"problems": listed})


def unusable_paths(candidate: Candidate) -> list[str]:
    """Paths an artifact may not hold (a bundle refuses them; a candidate built elsewhere,
    such as an oracle from a pack, is held to the same rule here)."""
    bad = [path for path in candidate.files if artifact_path_problem(path)]
    bad += [inner for _, inner in folder_file_clashes(candidate.files)]
    return sorted(set(bad))


def reference_files(task: TaskLanes) -> dict[str, bytes] | None:
    """The reference artifact's files by artifact path, or None when the task has none."""
    value = task.hidden.get("reference_artifact")
    if is_file_reference(value):
        return _referenced_files(task, value["path"])
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return {path: text.encode("utf-8") for path, text in value.items()}
    return None


def _referenced_files(task: TaskLanes, reference: Any) -> dict[str, bytes] | None:
    attached = task.files.get("reference_artifact") or ()
    if not attached or not isinstance(reference, str):
        return None
    root = posixpath.normpath(reference.strip("/"))
    files: dict[str, bytes] = {}
    for item in attached:
        # A folder's files keep their paths below it; a single file keeps its base name.
        relative = item.path[len(root) + 1 :] if item.path.startswith(root + "/") else None
        files[relative or posixpath.basename(item.path)] = item.source.read_bytes()
    return files
