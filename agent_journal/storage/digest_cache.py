"""The digest's cache: what a digest reads of each segment, kept between runs.

A digest must look at every observation (to classify tool calls, find test
runs, commits and files), and parsing a large journal's bodies costs several
times the plain read of its rows. This cache keeps, per segment: for each
observation the fold of its events in that segment (a span,
core.observation_fold: first and last event, kind, session, and the
`latest_wins` fold of the recovery facts, the `project` function's result,
core.recovery.facts.event_facts: a pure function of the event, so the facts
kept are the facts a fresh read computes), and every other event whole. The
next digest reads only the rows the segments gained since and folds them into
the spans they continue; a digest reads one span per observation and segment,
never the events again.

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
- Spans merge only when they do not interleave (merge_spans): a new row that
  lands inside a span already kept makes its segment be folded again from its
  rows, and an observation whose spans in two segments interleave makes `read`
  return None (the caller reads the segments).
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
from agent_journal.core.observation_fold import merge_spans, span_order
from agent_journal.core.recovery.facts import FACTS_VERSION
from agent_journal.storage import erasure_generation
from agent_journal.storage.cache import (
    cache_lock_path,
    cache_path,
    open_identified_cache,
    segment_signature,
)
from agent_journal.storage.connection import run_write
from agent_journal.storage.locks import FileLock
from agent_journal.storage.segment_reader import (
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
    from agent_journal.core.observation_fold import Span

    Project = Callable[[str, dict[str, Any]], Any]

AREA = "digest"
# Bump when the schema or what a row keeps changes: a cache of another format
# is thrown away, never read.
FORMAT = "agent-journal-digest-cache/3"
# A fingerprint taken this close to the segment's newest mtime could miss a
# write landing in the same clock tick, so the segment is checked again next time.
RACY_NS = 2_000_000_000
# Another process filling the cache for a large journal can hold it for a
# while; rather than wait on it, a digest reads the segments itself.
LOCK_WAIT_S = 2.0

# `calls` holds one span per observation and segment, `head` the JSON of [kind, session,
# facts]; `others` every other event.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, signature TEXT, trusted INTEGER NOT NULL,
    high INTEGER NOT NULL, rows INTEGER NOT NULL, fold TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    segment INTEGER NOT NULL, obs TEXT NOT NULL, first_ts TEXT NOT NULL, first_id TEXT NOT NULL,
    last_ts TEXT NOT NULL, last_id TEXT NOT NULL, head TEXT NOT NULL,
    PRIMARY KEY (segment, obs)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS others (
    segment INTEGER NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY (segment, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS malformed (
    segment INTEGER NOT NULL, seq INTEGER NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (segment, seq)) WITHOUT ROWID;
"""

def path_of(ws: Workspace) -> str:
    return cache_path(ws.root, AREA, ws.name)


def read(ws: Workspace, project: Project) -> ReadResult | None:
    """The workspace from the cache brought up to date.

    Each observation comes back as one codec.PeekOnlyEvent per segment holding it, for
    its span there: the first event's ts and event id, and `peek` (kind, session, facts,
    last ts, last event id) with facts the `latest_wins` fold of project(kind, data) of
    its events; everything else comes back whole; a segment that cannot be read comes
    back as read straight from its file. None when the cache cannot be used; the caller
    then reads the segments.
    """
    try:
        with FileLock(cache_lock_path(ws.root, AREA, ws.name), wait_s=LOCK_WAIT_S):
            return _read_locked(ws, project)
    except (OSError, sqlite3.Error, JournalError):
        return None


def _identity(ws: Workspace) -> dict[str, str]:
    return {"format": FORMAT, "workspace": ws.name, "facts": FACTS_VERSION}


def _open(ws: Workspace) -> sqlite3.Connection:
    schema = [statement for statement in SCHEMA.split(";") if statement.strip()]
    return open_identified_cache(path_of(ws), schema, _identity(ws), what="digest cache")


