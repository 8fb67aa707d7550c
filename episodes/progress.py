"""A workspace action while it runs on a worker: its output streamed into the step row (not
scrubbed: see episodes.live_workspaces on why an agent's own output never is), a
heartbeat that says the worker is alive, and a stop when the episode no longer wants it.

A command may run for many minutes while the agent's answer window is a few seconds, so the
web reads what the worker wrote so far. Writes are throttled (every ``FLUSH_SECONDS`` at
most); only the last ``TAIL_CHARS`` characters are kept, with a count of everything printed,
so an output flood costs the database nothing more than a quiet command. The same watcher
stops the command (``cancel``: the live workspace kills its sandbox) when the episode is
reset or ends meanwhile: nothing of an episode may keep running after it is over.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connection
from django.utils import timezone

from episodes.models import Episode, EpisodeStatus, Step, StepState
from verifiers.verdict import storable_text

logger = logging.getLogger(__name__)
FLUSH_SECONDS = 0.5
HEARTBEAT_SECONDS = 5.0
# A running step whose worker has not beaten for this long is dead (its worker is gone).
STALE_HEARTBEAT_SECONDS = 60
TAIL_CHARS = 64 * 1024


class StepProgress:
    """Collects a running action's output and keeps its step row current (a context manager:
    the watcher thread runs inside the ``with``)."""

    def __init__(self, step: Step, *, still_wanted: Callable[[], str] | None = None) -> None:
        self.step_id = step.pk
        # Set when the action is no longer wanted: the live workspace kills its command.
        self.cancel = threading.Event()
        # Returns "" while the action is still wanted, else why it is not (the stop reason).
        self.still_wanted = still_wanted or (lambda: "")
        self.stopped_because = ""
        self._lock = threading.Lock()
        self._tail = ""
        self._total = 0
        self._dirty = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the action's side (called from the sandbox's reader, any thread)

    def on_output(self, stream: str, text: str) -> None:
        if not text:
            return
        text = storable_text(text)  # the command's own bytes: a NUL is the agent's to print
        with self._lock:
            self._total += len(text)
            self._tail = (self._tail + text)[-TAIL_CHARS:]
            self._dirty = True

    # -- the watcher

    def __enter__(self) -> StepProgress:
        self._thread = threading.Thread(
            target=self._watch, name=f"step-{self.step_id}-progress", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._flush(force=True)

    def _watch(self) -> None:
        beats = 0.0
        try:
            while not self._done.wait(FLUSH_SECONDS):
                beats += FLUSH_SECONDS
                try:
                    self._flush(force=beats >= HEARTBEAT_SECONDS)
                    self._check_wanted()
                except DatabaseError:
                    # A dropped connection must not end the watch (nor the stop it guards).
                    logger.warning("progress of step %s not written", self.step_id, exc_info=True)
                    connection.close()
                if beats >= HEARTBEAT_SECONDS:
                    beats = 0.0
        finally:
            # This thread's own database connection (Django opens one per thread).
            connection.close()

    def _check_wanted(self) -> None:
        if self.stopped_because:
            return
        why = self.still_wanted()
        if why:
            self.stopped_because = why
            self.cancel.set()

    def _flush(self, *, force: bool) -> None:
        with self._lock:
            if not (self._dirty or force):
                return
            tail, total, self._dirty = self._tail, self._total, False
        fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
        if total:
            fields |= {"live_output": tail, "live_chars": total}
        Step.objects.filter(pk=self.step_id, state=StepState.RUNNING).update(**fields)


def episode_still_wants(episode_id: int, reset_count: int) -> Callable[[], str]:
    """A check for StepProgress: the episode is still open and has not been reset since."""

    def check() -> str:
        row = Episode.objects.filter(pk=episode_id).values("status", "reset_count").first()
        if row is None or row["status"] != EpisodeStatus.OPEN:
            return "the episode ended"
        if row["reset_count"] != reset_count:
            return "the episode was reset"
        return ""

    return check
