"""Where layers above runs join in without runs importing them.

``pack_health`` finishes a health report once the last of its runs' evaluations is done;
``episodes`` closes a cancelled run's live episodes (runs.control).
"""

from __future__ import annotations

from collections.abc import Callable

EvaluationDone = Callable[[int], None]

_evaluation_done: list[EvaluationDone] = []


def on_evaluation_done(callback: EvaluationDone) -> None:
    """Call ``callback(evaluation_id)`` in the process that finished the evaluation."""
    if callback not in _evaluation_done:
        _evaluation_done.append(callback)


def evaluation_done(evaluation_id: int) -> None:
    for callback in list(_evaluation_done):
        callback(evaluation_id)


RunCancelled = Callable[[int, str], None]

_run_cancelled: list[RunCancelled] = []


def on_run_cancelled(callback: RunCancelled) -> None:
    """Call ``callback(run_id, reason)`` when a run is cancelled, before its open work is
    released (a live run's episodes close first, so what they hold is scored)."""
    if callback not in _run_cancelled:
        _run_cancelled.append(callback)


def run_cancelled(run_id: int, reason: str) -> None:
    for callback in list(_run_cancelled):
        callback(run_id, reason)
