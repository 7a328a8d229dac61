"""Erasure: the only code that deletes journal rows and the files derived from them
(with segment_copy.py, the deletions made by copy, and cache_sweep.py, the projections).

Invariants:
- Every deleting connection overwrites what it frees (secure_delete) and keeps
  no journal of old pages past its commit; a WAL is truncated after it. A
  row's body is overwritten in place before the row is deleted, so the
  rebalancing of pages a delete causes never carries its content elsewhere.
- A segment rows were deleted from in place is rebuilt afterwards (VACUUM),
  so no page keeps the stale copy of a row that a page rebuild left behind.
  The first delete marks the segment (`meta` key `rebuild`, in the same
  transaction) and the rebuild clears the mark: a run killed in between
  leaves it for the next run to finish (`rebuild_marked`).
- A segment loses its rows by a copy of the rows that stay, which replaces
  the file whole (segment_copy.py), wherever that can be done safely (a
  rollback-journal segment with no other name); only the others, and a
  segment's tombstone rewrites when it loses no row, are changed in place.
- In place, a segment is changed in short transactions of at most CHUNK_ROWS
  rows stored near each other (CHUNK_SPAN), each first checking nothing was
  appended that the plan could depend on (segment_edit.check_high); rows go
  by event id only, an item's rows in one transaction, rewrites after every
  delete of the segment committed.
- A compaction about to change files writes its intent first, so a killed run
  is finished (or undone) by the next one.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_journal.core.errors import BusyError, JournalError, StorageError
from agent_journal.storage.cache_sweep import clear_orphan_caches as clear_orphan_caches
from agent_journal.storage.cache_sweep import clear_workspace_cache as clear_workspace_cache
from agent_journal.storage.cache_sweep import projection_of as projection_of
from agent_journal.storage.connection import (
    connect,
    describe_sqlite_error,
    is_busy,
    run_write,
)
from agent_journal.storage.files import make_private_dirs, read_text, write_file_atomic
from agent_journal.storage.segment_copy import copy_survivors
from agent_journal.storage.segment_edit import (
    REBUILD_KEY,
    Applied,
    SegmentGrew,
    Tolerate,
    TombstoneRewrite,
    check_high,
    keep_removed_ids,
    max_seq,
    rewrite_tombstones,
    text_is_utf8,
)
from agent_journal.storage.workspace import Workspace

WAL_CHECKPOINT_ATTEMPTS = 20
COMPACT_INTENT = ".compact-pending.json"


# Rows one transaction deletes or rewrites. Hooks append to the segment being
# compacted and wait for its write lock: a segment's work as one transaction
# held that lock for seconds; chunks this size hold it for milliseconds, and
# the hook's append slips in between (`make bench BENCH=hooks`).
CHUNK_ROWS = 1000
# ... and rows stored within at most this many seq positions of each other.
# What a transaction costs, and how long it holds the lock, is the pages it
# writes (each first copied to the rollback journal): a run of 1000 rows
# deleted side by side fills a hundred-odd pages, but 1000 scattered rows (a
# tombstone every tenth event) touch nearly every page of the segment, and
# the next chunk touches them all again. A chunk of rows stored near each
# other writes about as many pages whatever the density.
CHUNK_SPAN = 2000
# After each chunk the lock is left free for as long as the chunk held it (at
# most this long): a hook waiting on it polls every few milliseconds and would
# otherwise keep losing it to the next chunk, taken the instant this one
# commits.
CHUNK_PAUSE_MAX_S = 0.05


# Compaction's segment transactions are independent within a pass and spend
# their time in SQLite, which runs without the GIL, and much of it waiting on
# fsync: more run at once than there are cores (past about 8 a pass gains
# nothing more; `make bench BENCH=compact` measures it).
APPLY_THREADS = 8


def erasing_connection(path: str) -> sqlite3.Connection:
    """A connection whose deletes overwrite what they free.

    secure_delete is set here, on the connection, because its compile-time
    default differs between builds. A rollback journal holds the old pages
    until commit, so it must be one that is unlinked at commit (DELETE), never
    one that is kept (PERSIST, TRUNCATE). A WAL segment stays WAL; the caller
    checkpoints it with TRUNCATE after the commit.
    """
    conn = connect(path)
    try:
        on = conn.execute("PRAGMA secure_delete = ON").fetchone()
        if on is None or int(on[0]) != 1:
            raise JournalError(f"SQLite refused secure_delete on {path}; nothing was deleted")
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode != "wal" and mode != "delete":
            conn.execute("PRAGMA journal_mode = DELETE")
    except BaseException:
        conn.close()
        raise
    return conn


# A writer waiting on its busy timeout polls every 100 ms at the slowest.
REBUILD_PAUSE_MAX_S = 0.2


# Before its rows go, a chunk overwrites their bodies with zeros of the same
# length: a row whose size does not change is rewritten where it lies. The
# delete that follows rebalances the table's pages as they empty, and SQLite
# rebuilds a page by repacking its cells without clearing the bytes they
# leave behind (secure_delete clears only a deleted cell): a row still
# waiting in the chunk, moved to a sibling, would otherwise leave a copy of
# its content in the page it left once its own deletion zeroes the new one.
# (One statement each over a JSON list where SQLite allows: see
# `bulk_json_usable`.)
_BLANK_LISTED = ("UPDATE events SET body = zeroblob(length(body)) "
                 "WHERE event_id IN (SELECT value FROM json_each(?))")
_DELETE_LISTED = "DELETE FROM events WHERE event_id IN (SELECT value FROM json_each(?))"
_BLANK_ONE = "UPDATE events SET body = zeroblob(length(body)) WHERE event_id = ?"


_BULK_JSON: list[bool] = []


def bulk_json_usable(conn: sqlite3.Connection) -> bool:
    """Whether a list of ids or rows can go to SQLite as one JSON text.

    A compaction's deletes and rewrites go to SQLite as one statement each over
    a JSON list, not as one statement per row: executemany takes the GIL back
    for every row, and with other threads busy in Python each of those waits
    cost milliseconds. Bodies travel as text, so only where a blob cast to text
    is its UTF-8 bytes, and only where SQLite has json_each and UPDATE FROM.
    """
    if not _BULK_JSON:
        ok = sqlite3.sqlite_version_info >= (3, 33, 0)
        if ok:
            try:
                conn.execute("SELECT value FROM json_each('[1]')").fetchall()
            except sqlite3.OperationalError:
                ok = False
        _BULK_JSON.append(ok)
    return _BULK_JSON[0] and text_is_utf8(conn)


def apply_to_segment(path: str, expected_high: int, delete_ids: Iterable[str],
                     rewrites: Iterable[TombstoneRewrite], tolerate: Tolerate | None = None,
                     together: Callable[[str], object] | None = None) -> Applied:
    """Delete rows and rewrite tombstones in one segment.

    `rewrites` say which tombstones to turn purged (`TombstoneRewrite`); a
    row whose checksum changed since it was read is left alone. A segment
    with rows to delete is replaced by a copy of the rows that stay, rewrites
    made (segment_copy.copy_survivors), where that can be done safely (a live
    segment's appends during the copy go into the copy). Otherwise
    the work goes in place, in chunks of at most CHUNK_ROWS rows
    stored near each other (CHUNK_SPAN, see `_chunks`), in storage order,
    each its own transaction, so writers appending to the segment wait
    milliseconds, not the whole segment's work: the deletes first (adjacent
    ids with the same `together` key, an item's events, always share a
    chunk, so an item is gone whole or not at all), then the rewrites, so a
    tombstone is flipped only once the deletions in this segment committed.
    Each chunk (and the copy) first checks the segment's highest seq is still
    the one the previous chunk left (`expected_high` for the first). If it grew,
    `tolerate`, shown the events appended since (under the write lock, so no
    more can arrive), may accept them: rows are deleted and rewritten by event
    id, so appends the plan does not depend on are simply left in place.
    Otherwise SegmentGrew is raised, carrying the deletions earlier chunks
    committed (none when the first chunk saw it).
    """
    ids, rows = list(delete_ids), list(rewrites)
    if ids:
        copied = copy_survivors(path, expected_high, ids, rows, tolerate,
                                bulk=bulk_json_usable)
        if copied is not None:
            return copied
    try:
        return _apply_to_segment(path, expected_high, ids, rows, tolerate, together)
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise BusyError("the journal stayed locked by other writers; retry") from None
        raise StorageError(f"cannot compact {path}: {describe_sqlite_error(exc)}") from None
    except sqlite3.Error as exc:
        # The chunk's transaction rolled back; the chunks before it committed
        # whole items, and the intent file lets the next run finish the rest.
        raise StorageError(f"cannot compact {path}: {describe_sqlite_error(exc)}") from None


def _chunks(ids: list[str], together: Callable[[str], object] | None,
            seq_of: dict[str, int] | None = None) -> list[list[str]]:
    """`ids` cut into runs of at most CHUNK_ROWS, never between two adjacent ids
    with the same `together` key (a run of one key longer than that stays whole).

    With `seq_of` (where each id is stored; ids not found count as stored
    first) the runs of one key are put in storage order first, and a chunk
    also ends before it would span more than CHUNK_SPAN seq positions.
    """
    runs: list[list[str]] = []
    last: object = None
    for event_id in ids:
        key = together(event_id) if together is not None else event_id
        if runs and key == last:
            runs[-1].append(event_id)
        else:
            runs.append([event_id])
        last = key
    if seq_of is None:
        spans = [(0, 0)] * len(runs)
    else:
        spans = [(min(seq_of.get(i, 0) for i in run), max(seq_of.get(i, 0) for i in run))
                 for run in runs]
        order = sorted(range(len(runs)), key=lambda n: spans[n][0])
        runs, spans = [runs[n] for n in order], [spans[n] for n in order]
    out: list[list[str]] = []
    current: list[str] = []
    low = high = 0
    for run, (lo, hi) in zip(runs, spans, strict=True):
        if current and (len(current) >= CHUNK_ROWS
                        or max(high, hi) - min(low, lo) > CHUNK_SPAN):
            out.append(current)
            current = []
        if not current:
            low, high = lo, hi
        current.extend(run)
        low, high = min(low, lo), max(high, hi)
    if current:
        out.append(current)
    return out


def _stored_at(conn: sqlite3.Connection, ids: list[str]) -> dict[str, int]:
    """The seq each of `ids` is stored at in the segment (those present)."""
    found: dict[str, int] = {}
    if bulk_json_usable(conn):
        for start in range(0, len(ids), 50_000):
            found.update(conn.execute(
                "SELECT event_id, seq FROM events WHERE event_id IN "
                "(SELECT value FROM json_each(?))", (json.dumps(ids[start:start + 50_000]),)))
        return found
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        found.update(conn.execute("SELECT event_id, seq FROM events WHERE event_id IN "
                                  f"({','.join('?' * len(part))})", part))
    return found


def _apply_to_segment(path: str, expected_high: int, ids: list[str],
                      rewrite_rows: list[TombstoneRewrite], tolerate: Tolerate | None,
                      together: Callable[[str], object] | None) -> Applied:
    conn = erasing_connection(path)
    try:
        # Where the rows lie, read before any write lock is taken: chunks are
        # cut by storage order (CHUNK_SPAN). A row appended or moved since
        # only makes its chunk a little longer.
        seq_of = _stored_at(conn, ids + [row.event_id for row in rewrite_rows])
        delete_chunks = _chunks(ids, together, seq_of)
        by_id = {row.event_id: row for row in rewrite_rows}
        rewrite_chunks = [[by_id[t] for t in chunk]
                          for chunk in _chunks(list(by_id), None, seq_of)]
        wal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
        high = expected_high
        deleted: list[str] = []
        done: set[str] = set()
        last = len(delete_chunks) + len(rewrite_chunks) - 1
        try:
            for n, chunk in enumerate(delete_chunks):
                started = time.perf_counter()
                high = run_write(conn, lambda c, chunk=chunk, seen=high, first=n == 0:
                                 _delete_chunk(c, path, seen, chunk, tolerate, mark=first))
                deleted += chunk
                _pause(started, n == last)
            for n, rows in enumerate(rewrite_chunks, start=len(delete_chunks)):
                started = time.perf_counter()
                high, flipped = run_write(conn, lambda c, rows=rows, seen=high: _rewrite_chunk(
                    c, path, seen, rows, tolerate))
                done |= flipped
                _pause(started, n == last)
            if not delete_chunks and not rewrite_chunks:
                high = run_write(conn, lambda c: _delete_chunk(
                    c, path, expected_high, [], tolerate))
        except SegmentGrew:
            if not deleted:
                raise
            clean = _truncate_wal(conn) if wal else True
            raise SegmentGrew(path, deleted, high, clean) from None
        clean = _truncate_wal(conn) if wal else True
        return Applied(high, done, clean)
    finally:
        conn.close()


def _pause(started: float, last: bool) -> None:
    """Leave the segment's write lock free for a moment between two chunks."""
    if not last:
        time.sleep(min(time.perf_counter() - started, CHUNK_PAUSE_MAX_S))


