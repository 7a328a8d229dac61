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
  whose fingerprint (segment_signature) did not move is trusted as read. One
  whose fingerprint moved is judged by the census rule the search index
  follows too (cache.not_appended): when it holds as many rows at or below
  the mark as were read, the row at the mark still has the event id and
  checksum read, the file is the same inode and it gained rows, only the rows
  above the mark are read; anything else (a lost row, an edited last row, a
  replaced file, a file that changed without gaining rows: an edit or damage)
  drops the segment's rows and reads it again. A vanished segment's rows are
  dropped.
- What the census does not see: a row below the mark changed in place, in the
  same file, by a write that also appended rows (a hand edit or damage of the
  live segment, then the next hook's append). Two kinds of read therefore:
  the SessionStart context (ops.digest.session_markdown, `strict` False)
  takes a grown segment on the census alone, so a session start costs the new
  rows, not a re-read of the live segment (about 0.1 s per 20,000 rows, up to
  the 64 MiB segment limit), and marks the segment `censused`; every other
  digest (`strict`, the default) also re-verifies, row by row, the rows at or
  below the mark of a segment that grew or was censused, and reads it again
  when the rows that fail verification are not the ones kept as malformed. So
  a digest a person runs reports damage as a direct read does; the context an
  agent is given at a session start may miss it until then, and says so: a
  read names every segment it took on a census not verified since
  (ReadResult.census), and the session-start digest shows that line. A row edited into
  another well-formed row (a new body with a recomputed checksum) is not told
  from an append by either, exactly as no reader can tell it from a genuine
  row; `show` reads every row. Our one in-place writer, `compact --apply`,
  drops the rows of every segment it changed (keep_unchanged). Tombstones are
  not weakened: a tombstone is a new row, always read, and hides its target at
  once.
- Spans merge only when they do not interleave (merge_spans): a new row that
  lands inside a span already kept makes its segment be folded again from its
  rows, and an observation whose spans in two segments interleave makes `read`
  return None (the caller reads the segments).
- An unreadable segment is never cached: it is read straight from disk every
  time, so its damage is reported exactly as a direct read reports it.
- Purged content leaves the file: after its deletions `compact --apply` drops
  the rows of every segment it deleted rows from or rewrote (in this run or in
  a killed one its intent names) and the fold kept, then writes the file afresh
  from the rows left and renames it over the old one (keep_unchanged), so no
  page, freed space or journal keeps a byte of them; the rows of the segments
  it left alone stay, and the next digest reads only the changed segments
  again. When the cache cannot be trimmed so (locked, unreadable), compaction
  deletes it. Rows dropped here are overwritten (secure_delete), so a re-read
  segment leaves no stale bytes behind.
- The digest's fold of the calls is kept beside the spans at a verified point
  (storage/digest_point.py); dropping any segment's rows drops it.
- Every other event is kept as its fields (model.event_values) marshalled, beside
  the blob's xxh3-64 digest, checked as it is loaded: a row that is not the one kept
  (a damaged page, a row changed by hand) makes `read` return None and throws the
  cache away, so the next digest fills it again from the segments.
- The cache is only an accelerator: any failure to open, lock (within
  LOCK_WAIT_S) or write it makes `read` return None, and the caller reads
  the segments instead.
"""

from __future__ import annotations

import json
import marshal
import os
import sqlite3
import time

from xxhash import xxh3_64_hexdigest

from agent_journal.core import codec
from agent_journal.core.errors import JournalError
from agent_journal.core.model import OBSERVATION, event_values, events_from_values
from agent_journal.core.observation_fold import merge_spans, span_order
from agent_journal.core.recovery.digest_fold import FOLD_VERSION
from agent_journal.core.recovery.facts import FACTS_VERSION
from agent_journal.storage import erasure_generation
from agent_journal.storage.cache import (
    cache_lock_path,
    cache_path,
    not_appended,
    open_identified_cache,
    publish_cache,
    remove_cache_files,
    row_mark,
    segment_signature,
)
from agent_journal.storage.connection import run_write
from agent_journal.storage.files import create_private_file
from agent_journal.storage.locks import FileLock
from agent_journal.storage.segment_reader import (
    ReadResult,
    SegmentScan,
    malformed_through,
    read_segment,
)
from agent_journal.storage.workspace import Workspace

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from agent_journal.core.model import Event
    from agent_journal.core.observation_fold import Span

    Project = Callable[[str, dict[str, Any]], Any]

AREA = "digest"
# Bump when the schema or what a row keeps changes: a cache of another format
# is thrown away, never read.
FORMAT = "agent-journal-digest-cache/7"
# A fingerprint taken this close to the segment's newest mtime could miss a
# write landing in the same clock tick, so the segment is checked again next time.
RACY_NS = 2_000_000_000
# Another process filling the cache for a large journal can hold it for a
# while; rather than wait on it, a digest reads the segments itself.
LOCK_WAIT_S = 2.0

# `calls` holds one span per observation and segment, `head` the JSON of [kind, session,
# facts], `written` the segment's high-water mark when the span was last written; `others`
# every other event (as `_packed`); `state` the digest's fold at a verified point (FoldRead).
# A segment's `censused` is 1 when rows at or below its mark were last taken on the census
# rule alone (a hook's read) and have not been verified row by row since.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, signature TEXT, trusted INTEGER NOT NULL,
    high INTEGER NOT NULL, rows INTEGER NOT NULL, last TEXT, censused INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    segment INTEGER NOT NULL, obs TEXT NOT NULL, first_ts TEXT NOT NULL, first_id TEXT NOT NULL,
    last_ts TEXT NOT NULL, last_id TEXT NOT NULL, head TEXT NOT NULL, written INTEGER NOT NULL,
    PRIMARY KEY (segment, obs)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS calls_order ON calls(first_ts, obs);
CREATE INDEX IF NOT EXISTS calls_obs ON calls(obs);
CREATE INDEX IF NOT EXISTS calls_written ON calls(segment, written);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS others (
    segment INTEGER NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL,
    digest TEXT NOT NULL, PRIMARY KEY (segment, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS malformed (
    segment INTEGER NOT NULL, seq INTEGER NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (segment, seq)) WITHOUT ROWID;
"""

def path_of(ws: Workspace) -> str:
    return cache_path(ws.root, AREA, ws.name)


def read(ws: Workspace, project: Project, *, strict: bool = True) -> ReadResult | None:
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
            try:
                return _read_locked(ws, project, strict)
            except Damaged:
                discard(ws)
                return None
    except (OSError, sqlite3.Error, JournalError):
        return None


PROBE_BUSY_S = 0.05


def unread_rows(ws: Workspace) -> int | None:
    """About how many rows of the workspace's segments the cache has not read yet (all of
    them when there is no cache, or one another version kept), counted from each segment's
    highest seq against the mark kept for it, so the count costs an index look-up per
    segment, never a scan. Nothing is written, nothing is locked, and a lock another
    process holds on the cache is waited for at most PROBE_BUSY_S: None when the cache
    cannot be read now (a writer is committing to it): the caller then cannot tell."""
    from agent_journal.storage.connection import connect
    from agent_journal.storage.segment_reader import segment_extent

    marks: dict[str, int] = {}
    path = path_of(ws)
    if os.path.exists(path):
        try:
            conn = connect(path, readonly=True, busy_s=PROBE_BUSY_S)
            try:
                if dict(conn.execute("SELECT key, value FROM meta")) == _identity(ws):
                    marks = dict(conn.execute("SELECT name, high FROM segments"))
            finally:
                conn.close()
        except (OSError, sqlite3.Error, JournalError):
            return None
    # (max(seq) is the row count of a segment nothing was erased from, and above it after a
    # compaction: an estimate that errs towards more.)
    return sum(max(0, segment_extent(p, count=False)[0] - marks.get(os.path.basename(p), 0))
               for p in ws.segment_paths())


class Damaged(Exception):
    """A row of the cache is not what was kept: the file is thrown away (`_discard`)."""


def discard(ws: Workspace) -> None:
    """Delete a damaged cache (under its lock): the next digest fills it again."""
    try:
        remove_cache_files(path_of(ws))
    except (OSError, JournalError):
        pass  # it stays damaged, and is not used


def keep_unchanged(ws: Workspace, changed: Iterable[str]) -> bool:
    """After a compaction: drop the rows of the `changed` segments (their file names)
    and the fold kept (FoldRead), then write the file afresh and rename it over the
    old one, so that no page or freed space still holds a byte of what was dropped.
    Called once the erasure generation has moved on, so no read from before it stores
    anything afterwards. Returns True when what is left under the cache's name holds
    nothing of the changed segments (or nothing is there); False when it could not be
    trimmed (locked past LOCK_WAIT_S, unreadable, a full disk): the caller deletes it.
    """
    names = set(changed)
    path = path_of(ws)
    try:
        with FileLock(cache_lock_path(ws.root, AREA, ws.name), wait_s=LOCK_WAIT_S):
            if not os.path.exists(path):
                return False  # nothing to keep: whatever lies beside it is swept
            if not names:
                return True  # compaction changed no segment: nothing was derived from it
            conn = open_cache(ws)
            try:
                run_write(conn, lambda c: _drop(c, *(segment for segment, name in c.execute(
                    "SELECT id, name FROM segments").fetchall() if name in names)))
                # Deletes overwrite the cells they free (secure_delete), but a page
                # rebuilt as rows moved keeps stale copies of them: a copy made from
                # the rows left (VACUUM INTO), renamed over the file, keeps nothing
                # else. The copy is swept with the cache should this run die first.
                fresh = path + ".trimmed"
                remove_cache_files(fresh)
                create_private_file(fresh)
                conn.execute("VACUUM INTO ?", (fresh,))
            except BaseException:
                conn.close()
                raise
            publish_cache(conn, fresh, path)
            return True
    except (OSError, sqlite3.Error, JournalError):
        return False


def _identity(ws: Workspace) -> dict[str, str]:
    return {"format": FORMAT, "workspace": ws.name, "facts": FACTS_VERSION,
            "fold": FOLD_VERSION}


def open_cache(ws: Workspace) -> sqlite3.Connection:
    schema = [statement for statement in SCHEMA.split(";") if statement.strip()]
    return open_identified_cache(path_of(ws), schema, _identity(ws), what="digest cache")


class Segment:
    """One segment as this read takes it: its spans and events kept in the cache under
    `cache_id` up to seq `high`, or (`cache_id` None) `scan`, read straight from the file;
    `census`: its rows at or below the mark were taken on the census rule alone."""

    __slots__ = ("cache_id", "high", "scan", "census")

    def __init__(self, cache_id: int | None, high: int, scan: SegmentScan | None,
                 census: bool = False) -> None:
        self.cache_id = cache_id
        self.high = high
        self.scan = scan
        self.census = census


def _read_locked(ws: Workspace, project: Project, strict: bool) -> ReadResult | None:
    generation = erasure_generation.noted(ws)  # before anything is read
    conn = open_cache(ws)
    try:
        paths = ws.segment_paths()
        taken = follow_all(conn, ws, paths, project, generation, strict)
        return None if taken is None else _load(conn, ws, paths, taken)
    finally:
        conn.close()


def follow_all(conn: sqlite3.Connection, ws: Workspace, paths: list[str], project: Project,
                generation: str, strict: bool) -> dict[str, Segment] | None:
    """Bring every segment's cached spans and events up to date; None when a compaction
    erased rows meanwhile. `strict` (see the module docstring) also re-verifies, row by
    row, the rows of a segment that were taken on the census rule alone."""
    taken: dict[str, Segment] = {}
    stored = {row[0]: row for row in conn.execute(
        "SELECT name, signature, trusted, high, rows, last, id, censused FROM segments")}
    gone = sorted(stored.keys() - {os.path.basename(p) for p in paths})
    if gone:
        run_write(conn, lambda c: _drop(c, *(stored[name][6] for name in gone)))
    for path in paths:
        name = os.path.basename(path)
        row = stored.get(name)
        taken_ns = time.time_ns()
        sig = segment_signature(path)
        if (row is not None and sig is not None and row[1] == sig[0] and row[2]
                and not (strict and row[7])):
            # unchanged since it was read (a census the read did not verify stays one)
            taken[name] = Segment(row[6], row[3], None, bool(row[7]))
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
                trusted=trusted: _follow(c, path, name, row, project, signature, trusted,
                                         strict))
    return taken


