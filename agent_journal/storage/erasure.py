"""Erasure: the only code that deletes journal rows and the files derived from them.

Invariants:
- Every deleting connection overwrites what it frees (secure_delete) and keeps
  no journal of old pages past its commit; a WAL is truncated after it.
- A segment is changed in one transaction that first checks nothing was
  appended that the plan could depend on; rows go by event id only.
- Projections under <root>/cache are disposable: every file a workspace's
  projections leave there, under any name, is deleted with them.
- A compaction about to change files writes its intent first, so a killed run
  is finished (or undone) by the next one.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any

from agent_journal.core import codec
from agent_journal.core.errors import BusyError, JournalError, StorageError
from agent_journal.core.model import Event
from agent_journal.storage.connection import (
    connect,
    describe_sqlite_error,
    is_busy,
    run_write,
)
from agent_journal.storage.files import make_private_dirs, read_text, write_file_atomic
from agent_journal.storage.segment import SEGMENT_SUFFIX
from agent_journal.storage.workspace import Workspace

WAL_CHECKPOINT_ATTEMPTS = 20
COMPACT_INTENT = ".compact-pending.json"


class SegmentGrew(Exception):
    """A segment gained rows after it was read; it must be left alone."""


# Compaction's segment transactions are independent within a pass and spend
# their time in SQLite, which runs without the GIL, and much of it waiting on
# fsync: more run at once than there are cores (past about 8 a pass gains
# nothing more; `make bench BENCH=compact` measures it).
APPLY_THREADS = 8


def text_is_utf8(conn: sqlite3.Connection) -> bool:
    """SQLite reads a blob cast to text in the database's encoding: only a UTF-8
    segment's text is the body's own."""
    return str(conn.execute("PRAGMA encoding").fetchone()[0]).upper() == "UTF-8"


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


def _max_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])


# A compaction's deletes and rewrites go to SQLite as one statement each over
# a JSON list, not as one statement per row: executemany takes the GIL back
# for every row, and with other threads busy in Python each of those waits
# cost milliseconds. Bodies travel as text, so only where a blob cast to text
# is its UTF-8 bytes, and only where SQLite has json_each and UPDATE FROM.
_DELETE_LISTED = "DELETE FROM events WHERE event_id IN (SELECT value FROM json_each(?))"
_REWRITE_LISTED = (
    "UPDATE events SET body = CAST(json_extract(j.value, '$[2]') AS BLOB), "
    "checksum = json_extract(j.value, '$[3]') FROM json_each(?) AS j "
    "WHERE events.event_id = json_extract(j.value, '$[0]') "
    "AND events.checksum = json_extract(j.value, '$[1]')")


# A rewrite whose body is None (see `Rewrite`): the flag turned in place.
_FLIP_TEXT = ("body = CAST(replace(CAST(body AS TEXT), '\"data\":{\"purged\":false,', "
              "'\"data\":{\"purged\":true,') AS BLOB)")


_FLIP_LISTED = (
    f"UPDATE events SET {_FLIP_TEXT}, checksum = json_extract(j.value, '$[2]') "
    "FROM json_each(?) AS j WHERE events.event_id = json_extract(j.value, '$[0]') "
    "AND events.checksum = json_extract(j.value, '$[1]')")


_FLIP_ONE = f"UPDATE events SET {_FLIP_TEXT}, checksum = ? WHERE event_id = ? AND checksum = ?"


_BULK_JSON: list[bool] = []


def _bulk_json_usable(conn: sqlite3.Connection) -> bool:
    if not _BULK_JSON:
        ok = sqlite3.sqlite_version_info >= (3, 33, 0)
        if ok:
            try:
                conn.execute("SELECT value FROM json_each('[1]')").fetchall()
            except sqlite3.OperationalError:
                ok = False
        _BULK_JSON.append(ok)
    return _BULK_JSON[0] and text_is_utf8(conn)


def _rows_after(conn: sqlite3.Connection, seq: int) -> list[Event | None]:
    """The events of the rows past `seq`; None for a row that does not decode."""
    out: list[Event | None] = []
    for event_id, body, digest in conn.execute(
            "SELECT event_id, body, checksum FROM events WHERE seq > ? ORDER BY seq", (seq,)):
        try:
            ev = codec.decode(body, digest)
        except codec.MalformedEvent:
            out.append(None)
            continue
        out.append(ev if ev.event_id == event_id else None)
    return out


def apply_to_segment(path: str, expected_high: int, delete_ids: Iterable[str],
                     rewrites: Iterable[tuple[str, str, bytes | None, str]],
                     tolerate: Callable[[list[Event | None]], bool] | None = None
                     ) -> tuple[int, set[str], bool]:
    """Delete rows and rewrite tombstones in one segment, in one transaction.

    `rewrites` are (event_id, checksum as read, new body or None, new
    checksum), as `Rewrite` says; a row whose checksum changed since it was
    read is left alone. Raises SegmentGrew
    (having changed nothing) when the segment's highest seq is no longer
    `expected_high`, unless it only grew and `tolerate`, shown the events
    appended since (under the write lock, so no more can arrive), accepts
    them: rows are deleted and rewritten by event id, so appends the plan
    does not depend on are simply left in place. Returns the new highest seq,
    the event ids rewritten, and whether the segment is clean afterwards (a WAL
    that could not be truncated may still hold old page images).
    """
    try:
        return _apply_to_segment(path, expected_high, delete_ids, rewrites, tolerate)
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise BusyError("the journal stayed locked by other writers; retry") from None
        raise StorageError(f"cannot compact {path}: {describe_sqlite_error(exc)}") from None
    except sqlite3.Error as exc:
        # The transaction rolled back: this segment is as it was, and the
        # intent file lets the next run finish what the others began.
        raise StorageError(f"cannot compact {path}: {describe_sqlite_error(exc)}") from None


def _apply_to_segment(path: str, expected_high: int, delete_ids: Iterable[str],
                      rewrites: Iterable[tuple[str, str, bytes | None, str]],
                      tolerate: Callable[[list[Event | None]], bool] | None
                      ) -> tuple[int, set[str], bool]:
    delete_rows = [(event_id,) for event_id in delete_ids]
    rewrite_rows = list(rewrites)
    conn = erasing_connection(path)
    try:
        wal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"

        def work(c: sqlite3.Connection) -> tuple[int, set[str]]:
            high = _max_seq(c)
            if high != expected_high and (tolerate is None or high < expected_high
                                          or not tolerate(_rows_after(c, expected_high))):
                raise SegmentGrew(path)
            bulk = _bulk_json_usable(c)
            if bulk:
                # One statement each, so the whole loop runs inside SQLite
                # without the GIL (see `_bulk_json_usable`).
                c.execute(_DELETE_LISTED, (json.dumps([row[0] for row in delete_rows]),))
            else:
                c.executemany("DELETE FROM events WHERE event_id = ?", delete_rows)
            before = c.total_changes
            flips = [row for row in rewrite_rows if row[2] is None]
            whole = [row for row in rewrite_rows if row[2] is not None]
            if bulk and flips:
                c.execute(_FLIP_LISTED, (json.dumps(
                    [[event_id, old, digest] for event_id, old, _, digest in flips]),))
            elif flips:
                c.executemany(_FLIP_ONE, [(digest, event_id, old)
                                          for event_id, old, _, digest in flips])
            if bulk and whole:
                c.execute(_REWRITE_LISTED, (json.dumps(
                    [[event_id, old, body.decode(), digest]  # type: ignore[union-attr]
                     for event_id, old, body, digest in whole], ensure_ascii=False),))
            elif whole:
                c.executemany("UPDATE events SET body = ?, checksum = ? "
                              "WHERE event_id = ? AND checksum = ?",
                              [(body, digest, event_id, old)
                               for event_id, old, body, digest in whole])
            if c.total_changes - before == len(rewrite_rows):
                done = {row[0] for row in rewrite_rows}
            else:  # some row changed since it was read: find out which were rewritten
                wanted = {row[0]: row[3] for row in rewrite_rows}
                done = {event_id for event_id, digest in wanted.items()
                        if c.execute("SELECT 1 FROM events WHERE event_id = ? AND checksum = ?",
                                     (event_id, digest)).fetchone()}
            return _max_seq(c), done

        high, done = run_write(conn, work)
        clean = _truncate_wal(conn) if wal else True
        return high, done, clean
    finally:
        conn.close()


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


def refs_in_rows_since(ws: Workspace, high_water: dict[str, int], needles: Iterable[str]
                       ) -> set[str]:
    """Which needles occur in rows appended after `high_water` (or in new segments).

    Lets compaction keep an artifact blob that a writer referenced again while
    the run was working.
    """
    wanted = sorted(set(needles))
    found: set[str] = set()
    if not wanted:
        return found
    for path in ws.segment_paths():
        since = high_water.get(ws.rel(path), 0)
        try:
            conn = connect(path, readonly=True)
        except sqlite3.Error:
            return set(wanted)  # cannot tell: keep them all
        try:
            for needle in wanted:
                if needle in found:
                    continue
                row = conn.execute("SELECT 1 FROM events WHERE seq > ? AND instr(body, ?) > 0 "
                                   "LIMIT 1", (since, needle.encode())).fetchone()
                if row is not None:
                    found.add(needle)
        except sqlite3.Error:
            return set(wanted)
        finally:
            conn.close()
    return found


def projection_of(name: str, workspace: str) -> bool:
    """Whether a file name under <root>/cache/<kind>/ is one of `workspace`'s
    projections or anything they leave behind.

    A projection is `<ws>.sqlite`; beside it SQLite's `-journal`/`-wal`/`-shm`,
    a build's `<ws>.sqlite.tmp` (and its sidecars), an atomic write's
    `.<ws>.sqlite.<pid>.<random>.tmp`, or any other suffix a later version or
    a killed process leaves. So every name that starts with the workspace's
    projection name is its own, whatever follows, as is `<ws>.<ext>` for a
    projection kept under another extension. Another workspace's files
    start with another name: `a.b.sqlite` is workspace `a.b`'s, not `a`'s.
    (Only a workspace literally named `a.sqlite...` could share the prefix;
    clearing its cache too costs it a rebuild, never a byte of content.)
    """
    stem = workspace + SEGMENT_SUFFIX
    for candidate in (name, name[1:] if name.startswith(".") else None):
        if candidate is None:
            continue
        if candidate == workspace or candidate.startswith(stem):
            return True
        # `<ws>.<ext>` of any other single extension (a projection of another kind)
        if candidate.startswith(workspace + ".") and "." not in candidate[len(workspace) + 1:]:
            return True
    return False


def clear_workspace_cache(ws: Workspace) -> list[str]:
    """Delete every disposable projection of the workspace under <root>/cache.

    Projections are named after the workspace (`cache/<kind>/<ws>.sqlite`,
    see `projection_of` for everything counted with them); readers rebuild
    them from the segments, so removing them loses nothing. Lock files live a
    folder deeper (`cache/<kind>/locks/`) and are left alone.
    """
    import shutil

    cache = os.path.join(ws.root.path, "cache")
    removed: list[str] = []
    if not os.path.isdir(cache):
        return removed
    folders = [cache] + [os.path.join(cache, n) for n in sorted(os.listdir(cache))
                         if os.path.isdir(os.path.join(cache, n))]
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            if not projection_of(name, ws.name):
                continue
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    continue
            removed.append(ws.rel(path))
    return removed


def read_compact_intent(ws: Workspace) -> dict[str, Any] | None:
    """What an earlier `compact --apply` meant to finish (blobs, cache) if it died first."""
    try:
        raw = read_text(os.path.join(ws.path, COMPACT_INTENT))
    except FileNotFoundError:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return {"digests": [], "cache": True}  # a torn intent: assume the worst
    return value if isinstance(value, dict) else {"digests": [], "cache": True}


def write_compact_intent(ws: Workspace, intent: dict[str, Any]) -> None:
    make_private_dirs(ws.path)
    # Unsorted: a run over a large journal names a flip per tombstone, and
    # sorting them bought nothing a reader uses.
    write_file_atomic(os.path.join(ws.path, COMPACT_INTENT),
                      json.dumps(intent, separators=(",", ":")).encode())


def drop_compact_intent(ws: Workspace) -> None:
    try:
        os.unlink(os.path.join(ws.path, COMPACT_INTENT))
    except FileNotFoundError:
        pass
