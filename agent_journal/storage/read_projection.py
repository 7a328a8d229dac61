"""Read projections: what a whole read gave of each segment, kept between runs.

`compact` reads every row of every segment, verified strictly
(storage/compaction_rows.py). Its projection, at <root>/cache/reads/<ws>.sqlite,
keeps per segment what that read gave (its `SegmentRead`: rows as
`model.event_values`, observation data cut to its artifact, malformed rows,
tombstone checksums and rewrites) with the `verified_mark.Mark` of the rows it
came from, so the next run reads only the rows a segment gained since, or the
segments that changed under it. Per segment a record is split so a reader
loads only what it needs: `head` (high-water, malformed rows, tombstone
checksums and rewrites, event counts by type and kind), `others` (every row
but plain observations), `subjects` (every observation's id) and `plain`
(the ages of the observations holding no artifact, as
`core.observation_ages.summarize` gives them: all a plan needs of them but
for the few a tombstone names, which are read from the segment by id).
The projection engine (storage/projection.py) keeps its folds' states in
the same records (`head`: the state and the malformed rows), one file per
fold's area, its layout in the file's identity.

Invariants:
- A projection, never a source of truth: a run from it gives what a direct
  read gives (tests hold the two equal), and deleting it loses nothing.
- Nothing is used before `verified_mark.check` vouches for the segment:
  SAME is used as kept, GROWN has only the rows above its mark read, CHANGED
  (and a segment never seen) is read whole and its record replaced.
- Every column is kept with its xxh3-128 digest, checked when it is loaded:
  a damaged, truncated or foreign file, or a record that does not verify,
  is dropped and its segment read again. A damaged segment (unreadable, or
  failing SQLite's check) is never kept: it is read from disk every time.
- Purged content leaves with the file: `compact --apply` deletes it
  (erasure.clear_workspace_cache), and replaced records are overwritten
  (secure_delete), leaving no stale bytes behind.
- Only an accelerator: a projection that cannot be opened, locked (within
  LOCK_WAIT_S) or written makes `open_projection` give None, and callers read
  the segments directly.
- A read that promises no writes (`keep=False`: a compact dry run, coverage) uses
  what another run kept, read-only, and writes nothing: no record, no lock file.
  Any other run writes what it keeps only when it ends (`flush`, under the lock),
  and a run refused on damage (`forget`) writes nothing either.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from xxhash import xxh3_128_hexdigest

from agent_journal.core.errors import JournalError
from agent_journal.core.observation_ages import Summary, ids_of, is_summary, merged
from agent_journal.storage import erasure_generation, verified_mark
from agent_journal.storage.cache import (
    cache_lock_path,
    cache_path,
    open_identified_cache,
    remove_cache_files,
)
from agent_journal.storage.compaction_rows import SegmentRead
from agent_journal.storage.connection import run_write
from agent_journal.storage.locks import FileLock
from agent_journal.storage.verified_mark import CHANGED, SAME, Before, Mark
from agent_journal.storage.workspace import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_journal.storage.verified_mark import Fetch

AREA = "reads"  # the strict reads compact plans from
# Bump when what a record keeps, or how, changes: a file of another format is
# thrown away, never read.
FORMAT = "agent-journal-read-projection/2"
# Another process bringing the projection up to date can hold it for a while;
# rather than wait on it, a read goes to the segments itself.
LOCK_WAIT_S = 2.0
_MARSHAL = 2  # marshal format: plain values, no shared-object references

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS segments (name TEXT PRIMARY KEY, mark BLOB NOT NULL, "
    "head BLOB NOT NULL, others BLOB NOT NULL, subjects BLOB NOT NULL, plain BLOB NOT NULL, "
    "digest TEXT NOT NULL)",
)
COLUMNS = ("mark", "head", "others", "subjects", "plain")


def path_of(ws: Workspace, area: str = AREA) -> str:
    return cache_path(ws.root, area, ws.name)


def _identity(ws: Workspace, area: str, layout: str | None = None) -> dict[str, str]:
    # The exact decoder's verdicts depend on these limits (see compaction_rows).
    identity = {"format": FORMAT, "area": area, "workspace": ws.name,
                "limits": f"{sys.getrecursionlimit()}:{sys.get_int_max_str_digits()}"}
    if layout is not None:
        identity["layout"] = layout
    return identity


class Record:
    """One segment's record: its mark, and its columns as far as loaded."""

    __slots__ = ("name", "mark", "digests", "loaded")

    def __init__(self, name: str, mark: Mark, digests: list[str]) -> None:
        self.name = name
        self.mark = mark
        self.digests = digests
        self.loaded: dict[str, Any] = {}