def _delete_chunk(c: sqlite3.Connection, path: str, seen: int, ids: list[str],
                  tolerate: Tolerate | None, mark: bool = False) -> int:
    check_high(c, path, seen, tolerate)
    if ids and mark:
        # Committed with the first deletions, so no run can delete from the
        # segment and leave it unmarked for `rebuild_marked`.
        c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, 'pending')",
                  (REBUILD_KEY,))
    if not ids:
        pass
    elif bulk_json_usable(c):
        # One statement each, so the whole loop runs inside SQLite without
        # the GIL (see `bulk_json_usable`).
        listed = json.dumps(ids)
        c.execute(_BLANK_LISTED, (listed,))
        c.execute(_DELETE_LISTED, (listed,))
    else:
        c.executemany(_BLANK_ONE, [(i,) for i in ids])
        c.executemany("DELETE FROM events WHERE event_id = ?", [(i,) for i in ids])
    keep_removed_ids(c, ids)
    return max_seq(c)


def _rewrite_chunk(c: sqlite3.Connection, path: str, seen: int,
                   rewrite_rows: list[TombstoneRewrite], tolerate: Tolerate | None
                   ) -> tuple[int, set[str]]:
    check_high(c, path, seen, tolerate)
    done = rewrite_tombstones(c, rewrite_rows, bulk=bulk_json_usable(c))
    return max_seq(c), done


