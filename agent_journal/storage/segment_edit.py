"""What every change a compaction makes to a segment shares, in place or by copy.

Invariants:
- A segment is changed only while its rows past the seq the plan was read
  at (or the previous change left) are none, or all ones the plan does not
  depend on (`check_high`, under the segment's write lock); otherwise
  SegmentGrew, and it is left alone from there on.
- A tombstone is rewritten only while its row is still the one read (its
  checksum), to exactly the canonical bytes of its purged rewrite.
- A replica's own segment, and an adopted import, keep the id of every event
  deleted from them (`removed`): ids are not content, and a merge must never
  bring those events back (INVARIANTS R3).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from typing import NamedTuple

from agent_journal.core import codec
from agent_journal.core.model import Event
from agent_journal.storage import provenance

# The `meta` row a segment carries from its first delete in place until its
# rebuild (erasure.rebuild_marked).
REBUILD_KEY = "rebuild"

# Shown the events appended past the read: whether the plan still holds.
Tolerate = Callable[[list[Event | None]], bool]


class SegmentGrew(Exception):
    """A segment gained rows after it was read; it must be left alone.

    `deleted` lists the event ids whose deletion earlier chunks of the same
    segment committed before the growth was seen (empty when nothing changed),
    `high` the segment's highest seq after them and `clean` whether its WAL was
    truncated afterwards.
    """

    def __init__(self, path: str, deleted: list[str] | None = None, high: int = 0,
                 clean: bool = True) -> None:
        super().__init__(path)
        self.deleted = deleted or []
        self.high = high
        self.clean = clean


class TombstoneRewrite(NamedTuple):
    """One tombstone row to turn purged (compaction_rows.Rewrite says how it was made)."""

    event_id: str
    checksum: str  # as read: the row is rewritten only while it is still this
    body: bytes | None  # the new body; None: SQLite turns the flag in place
    new_checksum: str


class Applied(NamedTuple):
    """What the changes to one segment did."""

    high: int  # the segment's highest seq afterwards
    rewritten: set[str]  # the tombstones turned purged
    clean: bool  # False: a WAL that could not be truncated may hold old page images


def text_is_utf8(conn: sqlite3.Connection, schema: str = "main") -> bool:
    """SQLite reads a blob cast to text in the database's encoding: only a UTF-8
    segment's text is the body's own."""
    return str(conn.execute(f"PRAGMA {schema}.encoding").fetchone()[0]).upper() == "UTF-8"


def max_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])


def rows_after(conn: sqlite3.Connection, seq: int) -> list[Event | None]:
    """The events of the rows past `seq`; None for a row that does not decode."""
    out: list[Event | None] = []
    for event_id, body, digest in conn.execute(
            "SELECT event_id, body, checksum FROM events WHERE seq > ? ORDER BY seq", (seq,)):
        try:
            ev = codec.decode(body, digest)
        except codec.MalformedEvent:
            out.append(None)
            continue
        out.append(ev if ev.event_id == event_id else None)
    return out


def check_high(c: sqlite3.Connection, path: str, seen: int, tolerate: Tolerate | None) -> None:
    """Under the write lock: raise SegmentGrew unless the segment's rows past
    `seen` (none, or only ones `tolerate` accepts) leave the plan as it was."""
    high = max_seq(c)
    if high != seen and (tolerate is None or high < seen
                         or not tolerate(rows_after(c, seen))):
        raise SegmentGrew(path)


_CREATE_REMOVED = "CREATE TABLE IF NOT EXISTS {schema}.removed " \
    "(event_id TEXT PRIMARY KEY) WITHOUT ROWID"


def keep_removed_ids(c: sqlite3.Connection, ids: list[str], schema: str = "main") -> None:
    """Note the ids of the events deleted from a segment, where it keeps them.

    A replica's own segment keeps no provenance, so it keeps the ids it lost
    here instead (ids are not content): a merge then never imports them again
    from a replica that copied them before (INVARIANTS R3). So does an adopted
    import, whose provenance is a view that loses a row's slot with the row; a
    built import's `origin` table already names what it lost.
    """
    if ids and provenance.kind(c, schema) != "table":
        c.execute(_CREATE_REMOVED.format(schema=schema))
        c.executemany(f"INSERT OR IGNORE INTO {schema}.removed(event_id) VALUES (?)",
                      [(i,) for i in ids])


_REWRITE_LISTED = (
    "UPDATE events SET body = CAST(json_extract(j.value, '$[2]') AS BLOB), "
    "checksum = json_extract(j.value, '$[3]') FROM json_each(?) AS j "
    "WHERE events.event_id = json_extract(j.value, '$[0]') "
    "AND events.checksum = json_extract(j.value, '$[1]')")


# A rewrite whose body is None (see `TombstoneRewrite`): the flag turned in place.
_FLIP_TEXT = ("body = CAST(replace(CAST(body AS TEXT), '\"data\":{\"purged\":false,', "
              "'\"data\":{\"purged\":true,') AS BLOB)")


_FLIP_LISTED = (
    f"UPDATE events SET {_FLIP_TEXT}, checksum = json_extract(j.value, '$[2]') "
    "FROM json_each(?) AS j WHERE events.event_id = json_extract(j.value, '$[0]') "
    "AND events.checksum = json_extract(j.value, '$[1]')")


_FLIP_ONE = f"UPDATE events SET {_FLIP_TEXT}, checksum = ? WHERE event_id = ? AND checksum = ?"


def rewrite_tombstones(c: sqlite3.Connection, rows: Iterable[TombstoneRewrite], *,
                       bulk: bool) -> set[str]:
    """Inside the caller's transaction: turn these tombstones purged, each only
    while its row is the one read; returns the event ids rewritten. `bulk`:
    as one statement over a JSON list (erasure.bulk_json_usable)."""
    rows = list(rows)
    before = c.total_changes
    flips = [row for row in rows if row.body is None]
    whole = [row for row in rows if row.body is not None]
    if bulk and flips:
        c.execute(_FLIP_LISTED, (json.dumps(
            [[row.event_id, row.checksum, row.new_checksum] for row in flips]),))
    elif flips:
        c.executemany(_FLIP_ONE, [(row.new_checksum, row.event_id, row.checksum)
                                  for row in flips])
    if bulk and whole:
        c.execute(_REWRITE_LISTED, (json.dumps(
            [[row.event_id, row.checksum, row.body.decode(),  # type: ignore[union-attr]
              row.new_checksum] for row in whole], ensure_ascii=False),))
    elif whole:
        c.executemany("UPDATE events SET body = ?, checksum = ? "
                      "WHERE event_id = ? AND checksum = ?",
                      [(row.body, row.new_checksum, row.event_id, row.checksum)
                       for row in whole])
    if c.total_changes - before == len(rows):
        return {row.event_id for row in rows}
    # some row changed since it was read: find out which were rewritten
    return {row.event_id for row in rows
            if c.execute("SELECT 1 FROM events WHERE event_id = ? AND checksum = ?",
                         (row.event_id, row.new_checksum)).fetchone()}
