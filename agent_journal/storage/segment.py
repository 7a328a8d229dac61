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
    """Read-write so a hot journal left by a killed writer can be rolled back;
    read-only when the file cannot be opened for writing."""
    try:
        return connect(path)
    except sqlite3.Error:
        return connect(path, readonly=True)


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