def _drop(c: sqlite3.Connection, *segments: int) -> None:
    # The fold kept at a verified point was folded from these rows: it goes with them.
    c.execute("DELETE FROM state")
    for segment in segments:
        for table in ("calls", "others", "malformed"):
            c.execute(f"DELETE FROM {table} WHERE segment = ?", (segment,))
        c.execute("DELETE FROM segments WHERE id = ?", (segment,))


def _follow(c: sqlite3.Connection, path: str, name: str, row: tuple[Any, ...] | None,
            project: Project, signature: str | None, trusted: int, strict: bool
            ) -> Segment:
    """Bring one segment's cached spans and events up to date, and say how to take it."""
    high, rows, last = (row[3], row[4], row[5]) if row is not None else (0, 0, None)
    censused = 0
    if row is not None:
        # The file changed: unless it only gained rows above the mark (the census
        # rule, cache.not_appended), the segment is read again from scratch.
        try:
            why, _ = not_appended(path, high, rows, last, row[1], signature)
            if why is None and strict:
                # A strict read answers for every row it shows: the rows at or below
                # the mark still fail (and pass) verification as they did when read.
                known = {seq for (seq,) in c.execute(
                    "SELECT seq FROM malformed WHERE segment = ? AND seq <= ?",
                    (row[6], high))}
                if malformed_through(path, high) != known:
                    why = "rows at or below the mark changed"
            elif why is None:
                censused = 1
        except sqlite3.Error:
            why = "unreadable"
        if why is not None:
            _drop(c, row[6])
            row = None
            high, rows, last = 0, 0, None
    # Every body read is parsed (for its facts, or kept whole): read lazily, no peek.
    scan = read_segment(path, lazy=True, after=high, marked=True)
    if scan.unreadable is not None:
        if row is not None:
            _drop(c, row[6])
        return Segment(None, 0, read_segment(path, lazy=True))
    if row is None:
        inserted = c.execute("INSERT INTO segments(name, trusted, high, rows, censused) "
                             "VALUES (?, 0, 0, 0, 0)", (name,)).lastrowid
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
                return _follow(c, path, name, None, project, signature, trusted, strict)
            spans[obs] = merged
    c.executemany("INSERT OR REPLACE INTO calls(segment, obs, first_ts, first_id, last_ts, "
                  "last_id, head, written) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                  # ASCII escapes keep a lone surrogate storable as text.
                  ((segment, obs, *span[:4], json.dumps(span[4:]), scan.high)
                   for obs, span in spans.items()))
    c.executemany("INSERT INTO others(segment, seq, payload, digest) VALUES (?, ?, ?, ?)",
                  others)
    c.executemany("INSERT INTO malformed(segment, seq, reason) VALUES (?, ?, ?)",
                  ((segment, seq, why) for seq, why in scan.malformed))
    census = bool(censused or (row is not None and not strict and row[7]))
    c.execute("UPDATE segments SET signature = ?, trusted = ?, high = ?, rows = ?, last = ?, "
              "censused = ? WHERE id = ?",
              (signature, trusted, scan.high, rows + len(scan.events) + len(scan.malformed),
               last if scan.last is None else row_mark(*scan.last), int(census), segment))
    return Segment(segment, scan.high, None, census)