def _truncate_wal(conn: sqlite3.Connection) -> bool:
    """Copy the WAL into the database and cut it to zero bytes.

    The WAL keeps every page image written since it was last reset, including
    the ones that first stored content just deleted.
    """
    delay = 0.02
    for _ in range(WAL_CHECKPOINT_ATTEMPTS):
        try:
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            busy = 1
        if busy == 0:
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    return False


def rebuild_marked(ws: Workspace) -> list[str]:
    """Rebuild every segment of the workspace marked by a delete, one at a time;
    returns the segments (relative to the root) left marked because other
    processes kept them busy past the busy timeout.

    A delete that empties pages makes SQLite rebuild pages by repacking their
    cells, and the bytes a moved cell occupied stay in the page it left:
    stale copies of rows the delete kept. Should a later run erase such a
    row, `secure_delete` clears only the cell it deletes, and the copy would
    outlive it. VACUUM writes the segment afresh from its rows (`seq` is the
    table's INTEGER PRIMARY KEY, so rows keep their seq) and cuts it to its
    new size: no page or freed space holds anything but live rows.
    """
    left: list[str] = []
    pause = 0.0
    for path in ws.segment_paths():
        try:
            if not _marked(path):
                continue
            # Writers read every segment (a write looks for tombstones): a
            # hook let through only between two rebuilds would wait for each
            # of them in turn. The segments are left free for a moment, as
            # long as the last rebuild took (at most REBUILD_PAUSE_MAX_S).
            time.sleep(pause)
            started = time.perf_counter()
            if not _rebuild(path):
                left.append(ws.rel(path))
            pause = min(time.perf_counter() - started, REBUILD_PAUSE_MAX_S)
        except sqlite3.Error as exc:
            if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                left.append(ws.rel(path))
                continue
            raise StorageError(f"cannot rebuild {path}: {describe_sqlite_error(exc)}") from None
    return left