class _Segment:
    """One segment as this read takes it: its spans and events kept in the cache under
    `cache_id` up to seq `high`, or (`cache_id` None) `scan`, read straight from the file."""

    __slots__ = ("cache_id", "high", "scan")

    def __init__(self, cache_id: int | None, high: int, scan: SegmentScan | None) -> None:
        self.cache_id = cache_id
        self.high = high
        self.scan = scan


def _read_locked(ws: Workspace, project: Project) -> ReadResult | None:
    generation = erasure_generation.noted(ws)  # before anything is read
    conn = _open(ws)
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
            with erasure_generation.Storing(ws, generation) as unchanged:
                if not unchanged:
                    return None  # a compaction erased rows: the caller reads the segments
                taken[name] = run_write(
                    conn, lambda c, path=path, name=name, row=row, signature=signature,
                    trusted=trusted: _follow(c, path, name, row, project, signature, trusted))
        return _load(conn, ws, paths, taken)
    finally:
        conn.close()


def _drop(c: sqlite3.Connection, *segments: int) -> None:
    for segment in segments:
        for table in ("calls", "others", "malformed"):
            c.execute(f"DELETE FROM {table} WHERE segment = ?", (segment,))
        c.execute("DELETE FROM segments WHERE id = ?", (segment,))


def _follow(c: sqlite3.Connection, path: str, name: str, row: tuple[Any, ...] | None,
            project: Project, signature: str | None, trusted: int
            ) -> _Segment:
    """Bring one segment's cached spans and events up to date, and say how to take it."""
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
    # Every body read is parsed (for its facts, or kept whole): read lazily, no peek.
    scan = read_segment(path, lazy=True, after=high, fold_from=fold)
    if scan.unreadable is not None:
        if row is not None:
            _drop(c, row[6])
        return _Segment(None, 0, read_segment(path, lazy=True))
    if row is None:
        inserted = c.execute("INSERT INTO segments(name, trusted, high, rows, fold) "
                             "VALUES (?, 0, 0, 0, '')", (name,)).lastrowid
        assert inserted is not None  # always set after a one-row INSERT
        segment = inserted
    else:
        segment = int(row[6])
    spans, others = _fold_new(segment, scan.seqs, scan.events, project)
    if row is not None and spans:
        kept = _kept_spans(c, segment, spans)
        for obs, old in kept.items():
            merged = merge_spans(sorted((old, spans[obs]), key=span_order))
            if merged is None:
                # A row landed inside a span already kept: fold the segment again.
                _drop(c, segment)
                return _follow(c, path, name, None, project, signature, trusted)
            spans[obs] = merged
    c.executemany("INSERT OR REPLACE INTO calls(segment, obs, first_ts, first_id, last_ts, "
                  "last_id, head) VALUES (?, ?, ?, ?, ?, ?, ?)",
                  # ASCII escapes keep a lone surrogate storable as text.
                  ((segment, obs, *span[:4], json.dumps(span[4:]))
                   for obs, span in spans.items()))
    c.executemany("INSERT INTO others(segment, seq, payload) VALUES (?, ?, ?)", others)
    c.executemany("INSERT INTO malformed(segment, seq, reason) VALUES (?, ?, ?)",
                  ((segment, seq, why) for seq, why in scan.malformed))
    c.execute("UPDATE segments SET signature = ?, trusted = ?, high = ?, rows = ?, fold = ? "
              "WHERE id = ?",
              (signature, trusted, scan.high,
               rows + len(scan.events) + len(scan.malformed), scan.fold, segment))
    return _Segment(segment, scan.high, None)


def _fold_new(segment: int, seqs: list[int], events: list[Event], project: Project
              ) -> tuple[dict[str, Span], list[tuple[int, int, str]]]:
    """The spans of the observations among rows just read (each folded over its own events
    in (ts, event id) order), and every other event as a row of `others`."""
    parts: dict[str, list[Span]] = {}
    others: list[tuple[int, int, str]] = []
    for seq, ev in zip(seqs, events, strict=True):
        if ev.type == OBSERVATION:
            parts.setdefault(ev.id, []).append(  # type: ignore[arg-type]
                (ev.ts, ev.event_id, ev.ts, ev.event_id, ev.kind, ev.session,
                 project(ev.kind, ev.data) or {}))
        else:
            others.append((segment, seq, json.dumps(ev.as_dict())))
    spans: dict[str, Span] = {}
    for obs, events_of in parts.items():
        if len(events_of) > 1:
            events_of.sort(key=span_order)
        merged = merge_spans(events_of)
        assert merged is not None  # single events in order never interleave
        spans[obs] = merged
    return spans, others


