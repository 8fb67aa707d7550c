"""Where layers above runs join in without runs importing them.

``pack_health`` finishes a health report once the last of its runs' evaluations is done.
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
