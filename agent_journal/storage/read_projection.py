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
(observations holding no artifact). `coverage` and `decay` keep their own
lazy read in the same layout at cache/counts (storage/counted_read.py).

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
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from xxhash import xxh3_128_hexdigest

from agent_journal.core.errors import JournalError
from agent_journal.storage import erasure_generation
from agent_journal.storage.cache import (
    cache_lock_path,
    cache_path,
    open_identified_cache,
)
from agent_journal.storage.compaction_rows import SegmentRead
from agent_journal.storage.connection import run_write
from agent_journal.storage.locks import FileLock
from agent_journal.storage.verified_mark import Mark
from agent_journal.storage.workspace import Workspace

AREA = "reads"  # the strict reads compact plans from
COUNTS_AREA = "counts"  # the lazy reads coverage and decay count (see read_counted)
# Bump when what a record keeps, or how, changes: a file of another format is
# thrown away, never read.
FORMAT = "agent-journal-read-projection/1"
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


# What an area's reader keeps, and how it fetches the rows its marks fold,
# beyond FORMAT: bumped when only that reader changes.
AREA_LAYOUTS = {COUNTS_AREA: "counted/2"}  # 2: kinds as the header reads them


def _identity(ws: Workspace, area: str) -> dict[str, str]:
    # The exact decoder's verdicts depend on these limits (see compaction_rows).
    identity = {"format": FORMAT, "area": area, "workspace": ws.name,
                "limits": f"{sys.getrecursionlimit()}:{sys.get_int_max_str_digits()}"}
    if area in AREA_LAYOUTS:
        identity["layout"] = AREA_LAYOUTS[area]
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

    def __init__(self, ws: Workspace, area: str, conn: sqlite3.Connection | None) -> None:
        """`conn` None: there is no projection file yet; it is made by the first
        `store` (so a run that keeps nothing, a refused one, leaves none)."""
        self.ws = ws
        self.area = area
        self._conn = conn
        # Noted before anything is read: a compaction meanwhile drops every store.
        self.generation = erasure_generation.noted(ws)
        self.writable = True
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
            self._conn = _open(self.ws, self.area)
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

    def part(self, record: Record, rel: str, *, plain: bool) -> SegmentRead | None:
        """The kept part (rows: `others`, then with `plain` the plain
        observations); None when the record does not verify."""
        got = self.load(record, "head", "others", *(("plain",) if plain else ()))
        if got is None:
            return None
        return _part_of(rel, got[0], got[1], got[2] if plain else [])

    def store(self, name: str, mark: Mark, part: SegmentRead) -> None:
        """Keep a part read whole (every row, as event values) under its mark."""
        rows = part.rows
        observation = "observation"
        plain = [r for r in rows if r[1] == observation and not r[8]]
        others = [r for r in rows if r[1] != observation or r[8]]
        counts = Counter(map(itemgetter(1, 2), rows))
        head = (part.high, [(m["row"], m["reason"]) for m in part.malformed], part.tombstones,
                part.rewrites, dict(counts))
        subjects = [r[3] for r in rows if r[1] == observation]
        self.put(name, mark, head, others, subjects, plain)

    def put(self, name: str, mark: Mark, *values: Any) -> None:
        """Keep a record: its mark and its columns (COLUMNS after `mark`).
        Best effort: a record that cannot be written is only read again."""
        if not self.writable:
            return
        blobs = [marshal.dumps(v, _MARSHAL) for v in (mark.packed(), *values)]
        digest = ":".join(xxh3_128_hexdigest(b) for b in blobs)
        try:
            with erasure_generation.Storing(self.ws, self.generation) as unchanged:
                if not unchanged:
                    self.writable = False
                    return
                run_write(self.conn, lambda c: c.execute(
                    "INSERT OR REPLACE INTO segments(name, mark, head, others, subjects, "
                    "plain, digest) VALUES (?, ?, ?, ?, ?, ?, ?)", (name, *blobs, digest)))
        except (sqlite3.Error, OSError, JournalError):
            self.writable = False

    def drop(self, *names: str) -> None:
        for name in names:
            self.records.pop(name, None)
        if not self.writable or not names or self._conn is None:
            return
        try:
            run_write(self.conn, lambda c: c.executemany(
                "DELETE FROM segments WHERE name = ?", [(n,) for n in names]))
        except (sqlite3.Error, JournalError):
            self.writable = False


def _part_of(rel: str, head: Any, others: list[Any], plain: list[Any]) -> SegmentRead:
    high, malformed, tombstones, rewrites, _counts = head
    part = SegmentRead(rel)
    part.rows = others + plain if plain else list(others)
    part.high = high
    part.malformed = [{"segment": rel, "row": seq, "reason": why} for seq, why in malformed]
    part.tombstones = dict(tombstones)
    part.rewrites = dict(rewrites)
    return part


def counts_of(head: Any) -> dict[tuple[str, str], int]:
    """Events by (type, kind) in a record's `head`."""
    counts: dict[tuple[str, str], int] = head[4]
    return counts


def _open(ws: Workspace, area: str) -> sqlite3.Connection:
    # No sync per record: a record a crash tears fails its digest and is read
    # again, and a file SQLite cannot open is started afresh.
    return open_identified_cache(path_of(ws, area), SCHEMA, _identity(ws, area),
                                 what="read projection", no_sync=True)


