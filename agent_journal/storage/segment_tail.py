"""A segment's rows above a seq: where a push's snapshot ends, and what came after it.

Invariants:
- Seqs only grow in a segment (appends take the next one, compaction deletes
  and keeps the others' seqs), so the rows above the highest seq a pushed
  snapshot holds are the rows written since, less those the snapshot's scrub
  would have left out anyway.
- Nothing is written: a live segment is opened as every reader opens it, a
  snapshot immutable; a file that cannot be read raises Unreadable with the
  one-line reason.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Container, Iterator
from contextlib import contextmanager

from agent_journal.core import merge_plan
from agent_journal.storage.connection import connect, describe_sqlite_error
from agent_journal.storage.replica_source import Unreadable
from agent_journal.storage.segment import never_initialised, open_segment_for_read


def highest_seq(path: str) -> int:
    """The highest seq of a snapshot nobody writes (0 when it holds no row)."""
    with _reading(path, live=False) as conn:
        if conn is None:
            return 0
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])


def sizes_above(path: str, seq: int, tombstoned: Container[str]) -> list[int]:
    """The body sizes, in seq order, of the rows above `seq` that no tombstone in
    `tombstoned` withholds (merge_plan.withheld, by the rows' type and subject), in
    a segment a writer may be appending to."""
    with _reading(path, live=True) as conn:
        if conn is None:
            return []
        rows = conn.execute("SELECT type, subject, length(body) FROM events WHERE seq > ? "
                            "ORDER BY seq", (seq,)).fetchall()
    return [int(size or 0) for type_, subject, size in rows
            if not merge_plan.withheld(type_, subject, tombstoned)]


@contextmanager
def _reading(path: str, *, live: bool) -> Iterator[sqlite3.Connection | None]:
    """The file opened for reading, as every reader of a live segment opens it, or
    immutable; None for a file that holds no table yet (empty)."""
    try:
        conn = open_segment_for_read(path) if live else connect(path, immutable=True)
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    try:
        yield None if never_initialised(conn) else conn
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    finally:
        conn.close()
