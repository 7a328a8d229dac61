"""Holding a sealed segment's bytes still while they are read as a plain file.

Invariant: while a SealedHold is open, the segment file's bytes are the pages
of the rows committed when it was taken, and nothing else. Its connection
keeps a read transaction, in which no writer can commit to a rollback-journal
file, and no checkpoint can write into a WAL file whose log was empty when the
transaction began. A hold is given only for a file whose bytes hold nothing
but its rows' pages: no free page, no `rebuild` mark (a delete that may have
left bytes in page slack, see storage/erasure.py), no journal left by a
crashed writer, no log to fold in. Anything else gets no hold, and the caller
takes a snapshot (replica_source.snapshot_segment) as before.

A hold blocks a writer that wants to commit to the file for as long as it is
open, so it is only for a segment no append can reach (storage/workspace.py
appends to this replica's newest segment only), and compaction, which may
wait on it, treats a busy segment as one to finish next time.
"""

from __future__ import annotations

import os
import sqlite3

from agent_journal.storage.connection import connect
from agent_journal.storage.erasure import REBUILD_KEY


class SealedHold:
    """A read transaction on one sealed segment, to be closed once its bytes are read."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn: sqlite3.Connection | None = conn

    @classmethod
    def take(cls, path: str) -> SealedHold | None:
        """A hold on `path`, or None when its bytes may hold more than its rows
        (or it cannot be read: the snapshot that replaces the hold says why)."""
        if os.path.exists(path + "-journal"):
            return None
        try:
            conn = connect(path, readonly=True)
        except sqlite3.Error:
            return None
        try:
            conn.execute("BEGIN")
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            marked = conn.execute("SELECT 1 FROM meta WHERE key = ?", (REBUILD_KEY,)).fetchone()
            if free == 0 and marked is None and _log_empty(path):
                return cls(conn)
        except sqlite3.Error:
            pass
        conn.close()
        return None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # (ends the read transaction)


def _log_empty(path: str) -> bool:
    try:
        return os.path.getsize(path + "-wal") == 0
    except FileNotFoundError:
        return True
