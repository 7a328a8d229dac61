"""An import's one write transaction: all of an input's events, or none of them.

Invariants:
- Every event an import writes goes to this replica's current segment inside
  one `BEGIN IMMEDIATE` transaction, batch by batch: the rows go to the file as
  they are written (SQLite spills what its cache cannot hold), so memory holds
  one batch, and any failure before the commit (a bad line near the end, a
  refusal) rolls the whole input back.
- Inside it, the import's look-ups (the phases an observation holds, the
  tombstones that name one) ask the current segment through the transaction's
  own connection, which sees the batches written so far; the other segments
  through connections of their own. A look-up never waits on the lock this
  transaction holds.
- While it is open, the workspace's compaction lock is held (storage/locks.py):
  no compaction erases a blob an uncommitted row of the import cites, or
  replaces the segment under it. A compaction running already makes the import
  wait a few seconds, then refuse, writing nothing.
- Writers (hooks) wait on the segment's lock while the import writes, as on
  any writer; a hook whose patience runs out spools its event
  (storage/spool.py), which the next hook journals.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from contextlib import ExitStack
from typing import Any

from agent_journal.core.errors import BusyError, CompactionRunningError, StorageError
from agent_journal.core.model import Event
from agent_journal.storage.connection import describe_sqlite_error, is_busy
from agent_journal.storage.locks import compaction_lock
from agent_journal.storage.segment import insert_events
from agent_journal.storage.workspace import Workspace, observation_phases

WRITE_ATTEMPTS = 6


class ImportTransaction:
    """Use as a context manager: the transaction commits when the block ends
    normally, and rolls back on any exception."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._stack = ExitStack()
        self._writer = ws.writer()
        self._conn: sqlite3.Connection | None = None

    def __enter__(self) -> ImportTransaction:
        try:
            self._stack.enter_context(compaction_lock(self.ws))
        except BlockingIOError:
            raise CompactionRunningError(
                "a compact --apply is running on this workspace; nothing imported. "
                "Re-run when it has finished") from None
        try:
            self._conn = self._writer.open_current()
            _begin(self._conn)
        except BaseException:
            self._writer.close()
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        conn = self._conn
        try:
            if conn is not None and conn.in_transaction:
                conn.execute("ROLLBACK" if kind is not None else "COMMIT")
        except sqlite3.Error as error:
            raise StorageError(f"cannot import into workspace {self.ws.name}: "
                               f"{describe_sqlite_error(error)}") from None
        finally:
            self._writer.close()
            self._stack.close()

    def observation_phases(self, ids: Iterable[str]) -> dict[str, tuple[set[Any], str]]:
        """workspace.observation_phases, the current segment asked in this transaction."""
        assert self._conn is not None
        return observation_phases(self.ws, ids, held={self._writer.current: self._conn})

    def tombstoned_among(self, ids: Iterable[str]) -> set[str]:
        """Workspace.tombstoned_among, the current segment asked in this transaction."""
        return self._writer.tombstoned_among(ids)

    def append(self, events: list[Event]) -> int:
        """Insert a batch; returns the rows written (an id held already is not)."""
        assert self._conn is not None
        try:
            return insert_events(self._conn, events)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot import into workspace {self.ws.name}: "
                               f"{describe_sqlite_error(exc)}") from None


def _begin(conn: sqlite3.Connection) -> None:
    """BEGIN IMMEDIATE, retried while other writers hold the lock (connection.run_write)."""
    delay = 0.05
    for attempt in range(WRITE_ATTEMPTS):
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise StorageError(f"cannot import: {describe_sqlite_error(exc)}") from None
            if attempt + 1 == WRITE_ATTEMPTS:
                break
            time.sleep(delay)
            delay *= 2
    raise BusyError("the journal stayed locked by other writers; retry")
