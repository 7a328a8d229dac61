"""The digest's cache: what a digest reads of each segment, kept between runs.

A digest must look at every observation (to classify tool calls, find test
runs, commits and files), and parsing a large journal's bodies costs several
times the plain read of its rows. This cache keeps, per segment row: for an
observation its header, kind and recovery facts (the `project` function's
result, core.recovery.facts.event_facts: a pure function of the event, so the
facts kept are the facts a fresh read computes), for anything else the whole
event. The next digest reads only the rows the segments gained since.

Invariants:
- A projection, never a source of truth: deleting it loses nothing, and a
  digest from it equals a digest from the segments (tests hold the two equal).
- Rows only ever arrive above a segment's high-water mark. A segment file
  whose fingerprint (segment_signature) moved is checked row by row:
  when every row at or below the mark still folds to what was cached
  (fold_row: every column, and whether the body still matches its
  checksum), only the rows above it are read; anything else (an edited,
  damaged, rewritten or replaced row) drops the segment's rows and reads it
  again. A file whose fingerprint did not move is trusted as read. A
  vanished segment's rows are dropped.
- An unreadable segment is never cached: it is read straight from disk every
  time, so its damage is reported exactly as a direct read reports it.
- Purged content leaves with the file: `compact --apply` deletes the whole
  cache (clear_workspace_cache), and rows dropped here are overwritten
  (secure_delete), so a re-read segment leaves no stale bytes behind.
- The cache is only an accelerator: any failure to open, lock (within
  LOCK_WAIT_S) or write it makes `read` return None, and the caller reads
  the segments instead.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

from agent_journal.core import codec
from agent_journal.core.errors import JournalError
from agent_journal.core.model import OBSERVATION
from agent_journal.core.recovery.facts import FACTS_VERSION
from agent_journal.storage.cache import (
    cache_lock_path,
    cache_path,
    open_cache,
    remove_cache_files,
    segment_signature,
)
from agent_journal.storage.connection import run_write
from agent_journal.storage.locks import FileLock
from agent_journal.storage.segment_reader import (
    Peek,
    ReadResult,
    SegmentScan,
    read_segment,
    segment_fold,
)
from agent_journal.storage.workspace import Workspace

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agent_journal.core.model import Event

    Project = Callable[[str, dict[str, Any]], Any]

AREA = "digest"
# Bump when the schema or what a row keeps changes: a cache of another format
# (or made for another peek) is thrown away, never read.
FORMAT = "agent-journal-digest-cache/2"
# A fingerprint taken this close to the segment's newest mtime could miss a
# write landing in the same clock tick, so the segment is checked again next time.
RACY_NS = 2_000_000_000
# Another process filling the cache for a large journal can hold it for a
# while; rather than wait on it, a digest reads the segments itself.
LOCK_WAIT_S = 2.0

# `{peek}` becomes the observation's column (p0: JSON of [kind, session, facts]).
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, signature TEXT, trusted INTEGER NOT NULL,
    high INTEGER NOT NULL, rows INTEGER NOT NULL, fold TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS peeks (
    segment INTEGER NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL,
    subject TEXT, ts TEXT NOT NULL, {peek},
    PRIMARY KEY (segment, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS others (
    segment INTEGER NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, type TEXT NOT NULL,
    subject TEXT, ts TEXT NOT NULL, form TEXT NOT NULL, payload BLOB NOT NULL,
    PRIMARY KEY (segment, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS malformed (
    segment INTEGER NOT NULL, seq INTEGER NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (segment, seq)) WITHOUT ROWID;
"""

# How a row is kept: its peek in columns (`peeks`: values SQLite stores as
# they are: null, text, 64-bit integers, floats), or in `others` its peek as
# JSON (anything else, say a boolean, which SQLite would turn into 1), its
# bytes (an observation SQLite could not read: still read lazily), or the
# whole event.
PEEKED, LAZY, WHOLE = "p", "l", "e"


def path_of(ws: Workspace) -> str:
    return cache_path(ws.root, AREA, ws.name)


# The rows are read lazily; only kind and session are peeked (the cache needs the seqs and the
# fold that a peeked read gives). An observation's facts are computed from its body.
_PEEK = Peek(("$.kind", "$.session"))


def read(ws: Workspace, project: Project) -> ReadResult | None:
    """The workspace from the cache brought up to date.

    Observations come back as codec.PeekOnlyEvent whose `peek` is (kind, session, facts), with
    facts = project(kind, data); the rows just read come back as they were read.
    None when the cache cannot be used; the caller then reads the segments.
    """
    peek = _PEEK
    try:
        with FileLock(cache_lock_path(ws.root, AREA, ws.name), wait_s=LOCK_WAIT_S):
            return _read_locked(ws, peek, project)
    except (OSError, sqlite3.Error, JournalError):
        return None