def _kept_spans(c: sqlite3.Connection, segment: int, spans: dict[str, Span]
                ) -> dict[str, Span]:
    """The spans already kept for these observations in this segment."""
    kept: dict[str, Span] = {}
    query = ("SELECT obs, first_ts, first_id, last_ts, last_id, head FROM calls "
             "WHERE segment = ? AND obs = ?")
    for obs in spans:
        for obs_, *ends, head in c.execute(query, (segment, obs)):
            kept[obs_] = (*ends, *json.loads(head))
    return kept


def _load(conn: sqlite3.Connection, ws: Workspace, paths: list[str],
          taken: dict[str, _Segment]) -> ReadResult | None:
    """The read result: one event per kept span (a codec.PeekOnlyEvent with the span's
    first ts and event id, and `peek` (kind, session, facts, last ts, last event id)), the
    other events, and the segments read straight from their files. None when an
    observation's spans in two segments interleave."""
    result = ReadResult()
    events = result.events
    peek_only = codec.peek_only
    loads, whole = json.loads, codec.from_dict
    spans = ("SELECT obs, first_ts, first_id, last_ts, last_id, head FROM calls "
             "WHERE segment = ?")
    others = "SELECT payload FROM others WHERE segment = ? ORDER BY seq"
    malformed = "SELECT seq, reason FROM malformed WHERE segment = ? ORDER BY seq"
    # An observation held in several segments has a span in each: they must not interleave.
    held: dict[str | None, Event] = {}
    split: dict[str | None, list[Event]] = {}
    for path in paths:
        name, rel = os.path.basename(path), ws.rel(path)
        result.segments.append(rel)
        seg = taken[name]
        scan = seg.scan
        if scan is not None:
            events.extend(scan.events)
            for ev in scan.events:
                if ev.type == OBSERVATION and held.setdefault(ev.id, ev) is not ev:
                    split.setdefault(ev.id, [held[ev.id]]).append(ev)
            result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                    for seq, why in scan.malformed)
            assert scan.unreadable is not None  # only an unreadable segment is read whole
            result.unreadable.append({"path": rel, "reason": scan.unreadable})
            continue
        key = (seg.cache_id,)
        rows = conn.execute(spans, key).fetchall()
        # One parse of all the rows' JSON: the per-call cost of json.loads is most
        # of the time a warm digest spends here.
        for row, head in zip(rows, loads("[" + ",".join(r[5] for r in rows) + "]"),
                             strict=True):
            head.append(row[3])
            head.append(row[4])
            ev = peek_only(row[2], OBSERVATION, row[0], row[1], tuple(head))
            events.append(ev)
            if held.setdefault(row[0], ev) is not ev:
                split.setdefault(row[0], [held[row[0]]]).append(ev)
        for (payload,) in conn.execute(others, key):
            events.append(whole(loads(payload)))
        result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                for seq, why in conn.execute(malformed, key))
        result.high_water[rel] = seg.high
    for parts in split.values():
        if _interleave(parts):
            return None
    return result


def _interleave(parts: list[Event]) -> bool:
    """Whether these events of one observation (spans kept here, or events read straight
    from a segment) interleave, as merge_spans sees them (in span_order)."""
    ends = []
    for ev in parts:
        first = (ev.ts, ev.event_id)
        if type(ev) is codec.PeekOnlyEvent:
            ends.append((first, (ev.peek[3], ev.peek[4])))  # type: ignore[attr-defined]
        else:
            ends.append((first, first))
    ends.sort()
    last = ends[0][1]
    for first, end in ends[1:]:
        if first < last:
            return True
        last = end
    return False