@contextmanager
def open_projection(ws: Workspace, area: str = AREA) -> Iterator[Projection | None]:
    """The workspace's projection, locked for this run; None when it cannot be
    used (the caller then reads the segments directly)."""
    lock = FileLock(cache_lock_path(ws.root, area, ws.name), wait_s=LOCK_WAIT_S)
    try:
        lock.__enter__()
    except (OSError, JournalError):
        yield None
        return
    try:
        try:
            exists = os.path.exists(path_of(ws, area))
            projection = Projection(ws, area, _open(ws, area) if exists else None)
        except (OSError, sqlite3.Error, JournalError):
            yield None
            return
        try:
            yield projection
        finally:
            projection.close()
    finally:
        lock.__exit__(None, None, None)


def segment_names(ws: Workspace) -> list[tuple[str, str, str]]:
    """(path, rel, name) of every segment, in read order."""
    return [(p, ws.rel(p), os.path.basename(p)) for p in ws.segment_paths()]


class Seen:
    """One segment as a run takes it: `part` (its rows: every row but the plain
    observations, and those too when `whole`), the ids of its observations,
    its events by (type, kind), and `held`: [] when the part holds every
    row, None when the plain observations were left out (they are in the
    segment, and in the projection's `record` when it has one)."""

    __slots__ = ("path", "part", "subjects", "counts", "record", "held")

    def __init__(self, path: str, part: SegmentRead, subjects: list[str],
                 counts: dict[tuple[str, str], int], record: Record | None = None,
                 held: list[Any] | None = None) -> None:
        self.path = path
        self.part = part
        self.subjects = subjects
        self.counts = counts
        self.record = record
        self.held = held


def _split(rows: list[Any]) -> tuple[list[str], dict[tuple[str, str], int], list[Any],
                                    list[Any]]:
    """(observation ids, counts by (type, kind), rows but plain observations,
    plain observations)."""
    observation = "observation"
    return ([r[3] for r in rows if r[1] == observation],
            dict(Counter(map(itemgetter(1, 2), rows))),
            [r for r in rows if r[1] != observation or r[8]],
            [r for r in rows if r[1] == observation and not r[8]])


def _merged(old: SegmentRead, tail: SegmentRead) -> SegmentRead:
    """The kept part with the rows read above its mark (whose fold went on
    from the kept rows' fold)."""
    old.fold = tail.fold
    old.rows.extend(tail.rows)
    old.malformed.extend(tail.malformed)
    old.tombstones.update(tail.tombstones)
    old.rewrites.update(tail.rewrites)
    old.high = tail.high
    return old


def projected(projection: Projection | None, ws: Workspace, *, plain: bool,
              read_whole: Any, read_tail: Any) -> Iterator[Seen]:
    """Every segment, in order, from the projection where its mark holds.

    `read_whole(list of (path, rel))` gives, in order, the whole read part of
    each segment the projection cannot answer for (every row, as event
    values); `read_tail(path, rel, after)` the rows above a mark. With
    `plain`, every part holds every row; without, plain observations of
    segments the projection answers for stay in it (`Seen.record`).
    Without a projection every segment is read whole.
    """
    from agent_journal.storage.compaction_rows import fetch_rows
    from agent_journal.storage.verified_mark import CHANGED, SAME, Before, check

    segments = segment_names(ws)
    records = {} if projection is None else projection.records
    if projection is not None:
        projection.drop(*sorted(records.keys() - {name for _, _, name in segments}))
    plan: list[tuple[str, str, str, Before, str, Record | None]] = []
    for path, rel, name in segments:
        before = Before(path)
        record = records.get(name)
        state = CHANGED if record is None else check(path, record.mark, fetch_rows)
        plan.append((path, rel, name, before, state, record))
    whole = iter(read_whole([(p, r) for p, r, _, _, state, _ in plan if state == CHANGED]))

    def keep(path: str, name: str, before: Before, part: SegmentRead) -> None:
        if projection is None or part.unreadable is not None or part.high is None:
            return
        mark = before.mark(part.high, part.fold)
        if mark is not None:
            projection.store(name, mark, part)

    def fresh(path: str, rel: str, name: str, before: Before, part: SegmentRead) -> Seen:
        keep(path, name, before, part)
        if plain:
            return Seen(path, part, [r[3] for r in part.rows if r[1] == "observation"],
                        dict(Counter(map(itemgetter(1, 2), part.rows))))
        # The plain observations go: a plan reads again, from the segment,
        # the few a tombstone names (compaction_rows.rows_about).
        subjects, counts, part.rows, _plain = _split(part.rows)
        return Seen(path, part, subjects, counts)

    for path, rel, name, before, state, record in plan:
        if state == CHANGED:
            yield fresh(path, rel, name, before, next(whole))
            continue
        assert projection is not None and record is not None
        if state == SAME:
            got = projection.load(record, "head", "others", "subjects",
                                  *(("plain",) if plain else ()))
            if got is not None:
                part = _part_of(rel, got[0], got[1], got[3] if plain else [])
                yield Seen(path, part, got[2], counts_of(got[0]),
                           None if plain else record, [] if plain else None)
                continue
        else:  # GROWN: what was kept, and the rows above its mark
            kept = projection.part(record, rel, plain=True)
            if kept is not None:
                tail = read_tail(path, rel, record.mark)
                if tail.unreadable is None and tail.high is not None:
                    yield fresh(path, rel, name, before, _merged(kept, tail))
                    continue
        projection.drop(name)
        yield fresh(path, rel, name, before, next(iter(read_whole([(path, rel)]))))