def _identity(ws: Workspace, peek: Peek) -> dict[str, str]:
    return {"format": FORMAT, "workspace": ws.name,
            "peek": json.dumps([peek.values, peek.types]), "facts": FACTS_VERSION}


def _open(ws: Workspace, peek: Peek) -> sqlite3.Connection:
    path = path_of(ws)
    want = _identity(ws, peek)
    schema = [statement for statement in SCHEMA.format(peek=", ".join(_columns(peek)))
              .split(";") if statement.strip()]

    def init(c: sqlite3.Connection) -> bool:
        for statement in schema:
            c.execute(statement)
        have = dict(c.execute("SELECT key, value FROM meta").fetchall())
        if not have:
            c.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", want.items())
            return True
        return have == want

    for _ in range(2):
        conn = None
        try:
            conn = open_cache(path, erasing=True)
            if run_write(conn, init):
                return conn
        except sqlite3.DatabaseError:
            pass  # not a cache we can read: start again from nothing
        if conn is not None:
            conn.close()
        remove_cache_files(path)
    raise sqlite3.DatabaseError("the digest cache could not be recreated")


def _columns(peek: Peek) -> list[str]:
    # One column: the JSON of [kind, session, facts] (ASCII, so any text is storable).
    return ["p0"]


class _Segment:
    """One segment as this read takes it: cached rows up to `cached`, plus `scan`
    (the rows read now); `cache_id` is None when nothing of it is cached."""

    __slots__ = ("cache_id", "cached", "scan")

    def __init__(self, cache_id: int | None, cached: int, scan: SegmentScan | None) -> None:
        self.cache_id = cache_id
        self.cached = cached
        self.scan = scan


def _read_locked(ws: Workspace, peek: Peek, project: Project) -> ReadResult:
    conn = _open(ws, peek)
    try:
        paths = ws.segment_paths()
        taken: dict[str, _Segment] = {}
        stored = {row[0]: row for row in conn.execute(
            "SELECT name, signature, trusted, high, rows, fold, id FROM segments")}
        gone = sorted(stored.keys() - {os.path.basename(p) for p in paths})
        if gone:
            run_write(conn, lambda c: _drop(c, *(stored[name][6] for name in gone)))
        for path in paths:
            name = os.path.basename(path)
            row = stored.get(name)
            taken_ns = time.time_ns()
            sig = segment_signature(path)
            if row is not None and sig is not None and row[1] == sig[0] and row[2]:
                taken[name] = _Segment(row[6], row[3], None)  # unchanged since it was read
                continue
            # A signature taken before the rows are read: a write landing in
            # between shows as a changed file next time. One transaction per
            # segment: a run stopped part way (a hook's time limit on a large
            # journal) keeps what it finished.
            trusted = int(sig is not None and taken_ns - sig[1] >= RACY_NS)
            signature = sig[0] if sig is not None else None
            taken[name] = run_write(
                conn, lambda c, path=path, name=name, row=row, signature=signature,
                trusted=trusted: _follow(c, path, name, row, peek, project, signature,
                                         trusted))
        return _load(conn, ws, paths, taken, peek)
    finally:
        conn.close()


def _drop(c: sqlite3.Connection, *segments: int) -> None:
    for segment in segments:
        for table in ("peeks", "others", "malformed"):
            c.execute(f"DELETE FROM {table} WHERE segment = ?", (segment,))
        c.execute("DELETE FROM segments WHERE id = ?", (segment,))