def _fold_new(segment: int, seqs: list[int], events: list[Event], project: Project
              ) -> tuple[dict[str, Span], list[tuple[int, int, bytes, str]]]:
    """The spans of the observations among rows just read (each folded over its own events
    in (ts, event id) order), and every other event as a row of `others`."""
    parts: dict[str, list[Span]] = {}
    others: list[tuple[int, int, bytes, str]] = []
    for seq, ev in zip(seqs, events, strict=True):
        if ev.type == OBSERVATION:
            parts.setdefault(ev.id, []).append(  # type: ignore[arg-type]
                (ev.ts, ev.event_id, ev.ts, ev.event_id, ev.kind, ev.session,
                 project(ev.kind, ev.data) or {}))
        else:
            others.append((segment, seq, *_packed(ev)))
    spans: dict[str, Span] = {}
    for obs, events_of in parts.items():
        if len(events_of) > 1:
            events_of.sort(key=span_order)
        merged = merge_spans(events_of)
        assert merged is not None  # single events in order never interleave
        spans[obs] = merged
    return spans, others


def _packed(ev: Event) -> tuple[bytes, str]:
    """An event as `others` keeps it: its fields (model.event_values) marshalled, and the
    blob's digest. Unmarshalling and checking a digest costs a fraction of parsing and
    checking the event's JSON again, the most of a warm digest's time spent here."""
    blob = marshal.dumps(event_values(ev), 2)
    return blob, xxh3_64_hexdigest(blob)


