"""The segment file: its schema, its creation, and appending rows to it.

Invariants:
- A segment is one SQLite file holding the events of one workspace. A replica
  appends only to segments named after its own replica id; segments from other
  replicas (imports) are never appended to. Only compaction deletes rows.
- A segment file with no table at all (its writer died before the schema was
  committed) is an empty segment on every path that meets it; one with tables
  but no `events` table is unreadable (see `never_initialised`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable

from agent_journal.core import codec
from agent_journal.core.model import Event
from agent_journal.storage.connection import JOURNAL_MODE, connect, run_write

SEGMENT_SUFFIX = ".sqlite"
SEGMENT_FORMAT = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    subject TEXT,
    ts TEXT NOT NULL,
    body BLOB NOT NULL,
    checksum TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_subject ON events(subject);
CREATE VIEW IF NOT EXISTS events_json AS
    SELECT seq, event_id, type, subject, ts, CAST(body AS TEXT) AS body, checksum FROM events;
"""
# `events_json` holds nothing: it shows each body as the JSON text it is, for people
# reading a segment in sqlite-utils, Datasette or the sqlite3 shell (the table keeps
# bodies as BLOBs, which those tools show as "<Binary: N bytes>"). Nothing reads it.


def init_segment(conn: sqlite3.Connection, *, workspace: str, replica: str) -> None:
    """Give a fresh segment its schema and journal mode (idempotent)."""
    current = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if current.lower() != JOURNAL_MODE:
        conn.execute(f"PRAGMA journal_mode={JOURNAL_MODE}")

    def work(c: sqlite3.Connection) -> None:
        if c.execute("PRAGMA user_version").fetchone()[0] != 0:
            return
        for statement in SCHEMA.strip().split(";"):
            if statement.strip():
                c.execute(statement)
        c.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [
            ("format", str(SEGMENT_FORMAT)), ("workspace", workspace), ("replica", replica),
        ])
        c.execute(f"PRAGMA user_version = {SEGMENT_FORMAT}")

    run_write(conn, work)


def insert_events(conn: sqlite3.Connection, events: Iterable[Event]) -> int:
    """Insert inside the caller's transaction; events already present are skipped."""
    rows = []
    for ev in events:
        body, digest = codec.encode(ev)
        rows.append((ev.event_id, ev.type, ev.id, ev.ts, body, digest))
    before = conn.total_changes
    conn.executemany(
        "INSERT OR IGNORE INTO events(event_id, type, subject, ts, body, checksum) "
        "VALUES (?, ?, ?, ?, ?, ?)", rows)
    return conn.total_changes - before


def open_segment_for_read(path: str) -> sqlite3.Connection:
    """A read-only connection: one that cannot play a journal back.

    SQLite finds a journal by the file's name: a writable connection left on a
    segment a compaction's copy replaced would take the journal of a writer of
    the new file for a crashed one, play it back and delete it (swap_guard.py).
    A read-only one is refused instead (SQLITE_READONLY_ROLLBACK, "attempt to
    write a readonly database"). So is one that finds the journal a killed writer
    left: that is rolled back here, once, by a writable connection made under
    the swap guard and closed at once, and the file is opened read-only again."""
    try:
        return _read_only(path)
    except sqlite3.OperationalError as exc:
        if "readonly" not in str(exc):
            raise
    from agent_journal.storage.swap_guard import writer_guard

    with writer_guard(os.path.dirname(path)):
        conn = connect(path)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    return _read_only(path)


def _read_only(path: str) -> sqlite3.Connection:
    """Raises OperationalError when a journal lies beside the file; any other fault
    is the caller's first statement's to report, as with every connection."""
    conn = connect(path, readonly=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        if "readonly" in str(exc):
            conn.close()
            raise
    except sqlite3.Error:
        pass
    return conn


def never_initialised(conn: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether the file holds no table at all: created (perhaps given its journal
    mode) by a writer that died before its schema committed.

    The one rule for "an empty segment", on every path that meets a segment
    (reads, compaction, export, merge): such a file holds no event, so it is
    empty, not damaged. A file with tables but no `events` table is unreadable.
    """
    return conn.execute(f"SELECT count(*) FROM {schema}.sqlite_master WHERE type = 'table'"
                        ).fetchone()[0] == 0


def has_subject(conn: sqlite3.Connection, subject: str, type_: str | None) -> bool:
    if type_ is None:
        row = conn.execute("SELECT 1 FROM events WHERE subject = ? LIMIT 1", (subject,)).fetchone()
    else:
        row = conn.execute("SELECT 1 FROM events WHERE subject = ? AND type = ? LIMIT 1",
                           (subject, type_)).fetchone()
    return row is not None


IMPORT_TEMP_PREFIX = ".import-"
