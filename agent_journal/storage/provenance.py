"""Where an import keeps the append slot each of its events came from.

Invariant: every import answers `SELECT event_id, replica, segment, seq FROM
origin` with one row per event it imported and has not lost to a merge, and
no row for an event it never held. A built import keeps those rows in an
`origin` table; an adopted import (another replica's own segment published
in place by a pull, whose rows keep the seq they had there) has an `origin`
view over its own rows instead, so adopting writes no row. Readers therefore
ask `kind` whether a file has provenance, never for a table by name.

The two differ in one way: a view loses a row's slot with the row. What
compaction removes from an adopted import is therefore kept as an own
segment keeps it, in a `removed` table (storage/erasure.py), while a table
keeps the slot of a removed event and so already says "removed here".
"""

from __future__ import annotations

import sqlite3

NAME = "origin"

TABLE_SQL = f"""
CREATE TABLE IF NOT EXISTS {NAME} (
    event_id TEXT NOT NULL,
    replica TEXT NOT NULL,
    segment TEXT NOT NULL,
    seq INTEGER NOT NULL
)
"""


def view_sql(replica: str, segment: str) -> str:
    """The `origin` of an adopted import: each row's slot is its own seq in the
    named segment of the named replica."""
    return (f"CREATE VIEW {NAME} AS SELECT event_id, {_literal(replica)} AS replica, "
            f"{_literal(segment)} AS segment, seq FROM events")


def kind(conn: sqlite3.Connection, schema: str = "main") -> str | None:
    """'table', 'view' or None (an own segment, which keeps no provenance).
    Raises sqlite3.Error."""
    row = conn.execute(f"SELECT type FROM {schema}.sqlite_master WHERE name = ? "
                       "AND type IN ('table', 'view')", (NAME,)).fetchone()
    return None if row is None else str(row[0])


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
