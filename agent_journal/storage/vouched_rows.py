"""A source segment's rows as a merge reads them, the canonical observations vouched for.

Invariant: a row handed over as `merge_rows.Vouched` is one the exact decoder
(`codec.decode_checked`) accepts with its event id, type, subject and time columns
agreeing, and its `data` is the artifact that decoder would read (or none): the
observation fast path compaction reads by (`compaction_rows.fast_observation`: a
blob with the right checksum, SQLite's strict JSON test, storage/observation_layout.py)
says so without parsing the body in Python. Every other row is handed over exactly as
stored, for the exact decoder to judge (core/merge_rows.py). Only rows whose text
SQLite reads as their own bytes (a UTF-8 database) are tested at all.
"""

from __future__ import annotations

import sqlite3

from agent_journal.core.merge_rows import Row, Vouched
from agent_journal.storage.compaction_rows import FastPath, fast_observation
from agent_journal.storage.segment_edit import text_is_utf8
from agent_journal.storage.segment_reader import json_check

_COLUMNS = "seq, event_id, type, subject, ts, checksum, body"


def source_rows(conn: sqlite3.Connection, schema: str) -> list[Row]:
    """Every row of `schema`.events in seq order, (seq, event_id, type, subject, ts,
    checksum, body), the body `Vouched` where the fast path vouches for it. Raises
    sqlite3.Error."""
    check = json_check()
    if check is None or not text_is_utf8(conn, schema):
        return conn.execute(f"SELECT {_COLUMNS} FROM {schema}.events ORDER BY seq").fetchall()
    fast = FastPath()
    rows: list[Row] = []
    append = rows.append
    for *row, json_ok in conn.execute(
            f"SELECT {_COLUMNS}, CASE WHEN type = 'observation' AND {check} THEN 1 END "
            f"FROM (SELECT {_COLUMNS}, CAST(body AS TEXT) AS t FROM {schema}.events) "
            "ORDER BY seq"):
        if json_ok is not None:
            seq, event_id, _type, subject, ts, digest, body = row
            values = fast_observation(fast, body, digest, event_id, subject, ts)
            if values is not None:
                append((seq, event_id, "observation", subject, ts, digest,
                        Vouched(values[8])))
                continue
        append(tuple(row))  # type: ignore[arg-type]
    return rows