class Projection:
    """An open projection, held under its lock for one run."""

    def __init__(self, ws: Workspace, area: str, conn: sqlite3.Connection | None,
                 keep: bool = True, layout: str | None = None) -> None:
        """`conn` None: there is no projection file yet; it is made by the first
        `store` (so a run that keeps nothing, a refused one, leaves none). Without
        `keep` nothing is ever written: `conn`, if any, is read-only."""
        self.ws = ws
        self.area = area
        self.layout = layout
        self._conn = conn
        # Noted before anything is read: a compaction meanwhile drops every store.
        self.generation = erasure_generation.noted(ws)
        self.writable = keep
        self.keep = keep
        # What this run would keep, written only by `flush` (a run refused on damage
        # calls `forget` instead: nothing under the root is created or changed).
        self.pending: list[tuple[str, Any]] = []
        self.records: dict[str, Record] = {}
        if conn is None:
            return
        for name, mark, digest in conn.execute("SELECT name, mark, digest FROM segments"):
            digests = str(digest).split(":")
            try:
                if len(digests) != len(COLUMNS) or xxh3_128_hexdigest(mark) != digests[0]:
                    raise ValueError("digest")
                self.records[name] = Record(name, Mark.unpacked(marshal.loads(mark)), digests)
            except (ValueError, TypeError, EOFError):
                self.drop(name)

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            if not self.keep:
                raise sqlite3.OperationalError("no projection to read")
            self._conn = _open(self.ws, self.area, self.layout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def load(self, record: Record, *columns: str) -> list[Any] | None:
        """The record's columns, each verified against its digest; None (and the
        record dropped) when any does not verify."""
        wanted = [c for c in columns if c not in record.loaded]
        if wanted:
            try:
                row = self.conn.execute(
                    f"SELECT {', '.join(wanted)} FROM segments WHERE name = ?",
                    (record.name,)).fetchone()
                if row is None:
                    raise ValueError("gone")
                for column, blob in zip(wanted, row, strict=True):
                    if xxh3_128_hexdigest(blob) != record.digests[COLUMNS.index(column)]:
                        raise ValueError("digest")
                    record.loaded[column] = marshal.loads(blob)
            except (ValueError, TypeError, EOFError, sqlite3.Error):
                self.drop(record.name)
                return None
        return [record.loaded[c] for c in columns]

    def store(self, name: str, mark: Mark, part: SegmentRead, subjects: list[str],
              counts: dict[tuple[str, str], int], ages: Summary) -> None:
        """Keep a part (its rows: all but the plain observations) under its mark,
        with the ids of its observations, its counts and its plain ones' ages."""
        head = (part.high, [(m["row"], m["reason"]) for m in part.malformed], part.tombstones,
                part.rewrites, counts)
        self.put(name, mark, head, part.rows, subjects, ages)

    def put(self, name: str, mark: Mark, *values: Any) -> None:
        """Keep a record: its mark and its columns (COLUMNS after `mark`), at `flush`.
        Best effort: a record that cannot be written is only read again."""
        if self.writable:
            # (Lists copied, not their items: a caller may extend a part's rows after.)
            kept = tuple(list(v) if isinstance(v, list) else v for v in values)
            self.pending.append((name, (mark, kept)))

    def drop(self, *names: str) -> None:
        for name in names:
            self.records.pop(name, None)
        if self.writable and names and self._conn is not None:
            self.pending.extend((n, None) for n in names)

    def forget(self) -> None:
        """Keep nothing of this run (it was refused)."""
        self.pending = []

    def flush(self) -> None:
        """Write what this run keeps, under the projection's lock, unless a compaction
        moved the erasure generation since the run noted it (then nothing is kept)."""
        pending, self.pending = self.pending, []
        if not pending or not self.writable:
            return
        try:
            with FileLock(cache_lock_path(self.ws.root, self.area, self.ws.name),
                          wait_s=LOCK_WAIT_S), \
                    erasure_generation.Storing(self.ws, self.generation) as unchanged:
                if unchanged:
                    for name, record in pending:
                        self._write(name, record)
        except (sqlite3.Error, OSError, JournalError):
            self.writable = False

    def _write(self, name: str, record: Any) -> None:
        if record is None:
            run_write(self.conn, lambda c: c.execute(
                "DELETE FROM segments WHERE name = ?", (name,)))
            return
        mark, values = record
        blobs = [marshal.dumps(v, _MARSHAL) for v in (mark.packed(), *values)]
        digest = ":".join(xxh3_128_hexdigest(b) for b in blobs)
        run_write(self.conn, lambda c: c.execute(
            "INSERT OR REPLACE INTO segments(name, mark, head, others, subjects, "
            "plain, digest) VALUES (?, ?, ?, ?, ?, ?, ?)", (name, *blobs, digest)))


def _part_of(rel: str, head: Any, others: list[Any]) -> SegmentRead:
    high, malformed, tombstones, rewrites, _counts = head
    part = SegmentRead(rel)
    part.rows = list(others)
    part.high = high
    part.malformed = [{"segment": rel, "row": seq, "reason": why} for seq, why in malformed]
    part.tombstones = dict(tombstones)
    part.rewrites = dict(rewrites)
    return part


def counts_of(head: Any) -> dict[tuple[str, str], int]:
    """Events by (type, kind) in a record's `head`."""
    counts: dict[tuple[str, str], int] = head[4]
    return counts


def _open(ws: Workspace, area: str, layout: str | None = None) -> sqlite3.Connection:
    # No sync per record: a record a crash tears fails its digest and is read
    # again, and a file SQLite cannot open is started afresh.
    conn = open_identified_cache(path_of(ws, area), SCHEMA, _identity(ws, area, layout),
                                 what="read projection", no_sync=True)
    # Each record is read once a run, so pages kept in memory are never read
    # again: a small page cache (not tens of MiB of a large projection).
    conn.execute("PRAGMA cache_size=-2048")
    return conn


def _open_read_only(ws: Workspace, area: str, layout: str | None = None
                    ) -> sqlite3.Connection | None:
    """The kept projection opened read-only, when there is one of this format for this
    workspace; else None (every segment is then read)."""
    from agent_journal.storage.connection import quote_path

    path = path_of(ws, area)
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    conn = None
    try:
        conn = sqlite3.connect(f"file:{quote_path(path)}?mode=ro", uri=True,
                               isolation_level=None, timeout=LOCK_WAIT_S)
        have = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if have == _identity(ws, area, layout):
            return conn
    except sqlite3.Error:
        pass
    if conn is not None:
        conn.close()
    return None


def discard(ws: Workspace, area: str = AREA) -> None:
    """Delete the workspace's projection: it is read again from the segments."""
    remove_cache_files(path_of(ws, area))


@contextmanager
def open_projection(ws: Workspace, area: str = AREA, *, keep: bool = True,
                    layout: str | None = None) -> Iterator[Projection | None]:
    """The workspace's projection, locked for this run; None when it cannot be
    used (the caller then reads the segments directly). Without `keep` (a read
    that promises to write nothing: a dry run, coverage) the projection another
    run kept is read as it is, read-only and unlocked, and nothing under the root is
    created or changed (SQLite's own locking keeps the read consistent)."""
    if not keep:
        projection = Projection(ws, area, _open_read_only(ws, area, layout), keep=False,
                                layout=layout)
        try:
            yield projection
        finally:
            projection.close()
        return
    try:
        exists = os.path.exists(path_of(ws, area))
        projection = Projection(ws, area, _open(ws, area, layout) if exists else None,
                                layout=layout)
    except (OSError, sqlite3.Error, JournalError):
        yield None
        return
    try:
        yield projection
        projection.flush()  # (not after an exception: a run that failed keeps nothing)
    finally:
        projection.close()


def segment_names(ws: Workspace) -> list[tuple[str, str, str]]:
    """(path, rel, name) of every segment, in read order."""
    return [(p, ws.rel(p), os.path.basename(p)) for p in ws.segment_paths()]


def marked(projection: Projection | None, ws: Workspace, fetch: Fetch
           ) -> list[tuple[str, str, str, Before, str, Record | None]]:
    """Every segment, in read order, as a run of any projection starts it: (path, rel,
    name, the signature taken before any of its rows is read, the verdict of
    `verified_mark.check` on its kept record, by the reader's own query `fetch`, or
    CHANGED when none is kept, the record). Records of segments gone are dropped."""
    segments = segment_names(ws)
    records = {} if projection is None else projection.records
    if projection is not None:
        projection.drop(*sorted(records.keys() - {name for _, _, name in segments}))
    found = []
    for path, rel, name in segments:
        before = Before(path)
        record = records.get(name)
        found.append((path, rel, name, before,
                      CHANGED if record is None else verified_mark.check(path, record.mark, fetch),
                      record))
    return found


class Seen:
    """One segment as a run takes it: `part` (its rows: every row but the plain
    observations, which stay in the segment), the ids of its observations
    (or, with `ages` from a record that held, of its plain ones),
    its events by (type, kind), and `ages`, the ages of its plain
    observations (when asked for)."""

    __slots__ = ("path", "part", "subjects", "counts", "ages")

    def __init__(self, path: str, part: SegmentRead, subjects: list[str],
                 counts: dict[tuple[str, str], int], ages: Summary | None = None) -> None:
        self.path = path
        self.part = part
        self.subjects = subjects
        self.counts = counts
        self.ages = ages


def projected(projection: Projection | None, ws: Workspace, *, ages: bool,
              read_whole: Any, read_tail: Any) -> Iterator[Seen]:
    """Every segment, in order, from the projection where its mark holds.

    `read_whole(list of (path, rel))` gives, in order, the whole read part of
    each segment the projection cannot answer for (every row, as event
    values); `read_tail(path, rel, after)` the rows above a mark. Parts
    hold every row but the plain observations; with `ages`, each comes with
    their ages. Without a projection every segment is read whole.
    """
    from agent_journal.storage.compaction_rows import fetch_rows

    plan = marked(projection, ws, fetch_rows)
    whole = iter(read_whole([(p, r) for p, r, _, _, state, _ in plan if state == CHANGED]))

    def fresh(path: str, rel: str, name: str, before: Before, part: SegmentRead,
              kept: list[Any] | None = None) -> Seen:
        """The part of rows just read: the whole segment, or (`kept`: the
        record's head, others, subjects and ages) the rows above its mark."""
        subjects, counts, summary = part.split_plain().split  # type: ignore[misc]
        part.split = None  # the run holds the ages only as long as it needs them
        if kept is not None:
            head, others, kept_subjects, kept_ages = kept
            part.rows[:0] = others
            subjects[:0] = kept_subjects
            counts = dict(Counter(counts_of(head)) + Counter(counts))
            summary = merged(kept_ages, summary)
        if projection is not None and part.unreadable is None and part.high is not None:
            mark = before.mark(part.high, part.fold)
            if mark is not None:
                projection.store(name, mark, part, subjects, counts, summary)
        return Seen(path, part, subjects, counts, summary if ages else None)

    for path, rel, name, before, state, record in plan:
        if state == CHANGED:
            yield fresh(path, rel, name, before, next(whole))
            continue
        assert projection is not None and record is not None
        # With ages, a segment that has not changed needs no `subjects`: its
        # plain observations' ids are the ages' (one copy of a million ids).
        got = projection.load(record, "head", "others", "subjects", "plain") \
            if state != SAME else projection.load(
                record, "head", "others", "plain" if ages else "subjects")
        record.loaded.clear()  # held by this run only as long as it needs them
        if got is not None and (state == SAME and not ages or is_summary(got[-1])):
            if state == SAME:
                part = _part_of(rel, got[0], got[1])
                if ages:
                    yield Seen(path, part, ids_of(got[2]), counts_of(got[0]), got[2])
                else:
                    yield Seen(path, part, got[2], counts_of(got[0]))
                continue
            # GROWN: what was kept, and the rows above its mark
            tail = read_tail(path, rel, record.mark)
            if tail.unreadable is None and tail.high is not None:
                kept = _part_of(rel, got[0], [])
                kept.fold = tail.fold
                kept.rows = tail.rows
                kept.malformed.extend(tail.malformed)
                kept.tombstones.update(tail.tombstones)
                kept.rewrites.update(tail.rewrites)
                kept.high = tail.high
                yield fresh(path, rel, name, before, kept, got)
                continue
        projection.drop(name)
        yield fresh(path, rel, name, before, next(iter(read_whole([(path, rel)]))))
