"""kombu's filesystem transport, made safe for several producers and consumers.

The embedded default broker is a folder (DESIGN.md §6). kombu's own filesystem channel
creates a message file and then writes it, so a worker listing the folder in between reads
an empty file, fails to decode it and stops consuming (seen here: a worker died on
``JSONDecodeError`` while a run was being submitted). It also claims a message by moving it
to the temp folder, which on another filesystem is a copy that two consumers can both make.

This channel writes each message under a hidden name in the queue folder and renames it into
place (atomic on one filesystem), and claims a message by renaming it into the processed
folder beside it, which exactly one consumer can do. ``filesystem://`` URLs use it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import uuid
from collections.abc import Callable
from queue import Empty
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)
INCOMING = ".incoming"
TABLE_READ_ATTEMPTS = 20


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{int(round(time.monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        incoming = os.path.join(self.data_folder_out, INCOMING)
        os.makedirs(incoming, exist_ok=True)
        draft = os.path.join(incoming, name)
        try:
            with open(draft, "wb") as stream:
                stream.write(str_to_bytes(dumps(payload)))
            os.rename(draft, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add message {name!r} to the queue") from exc

    def _get(self, queue: str) -> Any:
        wanted = f"{queue}.msg"
        claimed_folder = self.processed_folder
        os.makedirs(claimed_folder, exist_ok=True)
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.partition(".")[2] != wanted:
                continue
            claimed = os.path.join(claimed_folder, filename)
            try:
                os.rename(os.path.join(self.data_folder_in, filename), claimed)
            except OSError:
                continue  # another consumer claimed it first
            try:
                with open(claimed, "rb") as stream:
                    payload = stream.read()
            finally:
                if not self.store_processed:
                    os.remove(claimed)
            try:
                return loads(bytes_to_str(payload))
            except ValueError:
                # Never stop consuming over one bad file; the job state lives in the database
                # and the reaper re-sends whatever this message carried.
                logger.error("dropped an unreadable broker message %s", filename)
        raise Empty()

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        # kombu creates a missing exchange file with "wb" and locks it only afterwards, so a
        # second process binding at the same moment (a worker and beat starting together)
        # locked it first, read an empty table and died on JSONDecodeError.
        wanted = _table_row(routing_key, pattern, queue)
        self.control_folder.mkdir(exist_ok=True)
        self._edit_table(
            exchange, lambda rows: None if wanted in rows else [wanted, *rows], create=True
        )

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        # The queue itself goes as kombu's virtual channel deletes it; its row in the exchange
        # table goes under the same lock discipline as a bind (kombu's own read can meet the
        # empty file of a bind in progress too).
        super(filesystem.Channel, self)._delete(
            queue, exchange, routing_key, pattern, *args, **kwargs
        )
        gone = _table_row(routing_key, pattern, queue)
        self._edit_table(
            exchange, lambda rows: [row for row in rows if row != gone] if gone in rows else None
        )

    def _edit_table(
        self,
        exchange: str,
        edit: Callable[[list[Any]], list[Any] | None],
        *,
        create: bool = False,
    ) -> None:
        """Read an exchange's table and write back what ``edit`` returns (None: unchanged),
        all under the file's exclusive lock. The file is never truncated before it is locked,
        and an empty file (created, not written yet) is an empty table."""
        table_file = self._exchange_file(exchange)
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            descriptor = os.open(table_file, flags, 0o644)
        except FileNotFoundError:
            return  # no table: nothing bound, nothing to take out
        except OSError as exc:
            raise ChannelError(f"Cannot open {table_file}") from exc
        try:
            with os.fdopen(descriptor, "r+b", buffering=0) as stream:
                fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
                text = bytes_to_str(stream.read())
                rows = (
                    [filesystem.exchange_queue_t(*row) for row in loads(text)]
                    if text.strip()
                    else []
                )
                edited = edit(rows)
                if edited is None:
                    return
                stream.seek(0)
                stream.truncate()
                stream.write(str_to_bytes(dumps(edited)))
        except OSError as exc:
            raise ChannelError(f"Cannot update {table_file}") from exc

    def get_table(self, exchange: str) -> Any:
        # A binder creates the exchange file before it writes the table under its lock; a
        # reader in that instant sees an empty table file. Read again rather than fail.
        for _ in range(TABLE_READ_ATTEMPTS - 1):
            try:
                return super().get_table(exchange)
            except ValueError:
                time.sleep(0.01)
        return super().get_table(exchange)


def _table_row(routing_key: str, pattern: str, queue: str) -> Any:
    return filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")


class Transport(filesystem.Transport):
    Channel = Channel


TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"
