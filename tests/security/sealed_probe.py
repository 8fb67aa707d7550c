"""Watches every way a process could reach sealed lanes, and says who did.

While a ``SealedProbe`` is active it records:
- every SQL statement that names the sealed-value table (a Django ``execute_wrapper``:
  ORM, ``select_related``, a raw cursor, ``getattr(row, "se" + "aled")`` — all of them end
  up as SQL on that table);
- every ``open`` of a path under the ``pack_sealed`` storage root or the local blob cache,
  which holds copies of sealed files (a Python audit hook: storage API or plain ``open``);
- every call of the accessor (``runs.privileged.SealedReader``'s reads, and
  ``EvaluationSealedReader``'s for an uploaded evaluation's sealed data).

Each low-level read is attributed by the call stack: inside a ``SealedReader`` read (the
privileged path), inside the evaluator's read (``packs.selectors.evaluator_lanes_for_tasks``),
inside the reader of an uploaded evaluation's program files (``PROGRAM``: not sealed data,
but only its packs' maintainers and reviewers may cause one), or neither — a violation
whatever the role.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any

from django.core.files.storage import storages
from django.db import connection

from evaluations import selectors as evaluation_selectors
from packs import selectors as pack_selectors
from packs.blobs import blob_cache
from packs.models import SealedValue
from runs.privileged import EvaluationSealedReader, SealedReader

ACCESSOR_METHODS = ("resource", "file_list", "file")
# An uploaded evaluation's sealed data: the same gate (privilege, debug mode, audit).
EVALUATION_ACCESSOR_METHODS = ("sealed_file",)
PRIVILEGED = "privileged accessor"
EVALUATOR = "evaluator"
# An uploaded evaluation's program files, shown to its packs' maintainers and reviewers
# (evaluations.selectors.program_files): in the sealed store, but not sealed data.
PROGRAM = "evaluation program reader"
UNATTRIBUTED = "neither"


@dataclass
class SealedRead:
    kind: str  # "sql" or "open"
    what: str
    path: str  # PRIVILEGED, EVALUATOR or UNATTRIBUTED
    caller: str  # the innermost project frame, for the failure message


@dataclass
class SealedProbe:
    reads: list[SealedRead] = field(default_factory=list)
    accessor_calls: list[str] = field(default_factory=list)

    def unattributed(self) -> list[SealedRead]:
        return [read for read in self.reads if read.path == UNATTRIBUTED]

    def by_path(self, path: str) -> list[SealedRead]:
        return [read for read in self.reads if read.path == path]


_ACTIVE: list[SealedProbe] = []
_SEALED_ROOTS: list[str] = []
_HOOK_INSTALLED = False


# Taken at import, before any probe wraps the methods.
ACCESSOR_CODES: frozenset[CodeType] = frozenset(
    [getattr(SealedReader, name).__code__ for name in ACCESSOR_METHODS]
    + [getattr(EvaluationSealedReader, name).__code__ for name in EVALUATION_ACCESSOR_METHODS]
)
PROGRAM_CODES: frozenset[CodeType] = frozenset({evaluation_selectors.program_files.__code__})
EVALUATOR_CODES: frozenset[CodeType] = frozenset(
    {pack_selectors.evaluator_lanes_for_tasks.__code__, pack_selectors._task_files.__code__}
)


def _attribute() -> tuple[str, str]:
    accessor, evaluator = ACCESSOR_CODES, EVALUATOR_CODES
    frame = sys._getframe(2)
    caller = ""
    while frame is not None:
        code = frame.f_code
        if code in accessor:
            return PRIVILEGED, caller or code.co_qualname
        if code in evaluator:
            return EVALUATOR, caller or code.co_qualname
        if code in PROGRAM_CODES:
            return PROGRAM, caller or code.co_qualname
        filename = code.co_filename
        if not caller and "/site-packages/" not in filename and "sealed_probe" not in filename:
            caller = f"{Path(filename).name}:{frame.f_lineno} {code.co_qualname}"
        frame = frame.f_back
    return UNATTRIBUTED, caller


def _record(kind: str, what: str) -> None:
    path, caller = _attribute()
    for probe in _ACTIVE:
        probe.reads.append(SealedRead(kind, what[:300], path, caller))


def _sql_watcher(execute: Callable, sql: str, params: Any, many: bool, context: Any) -> Any:
    if _ACTIVE and SealedValue._meta.db_table in str(sql).lower():
        _record("sql", str(sql))
    return execute(sql, params, many, context)


def _open_hook(event: str, args: tuple) -> None:
    # Installed once per process (audit hooks cannot be removed); idle without a probe.
    if event != "open" or not _ACTIVE or not _SEALED_ROOTS:
        return
    target = args[0]
    if isinstance(target, bytes):
        target = target.decode("utf-8", "replace")
    if isinstance(target, str) and any(target.startswith(root) for root in _SEALED_ROOTS):
        _record("open", target)


def _wrap_accessor(probe: SealedProbe, name: str, owner: type = SealedReader) -> Callable:
    original = getattr(owner, name)

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        probe.accessor_calls.append(f"{name}{args}")
        return original(self, *args, **kwargs)

    return recorded


@contextmanager
def sealed_probe() -> Iterator[SealedProbe]:
    """Record every sealed read of this process (this thread's database connection)."""
    global _HOOK_INSTALLED
    probe = SealedProbe()
    if not _HOOK_INSTALLED:
        sys.addaudithook(_open_hook)
        _HOOK_INSTALLED = True
    locations = (Path(storages["pack_sealed"].location), Path(blob_cache().root))
    with ExitStack() as stack:
        roots = {
            str(path)
            for location in locations
            for path in (location.absolute(), location.resolve())
        }
        for root in roots:
            _SEALED_ROOTS.append(root)
            stack.callback(_SEALED_ROOTS.remove, root)
        for name in ACCESSOR_METHODS:
            original = getattr(SealedReader, name)
            setattr(SealedReader, name, _wrap_accessor(probe, name))
            stack.callback(setattr, SealedReader, name, original)
        for name in EVALUATION_ACCESSOR_METHODS:
            original = getattr(EvaluationSealedReader, name)
            setattr(
                EvaluationSealedReader, name, _wrap_accessor(probe, name, EvaluationSealedReader)
            )
            stack.callback(setattr, EvaluationSealedReader, name, original)
        stack.enter_context(connection.execute_wrapper(_sql_watcher))
        _ACTIVE.append(probe)
        stack.callback(_ACTIVE.remove, probe)
        yield probe


def describe(reads: list[SealedRead]) -> str:
    return "\n".join(f"{read.kind} by {read.caller}: {read.what}" for read in reads[:10])