def _follow(c: sqlite3.Connection, path: str, name: str, row: tuple[Any, ...] | None,
            peek: Peek, project: Project, signature: str | None, trusted: int
            ) -> _Segment:
    """Bring one segment's cached rows up to date, and say how to take it."""
    high, rows, fold = (row[3], row[4], row[5]) if row is not None else (0, 0, "")
    if row is not None:
        # The file changed: every row already cached must still be exactly what
        # was read (rows only ever arrive above the mark), or the segment is
        # read again from scratch.
        try:
            now = segment_fold(path, high)
        except sqlite3.Error:
            now = None
        if now != (fold, rows):
            _drop(c, row[6])
            row = None
            high, rows, fold = 0, 0, ""
    scan = read_segment(path, peek=peek, after=high, fold_from=fold)
    if scan.unreadable is not None:
        if row is not None:
            _drop(c, row[6])
        return _Segment(None, 0, read_segment(path, peek=peek))
    if row is None:
        inserted = c.execute("INSERT INTO segments(name, trusted, high, rows, fold) "
                             "VALUES (?, 0, 0, 0, '')", (name,)).lastrowid
        assert inserted is not None  # always set after a one-row INSERT
        segment = inserted
    else:
        segment = int(row[6])
    columns = _columns(peek)
    natives: list[tuple[Any, ...]] = []
    others: list[tuple[Any, ...]] = []
    for seq, ev in zip(scan.seqs, scan.events, strict=True):
        _keep(segment, seq, ev, natives, others, project)
    c.executemany(f"INSERT INTO peeks(segment, seq, event_id, subject, ts, {', '.join(columns)}) "
                  f"VALUES ({', '.join('?' * (5 + len(columns)))})", natives)
    c.executemany("INSERT INTO others(segment, seq, event_id, type, subject, ts, form, payload) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", others)
    c.executemany("INSERT INTO malformed(segment, seq, reason) VALUES (?, ?, ?)",
                  ((segment, seq, why) for seq, why in scan.malformed))
    c.execute("UPDATE segments SET signature = ?, trusted = ?, high = ?, rows = ?, fold = ? "
              "WHERE id = ?",
              (signature, trusted, scan.high,
               rows + len(scan.events) + len(scan.malformed), scan.fold, segment))
    return _Segment(segment, high, scan)


def _keep(segment: int, seq: int, ev: Event, natives: list[tuple[Any, ...]],
          others: list[tuple[Any, ...]], project: Project) -> None:
    if ev.type == OBSERVATION:
        # ASCII escapes keep a lone surrogate storable as text.
        natives.append((segment, seq, ev.event_id, ev.id, ev.ts,
                        json.dumps([ev.kind, ev.session, project(ev.kind, ev.data)])))
        return
    form, payload = WHOLE, json.dumps(ev.as_dict())
    others.append((segment, seq, ev.event_id, ev.type, ev.id, ev.ts, form, payload))


def _load(conn: sqlite3.Connection, ws: Workspace, paths: list[str],
          taken: dict[str, _Segment], peek: Peek) -> ReadResult:
    """The read result: cached rows where they serve, and what was just read."""
    result = ReadResult()
    events = result.events
    peek_only, lazy = codec.peek_only, codec.LazyEvent
    loads, whole = json.loads, codec.from_dict
    columns = ", ".join(_columns(peek))
    # Peeks kept in columns are observations (only those are peeked): the
    # bulk of a journal, read with as few columns as will do.
    natives = (f"SELECT event_id, subject, ts, {columns} FROM peeks "
               "WHERE segment = ? AND seq <= ?")
    others = ("SELECT event_id, type, subject, ts, form, payload FROM others "
              "WHERE segment = ? AND seq <= ?")
    malformed = "SELECT seq, reason FROM malformed WHERE segment = ? AND seq <= ? ORDER BY seq"
    for path in paths:
        name, rel = os.path.basename(path), ws.rel(path)
        result.segments.append(rel)
        seg = taken[name]
        bad: list[tuple[int, str]] = []
        if seg.cache_id is not None and seg.cached:
            key = (seg.cache_id, seg.cached)
            rows = conn.execute(natives, key).fetchall()
            # One parse of all the rows' JSON: the per-call cost of json.loads is most
            # of the time a warm digest spends here.
            for row, kept in zip(rows, loads("[" + ",".join(r[3] for r in rows) + "]"),
                                 strict=True):
                events.append(peek_only(row[0], OBSERVATION, row[1], row[2], tuple(kept)))
            for event_id, type_, subject, ts, form, payload in conn.execute(others, key):
                if form == PEEKED:
                    events.append(peek_only(event_id, type_, subject, ts, tuple(loads(payload))))
                elif form == LAZY:
                    events.append(lazy(payload, event_id, type_, subject, ts))
                else:
                    events.append(whole(loads(payload)))
            bad.extend(conn.execute(malformed, key))
        scan = seg.scan
        if scan is None:
            result.high_water[rel] = seg.cached
        else:
            events.extend(scan.events)
            bad.extend(scan.malformed)
            if scan.unreadable is not None:
                result.unreadable.append({"path": rel, "reason": scan.unreadable})
            else:
                result.high_water[rel] = scan.high
        result.malformed.extend({"segment": rel, "row": seq, "reason": why} for seq, why in bad)
    return result
