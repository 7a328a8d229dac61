"""A segment's rows above a seq: where a push's snapshot ends, what came after it, and
those rows as a file of their own (a push's delta; a pull joining deltas).

Invariants:
- Seqs only grow in a segment (appends take the next one, compaction deletes
  and keeps the others' seqs), so the rows above the highest seq a pushed
  snapshot holds are the rows written since, less those the snapshot's scrub
  would have left out anyway.
- Nothing is written to a segment: a live one is opened as every reader opens
  it, a snapshot immutable; a file that cannot be read raises Unreadable with
  the one-line reason. A tail is taken in one read transaction, and only when
  the rows up to its tip are the ones the tip names.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Container, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from agent_journal.core import merge_plan
from agent_journal.core.delta_plan import Tip, next_tip
from agent_journal.storage.connection import connect, describe_sqlite_error, quote_path
from agent_journal.storage.files import create_private_file, unlink_quietly
from agent_journal.storage.replica_source import TOMBSTONE_CANDIDATES_WHERE, Unreadable
from agent_journal.storage.segment import (
    SCHEMA,
    SEGMENT_FORMAT,
    never_initialised,
    open_segment_for_read,
)


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


class Tail(NamedTuple):
    """The rows a segment gained after a tip, copied into a file of their own."""

    rows: int  # rows copied (withheld ones included: the scrub comes after)
    tip: Tip  # the segment's tip once these rows are counted


# The meta rows a tail carries: what makes it a segment, nothing a writer marked.
_TAIL_META = ("format", "workspace", "replica")


def read_tip(path: str, high: int) -> Tip:
    """The tip of a live segment at `high`: the id of its row there ('' for none) and
    how many rows it holds up to it."""
    with _reading(path, live=True) as conn:
        if conn is None:
            return Tip(high, "", 0)
        conn.execute("BEGIN")
        try:
            return _tip(conn, high)
        finally:
            conn.execute("COMMIT")


def _tip(conn: sqlite3.Connection, high: int) -> Tip:
    row = conn.execute("SELECT event_id FROM events WHERE seq = ?", (high,)).fetchone()
    # All the rows less those above: the whole count reads the smallest index, the
    # rest only the tail of the table, where counting up to `high` would read it all.
    total = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    above = conn.execute("SELECT count(*) FROM events WHERE seq > ?", (high,)).fetchone()[0]
    return Tip(high, "" if row is None else str(row[0]), int(total) - int(above))


def tombstone_candidates_above(path: str, tip: Tip | None
                               ) -> tuple[list[tuple[Any, ...]], Tip] | None:
    """The rows of a live segment above `tip.high` that could be tombstones (all its
    rows without a tip), as SegmentRows(only="tombstone_candidates") reads them, and
    where they end, in one read transaction; None when the row at the tip is not the
    one it names (a row deleted there and its seq taken again: read it all)."""
    high = 0 if tip is None else tip.high
    with _reading(path, live=True) as conn:
        if conn is None:
            return [], Tip(0, "", 0)
        conn.execute("BEGIN")
        try:
            if tip is not None and _tip(conn, high).event_id != tip.event_id:
                return None
            rows = conn.execute(
                "SELECT seq, event_id, type, subject, ts, body, checksum FROM events "
                "WHERE seq > ? AND (" + TOMBSTONE_CANDIDATES_WHERE.removeprefix(" WHERE ")
                + ") ORDER BY seq", (high,)).fetchall()
            last = conn.execute("SELECT seq, event_id FROM events ORDER BY seq DESC LIMIT 1"
                                ).fetchone()
        finally:
            conn.execute("COMMIT")
    end = Tip(high, "" if tip is None else tip.event_id, 0) if last is None or \
        last[0] <= high else Tip(int(last[0]), str(last[1]), 0)
    return rows, end


def take_tail(path: str, tip: Tip, dest: str) -> Tail | None:
    """Copy the rows of a live segment above `tip.high` into the new file `dest` (the
    segment's schema and meta, those rows with their seqs and bytes), in one read
    transaction that first checks the rows up to the tip are still the same ones
    (their count, the id at the tip). None, and nothing written, when they are not:
    the segment is then snapshotted whole."""
    if not create_private_file(dest):
        raise FileExistsError(dest)
    try:
        _new_segment_file(dest)
        with _reading(path, live=True) as conn:
            if conn is None:
                unlink_quietly(dest)
                return None
            conn.execute("ATTACH DATABASE ? AS tail", (dest,))
            conn.execute("BEGIN")
            try:
                if _tip(conn, tip.high) != tip:
                    unlink_quietly(dest)
                    return None
                conn.execute("INSERT INTO tail.meta(key, value) SELECT key, value FROM meta "
                             f"WHERE key IN {_TAIL_META!r}")
                rows = conn.execute("INSERT INTO tail.events SELECT seq, event_id, type, "
                                    "subject, ts, body, checksum FROM events WHERE seq > ? "
                                    "ORDER BY seq", (tip.high,)).rowcount
                last = conn.execute("SELECT seq, event_id FROM tail.events ORDER BY seq DESC "
                                    "LIMIT 1").fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    except BaseException:
        unlink_quietly(dest)
        raise
    if last is None:
        return Tail(0, tip)
    return Tail(rows, next_tip(tip, int(last[0]), str(last[1]), rows))


def _new_segment_file(dest: str) -> None:
    """The segment schema in the (empty) file `dest`, no journal: a private file."""
    conn = sqlite3.connect(dest, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.executescript(SCHEMA)
        conn.execute(f"PRAGMA user_version = {SEGMENT_FORMAT}")
    finally:
        conn.close()


def append_rows(into: str, source: str) -> int:
    """Append every row of the segment file `source` to the private segment file
    `into` (a pull joining a delta to what it fetched before it); their seqs must be
    above every seq `into` holds. Raises Unreadable."""
    try:
        conn = sqlite3.connect(into, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("ATTACH DATABASE ? AS more", (f"file:{quote_path(source)}?mode=ro&"
                                                       "immutable=1",))
            conn.execute("BEGIN")
            top = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
            low = conn.execute("SELECT min(seq) FROM more.events").fetchone()[0]
            if low is not None and low <= top:
                conn.execute("ROLLBACK")
                raise Unreadable("its rows overlap the rows before it")
            n = conn.execute("INSERT INTO events SELECT seq, event_id, type, subject, ts, "
                             "body, checksum FROM more.events ORDER BY seq").rowcount
            conn.execute("COMMIT")
            return int(n)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
