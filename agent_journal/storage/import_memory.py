"""What an import already did: a disposable projection under cache/imports/<ws>.sqlite.

Invariant: the memory can only ever save a re-import that would write nothing; it never
stops new content being written. An entry is keyed by a fingerprint of the input file (its
device, inode, size, mtime and ctime, and a hash of its first and last blocks), so a file
that grew, was rewritten or merely touched is read again in full. It is written only after
the import it describes has committed, and only for a file whose mtime is not recent (a
write within the same clock tick would not move it). It is trusted only while every segment
the workspace had then still exists, and while no tombstone in any segment names one of
the ids it covers beyond those it reported (a tombstone changes what a re-run reports).
A segment that no longer holds the row that was its newest is a segment gone.
Compaction deletes it with the workspace's other projections (erasure.clear_workspace_cache),
and any doubt (a missing, damaged or unreadable file) means a full import.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

import xxhash

from agent_journal.storage import erasure_generation
from agent_journal.storage.cache import cache_path, open_cache
from agent_journal.storage.connection import connect, quote_path

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.storage.workspace import Workspace

AREA = "imports"
BLOCK = 64 * 1024
# A file modified this recently may still change within its mtime's clock tick.
SETTLED_SECONDS = 2.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS imports (
    fingerprint TEXT PRIMARY KEY,
    segments TEXT NOT NULL,
    tombstoned TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ids (
    fingerprint TEXT NOT NULL,
    id TEXT NOT NULL,
    PRIMARY KEY (fingerprint, id)
) WITHOUT ROWID;
"""


def fingerprint(fd: int) -> str | None:
    """The open file's fingerprint, or None when it is too fresh to vouch for."""
    st = os.fstat(fd)
    if time.time() - st.st_mtime_ns / 1e9 < SETTLED_SECONDS:
        return None
    digest = xxhash.xxh3_128()
    digest.update(os.pread(fd, BLOCK, 0))
    digest.update(os.pread(fd, BLOCK, max(0, st.st_size - BLOCK)))
    return (f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:"
            f"{digest.hexdigest()}")


def recall(ws: Workspace, key: str) -> dict[str, Any] | None:
    """The report a re-import of the file would give, or None when not sure of it."""
    path = cache_path(ws.root, AREA, ws.name)
    if not os.path.exists(path):
        return None
    try:
        conn = connect(path, readonly=True)
        try:
            row = conn.execute("SELECT segments, tombstoned, report FROM imports "
                               "WHERE fingerprint = ?", (key,)).fetchone()
        finally:
            conn.close()
        if row is None:
            return None
        segments: dict[str, list[Any]] = json.loads(row[0])
        if _tombstoned(ws, path, key, segments) != set(json.loads(row[1])):
            return None
        report: dict[str, Any] = json.loads(row[2])
        return report
    except (sqlite3.Error, OSError, ValueError, TypeError):
        return None


def _segments(ws: Workspace) -> dict[str, list[Any]]:
    # Each segment's newest row (seq, event id): appends keep it, while a file put in its
    # place (a restored copy that may hold fewer events) does not.
    found: dict[str, list[Any]] = {}
    for segment in ws.segment_paths():
        conn = connect(segment, readonly=True)
        try:
            row = conn.execute("SELECT seq, event_id FROM events ORDER BY seq DESC LIMIT 1"
                               ).fetchone()
        finally:
            conn.close()
        found[os.path.basename(segment)] = list(row) if row else [0, None]
    return found


def _tombstoned(ws: Workspace, memory: str, key: str, segments: dict[str, list[Any]]
                ) -> set[str] | None:
    """Which remembered ids a tombstone names now; None when a segment the memory
    counted on is gone or no longer holds the row that was its newest."""
    found: set[str] = set()
    paths = {os.path.basename(p): p for p in ws.segment_paths()}
    if not set(segments) <= set(paths):
        return None
    for name, segment in paths.items():
        conn = connect(segment, readonly=True)
        try:
            if name in segments:
                seq, event_id = segments[name]
                row = conn.execute("SELECT event_id FROM events WHERE seq = ?", (seq,)
                                   ).fetchone()
                if (row[0] if row else None) != event_id:
                    return None
            # One indexed query per segment for every id at once: the memory is attached,
            # and the CROSS JOIN keeps SQLite walking the ids into the subject index.
            conn.execute("ATTACH DATABASE ? AS memory", (f"file:{quote_path(memory)}?mode=ro",))
            found.update(r[0] for r in conn.execute(
                "SELECT DISTINCT e.subject FROM memory.ids AS i CROSS JOIN events AS e "
                "ON e.subject = i.id WHERE i.fingerprint = ? AND e.type = 'tombstone'",
                (key,)))
        finally:
            conn.close()
    return found


def remember(ws: Workspace, key: str, ids: list[str], tombstoned: set[str],
             report: dict[str, Any]) -> None:
    """Record, after its writes committed, what re-importing the file would report.
    Best effort: a memory that cannot be written only costs the next import a full read."""
    try:
        generation = erasure_generation.noted(ws)
        segments = _segments(ws)
        with erasure_generation.Storing(ws, generation) as unchanged:
            if not unchanged:
                return  # a compaction ran meanwhile: remember nothing
            conn = open_cache(cache_path(ws.root, AREA, ws.name))
            try:
                conn.executescript(SCHEMA)
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM ids WHERE fingerprint = ?", (key,))
                conn.executemany("INSERT OR IGNORE INTO ids(fingerprint, id) VALUES (?, ?)",
                                 ((key, i) for i in ids))
                conn.execute("INSERT OR REPLACE INTO imports VALUES (?, ?, ?, ?)",
                             (key, json.dumps(segments), json.dumps(sorted(tombstoned)),
                              json.dumps(report)))
                conn.execute("COMMIT")
            finally:
                conn.close()
    except (sqlite3.Error, OSError):
        pass