def unpacked(rows: list[tuple[bytes, str]]) -> list[Event]:
    """The events of rows of `others`; Damaged when a blob is not the one kept."""
    try:
        values = []
        for blob, digest in rows:
            if xxh3_64_hexdigest(blob) != digest:
                raise Damaged("a row of the digest cache does not match its digest")
            values.append(marshal.loads(blob))
        return events_from_values(values)
    except (ValueError, TypeError, EOFError) as exc:
        raise Damaged(str(exc)) from None


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
          taken: dict[str, Segment]) -> ReadResult | None:
    """The read result: one event per kept span (a codec.PeekOnlyEvent with the span's
    first ts and event id, and `peek` (kind, session, facts, last ts, last event id)), the
    other events, and the segments read straight from their files. None when an
    observation's spans in two segments interleave."""
    result = ReadResult()
    events = result.events
    peek_only = codec.peek_only
    loads = json.loads
    spans = ("SELECT obs, first_ts, first_id, last_ts, last_id, head FROM calls "
             "WHERE segment = ?")
    others = "SELECT payload, digest FROM others WHERE segment = ? ORDER BY seq"
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
        events.extend(unpacked(conn.execute(others, key).fetchall()))
        result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                for seq, why in conn.execute(malformed, key))
        result.high_water[rel] = seg.high
        if seg.census:
            result.census.append(rel)
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