def _marked(path: str) -> bool:
    conn = connect(path, readonly=True)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                        ).fetchone() is None:
            return False
        return conn.execute("SELECT 1 FROM meta WHERE key = ?",
                            (REBUILD_KEY,)).fetchone() is not None
    finally:
        conn.close()


def _rebuild(path: str) -> bool:
    """VACUUM one segment, then clear its mark; False if it stayed busy.

    VACUUM holds the segment's exclusive lock while it copies it (writers
    and readers wait on their busy timeout). Its copy is built in memory
    (`temp_store`), never in a file outside the root, and the copy back goes
    through the same rollback journal, unlinked at commit, as any delete (or,
    for a WAL segment, through the WAL, truncated afterwards).
    """
    conn = erasing_connection(path)
    try:
        conn.execute("PRAGMA temp_store = MEMORY")
        try:
            conn.execute("VACUUM")
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                return False
            raise
        wal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
        if wal and not _truncate_wal(conn):
            return False  # the WAL holds the old pages: rebuilt again next run
        try:  # one statement, its own transaction: the busy timeout is its patience
            conn.execute("DELETE FROM meta WHERE key = ?", (REBUILD_KEY,))
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                return False
            raise
        if wal:
            _truncate_wal(conn)
        return True
    finally:
        conn.close()


@dataclass(frozen=True)
class CompactIntent:
    """What `.compact-pending.json` says a run meant to finish, should it die
    first: the artifact blobs to delete, the tombstones to flip (tombstone
    event id -> target) and the segments (relative to the root) it may change,
    None when it may have changed any (an intent torn, or of an older version).
    The file also always says `"cache": true`: the projections must go."""

    digests: list[str]
    flips: dict[str, str] = field(default_factory=dict)
    segments: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"digests": self.digests, "cache": True, "flips": self.flips,
                "segments": self.segments}

    @classmethod
    def from_json(cls, value: Any) -> CompactIntent:
        """The intent a file's JSON holds; a torn one assumes the worst."""
        if not isinstance(value, dict):
            return cls([])
        digests, flips, segments = value.get("digests"), value.get("flips"), value.get("segments")
        return cls([d for d in digests if isinstance(d, str)] if isinstance(digests, list) else [],
                   {str(k): str(v) for k, v in flips.items()} if isinstance(flips, dict) else {},
                   segments if isinstance(segments, list)
                   and all(isinstance(seg, str) for seg in segments) else None)


def read_compact_intent(ws: Workspace) -> CompactIntent | None:
    """What an earlier `compact --apply` meant to finish (blobs, cache) if it died first."""
    try:
        raw = read_text(os.path.join(ws.path, COMPACT_INTENT))
    except FileNotFoundError:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None  # a torn intent: assume the worst
    return CompactIntent.from_json(value)


def write_compact_intent(ws: Workspace, intent: CompactIntent) -> None:
    make_private_dirs(ws.path)
    # Unsorted: a run over a large journal names a flip per tombstone, and
    # sorting them bought nothing a reader uses.
    path = os.path.join(ws.path, COMPACT_INTENT)
    try:
        write_file_atomic(path, json.dumps(intent.to_json(), separators=(",", ":")).encode())
    except OSError as exc:
        # A full disk, most likely. The first intent is written before anything is
        # touched, so a run stopped here changed nothing; a later one leaves the earlier
        # intent for the next run to finish.
        raise StorageError(f"cannot write the compaction's intent file {path}: "
                           f"{exc.strerror}") from None


def drop_compact_intent(ws: Workspace) -> None:
    try:
        os.unlink(os.path.join(ws.path, COMPACT_INTENT))
    except FileNotFoundError:
        pass
