"""Erasure by copy: a segment's surviving rows copied into a new file that
replaces it.

Deleting rows in place costs what secure_delete rewrites, then a VACUUM that
copies the whole file again (erasure.py); copying the rows that stay into a
new file costs one copy, and leaves no freed page, journal or stale cell with
a deleted row's bytes.

Invariants:
- Only a segment in a rollback journal mode is copied: a WAL and its index
  are found by the file's name, and a new file under that name would inherit
  them. Anything else is changed in place.
- The copy is the old file without the deleted rows: the same schema and
  header settings (page size, encoding, user_version, application_id), every
  other row as stored at the same seq (the INTEGER PRIMARY KEY, which readers
  and the read projection's marks count on), in the same order, and each
  tombstone turned purged exactly as in place (segment_edit.py); `meta`
  without the rebuild mark (nothing was ever deleted in the new file), and
  `removed` with the ids deleted (segment_edit.keep_removed_ids).
- The copy replaces the old file whole (written, fsynced, renamed over it,
  the folder fsynced), under the old file's exclusive lock, and only while
  its only name is the segment's (a push links a sealed segment into its
  stage, ops/export.py: such a segment is changed in place, where the link
  sees the change too) and no journal or WAL lies beside it. Rows a writer
  appended to a live segment after the copy was made (writers append
  nothing else, and only a compaction, under the workspace's lock, deletes
  or rewrites a row) are copied too under that lock, after the plan's check
  of them (`check_high`: SegmentGrew, the old file left as it was); any
  other change since the copy leaves the old file as it was, the copy is
  deleted, and the caller changes the segment in place.
- So no name under the root keeps the old bytes, and no append is lost: an
  append either committed before the exclusive lock (and is in the copy) or
  comes after the rename (into the new file). The rename is made under the
  swap guard (swap_guard.py), so no writer is between its check of the file
  it holds and the end of its statement: its next statement opens the new
  file. (Where the folder cannot be locked, SQLite refuses a writer's write to
  the old file, SQLITE_READONLY_DBMOVED, and workspace.Writer appends again.) A
  process that had the old file open reads what it read before (as if it
  had read before the compaction; the erasure generation keeps it from
  storing that, see erasure_generation.py).
- A copy a killed run left (`.compact-*` beside the segments) holds only rows
  that run kept; the next `compact --apply` deletes it (`remove_leftovers`),
  holding the compaction lock, before anything else.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from agent_journal.core.errors import StorageError
from agent_journal.storage.connection import connect, is_busy, run_write
from agent_journal.storage.files import (
    check_confined,
    create_private_file,
    fsync_path,
    unlink_quietly,
)
from agent_journal.storage.segment_edit import (
    REBUILD_KEY,
    Applied,
    Tolerate,
    TombstoneRewrite,
    check_high,
    keep_removed_ids,
    rewrite_tombstones,
)
from agent_journal.storage.swap_guard import swap_guard

if TYPE_CHECKING:
    from agent_journal.storage.workspace import Workspace

COPY_PREFIX = ".compact-"


def remove_leftovers(ws: Workspace) -> None:
    """Delete the copies killed runs left beside the segments (the caller holds
    the compaction lock: no other run is copying)."""
    try:
        names = os.listdir(ws.segments_dir)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(COPY_PREFIX):
            unlink_quietly(os.path.join(ws.segments_dir, name))


class _Header(NamedTuple):
    """The settings a segment file carries in its header."""

    page_size: int
    auto_vacuum: int
    encoding: str
    user_version: int
    application_id: int

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> _Header:
        def value(name: str) -> Any:
            return conn.execute(f"PRAGMA {name}").fetchone()[0]

        return cls(int(value("page_size")), int(value("auto_vacuum")), str(value("encoding")),
                   int(value("user_version")), int(value("application_id")))


class _Schema(NamedTuple):
    """A segment's schema as `sqlite_master` lists it, in the order it was made."""

    version: int  # schema_version: it changes with any change to the rest
    tables: list[tuple[str, str]]  # (name, sql) of the tables SQLite does not own
    views: list[str]
    indexes: list[str]  # the explicit indexes and triggers, made after the rows
    sequence: bool  # an AUTOINCREMENT table's `sqlite_sequence` is there

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> _Schema:
        version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                            "ORDER BY rowid").fetchall()
        tables = [(str(n), str(s)) for t, n, s in rows
                  if t == "table" and not str(n).startswith("sqlite_")]
        return cls(version, tables, [str(s) for t, _, s in rows if t == "view"],
                   [str(s) for t, _, s in rows if t in ("index", "trigger")],
                   any(n == "sqlite_sequence" for _, n, _ in rows))


class _Copy(NamedTuple):
    """A finished copy, not yet in place."""

    high: int  # its highest seq
    rewritten: set[str]  # the tombstones turned purged in it
    version: int  # the old file's data_version when it was copied
    schema: int  # the old file's schema_version when it was copied


def copy_survivors(path: str, expected_high: int, deletes: list[str],
                   rewrites: list[TombstoneRewrite], tolerate: Tolerate | None, *,
                   bulk: Callable[[sqlite3.Connection], bool]) -> Applied | None:
    """Replace a segment by a copy without the rows `deletes` names and
    with `rewrites` made (each only while its row is the one read). `bulk`:
    whether a connection takes a list of rows as one JSON text
    (erasure.bulk_json_usable).

    The segment is checked for growth exactly as in place (`check_high`:
    SegmentGrew, the file left as it was). Returns None, the file left as it
    was and the copy deleted, when it cannot be copied safely (see the module's
    invariants) or the copy could not be made (a full disk): the caller then
    changes it in place, which reports any error the file itself gives.
    """
    tmp = os.path.join(os.path.dirname(path),
                       f"{COPY_PREFIX}{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        before = os.stat(path)
        old = connect(path)
    except (OSError, sqlite3.Error):
        return None
    try:
        # The connection is to the file that had this name when it was opened.
        inode = (before.st_dev, before.st_ino)
        if _identity(path) != inode or not _copyable(old, path, bulk):
            return None
        copied = _copy(old, path, tmp, expected_high, deletes, rewrites, tolerate, bulk)
        if copied is None or not _swap(old, path, tmp, copied, inode, tolerate):
            return None
    except (OSError, sqlite3.Error):
        return None
    finally:
        old.close()  # (the last hold on the old file's bytes, once replaced)
        unlink_quietly(tmp)  # (gone already, once renamed)
    try:
        fsync_path(os.path.dirname(path))  # the rename, made durable
    except OSError as exc:
        raise StorageError(f"cannot compact {path}: {exc.strerror}") from None
    return Applied(copied.high, copied.rewritten, True)


def _identity(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _copyable(old: sqlite3.Connection, path: str,
              bulk: Callable[[sqlite3.Connection], bool]) -> bool:
    """A rollback-journal segment with no WAL beside it, in UTF-8, in an SQLite
    that takes the ids to delete as one JSON list."""
    mode = str(old.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    return mode != "wal" and not os.path.exists(path + "-wal") and bulk(old)


def _copy(old: sqlite3.Connection, path: str, tmp: str, expected_high: int,
          deletes: list[str], rewrites: list[TombstoneRewrite], tolerate: Tolerate | None,
          bulk: Callable[[sqlite3.Connection], bool]) -> _Copy | None:
    """The survivors copied into `tmp`, written through (fsynced); None when the
    old file's schema changed meanwhile."""
    schema = _Schema.of(old)
    _create(tmp, _Header.of(old), schema)
    check_confined(tmp)
    old.execute("ATTACH ? AS fresh", (tmp,))
    try:
        old.execute("PRAGMA fresh.journal_mode = OFF")  # a failed copy is thrown away
        old.execute("PRAGMA fresh.synchronous = OFF")  # fsynced whole, once made
        old.execute("PRAGMA temp_store = MEMORY")  # nothing of a row in a file elsewhere
        filled = run_write(old, lambda c: _fill(c, path, schema, expected_high, deletes,
                                                tolerate))
    finally:
        old.execute("DETACH fresh")
    if filled is None:
        return None
    high, version = filled
    rewritten = _finish(tmp, rewrites, schema.indexes, bulk)
    return _Copy(high, rewritten, version, schema.version)


def _create(tmp: str, header: _Header, schema: _Schema) -> None:
    """A new private file with the old one's header settings, tables and views."""
    unlink_quietly(tmp)
    create_private_file(tmp)
    conn = connect(tmp)
    try:
        # (Taken while the file is still empty: they are fixed by its first write.)
        conn.execute(f"PRAGMA page_size = {header.page_size}")
        conn.execute(f"PRAGMA auto_vacuum = {header.auto_vacuum}")
        conn.execute(f"PRAGMA encoding = '{header.encoding}'")
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("BEGIN")
        for _, sql in schema.tables:
            conn.execute(sql)
        for sql in schema.views:
            conn.execute(sql)
        conn.execute(f"PRAGMA user_version = {header.user_version}")
        conn.execute(f"PRAGMA application_id = {header.application_id}")
        conn.execute("COMMIT")
    finally:
        conn.close()


_COPY_EVENTS = ("INSERT INTO fresh.events SELECT * FROM main.events "
                "WHERE event_id NOT IN (SELECT value FROM json_each(?)) ORDER BY seq")


def _fill(c: sqlite3.Connection, path: str, schema: _Schema, expected_high: int,
          deletes: list[str], tolerate: Tolerate | None) -> tuple[int, int] | None:
    """Inside a write transaction on the old file (no other writer can commit to
    it) and the new one: copy every row but the deleted ones. Returns the new
    file's highest seq and the old file's data_version; None when the old
    file's schema is no longer the one copied."""
    if int(c.execute("PRAGMA main.schema_version").fetchone()[0]) != schema.version:
        return None
    check_high(c, path, expected_high, tolerate)
    for name, _ in schema.tables:
        table = '"' + name.replace('"', '""') + '"'
        if name == "events":
            c.execute(_COPY_EVENTS, (json.dumps(deletes),))
        elif name == "meta":
            c.execute("INSERT INTO fresh.meta SELECT * FROM main.meta WHERE key != ?",
                      (REBUILD_KEY,))
        else:
            c.execute(f"INSERT INTO fresh.{table} SELECT * FROM main.{table}")
    if schema.sequence:
        c.execute("INSERT INTO fresh.sqlite_sequence SELECT * FROM main.sqlite_sequence")
    keep_removed_ids(c, deletes, "fresh")
    high = int(c.execute("SELECT coalesce(max(seq), 0) FROM fresh.events").fetchone()[0])
    return high, int(c.execute("PRAGMA main.data_version").fetchone()[0])


def _finish(tmp: str, rewrites: list[TombstoneRewrite], indexes: list[str],
            bulk: Callable[[sqlite3.Connection], bool]) -> set[str]:
    """Turn the tombstones purged and make the indexes in the copy, then write
    it through; returns the tombstones rewritten."""
    conn = connect(tmp)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("BEGIN")
        rewritten = rewrite_tombstones(conn, rewrites, bulk=bulk(conn))
        for sql in indexes:
            conn.execute(sql)
        conn.execute("COMMIT")
    finally:
        conn.close()
    fsync_path(tmp)
    return rewritten


def _swap(old: sqlite3.Connection, path: str, tmp: str, copied: _Copy,
          inode: tuple[int, int], tolerate: Tolerate | None) -> bool:
    """Rename the copy over the old file under its exclusive lock (no reader or
    writer between), once the rows appended since the copy (a live segment's
    writers) are in it too; False, changing nothing, when something else
    changed the file or readers kept it busy. Raises SegmentGrew, changing
    nothing, when an appended row is one the plan may depend on.

    Writers are kept out of the file under the name by the swap guard, taken
    before the old file's lock (swap_guard.py): False when they kept it busy."""
    try:
        with swap_guard(os.path.dirname(path)):
            return _swap_guarded(old, path, tmp, copied, inode, tolerate)
    except TimeoutError:
        return False


def _swap_guarded(old: sqlite3.Connection, path: str, tmp: str, copied: _Copy,
                  inode: tuple[int, int], tolerate: Tolerate | None) -> bool:
    try:
        old.execute("BEGIN EXCLUSIVE")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            return False
        raise
    try:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) != inode or st.st_nlink != 1 \
                or os.path.exists(path + "-journal") or os.path.exists(path + "-wal"):
            return False
        if int(old.execute("PRAGMA data_version").fetchone()[0]) != copied.version \
                and not _catch_up(old, path, tmp, copied, tolerate):
            return False
        check_confined(path)
        os.replace(tmp, path)
        return True
    finally:
        old.execute("ROLLBACK")


def _catch_up(old: sqlite3.Connection, path: str, tmp: str, copied: _Copy,
              tolerate: Tolerate | None) -> bool:
    """Under the old file's exclusive lock: copy the rows writers appended since
    the copy was made into it, written through. The only change a writer makes
    to a segment is an append of events (workspace.Writer), and only a
    compaction, which holds the workspace's lock, deletes or rewrites a row:
    rows up to the copy's highest seq are the ones copied. False when the
    schema changed, or when no row was appended (something else changed the
    file)."""
    if int(old.execute("PRAGMA schema_version").fetchone()[0]) != copied.schema:
        return False
    check_high(old, path, copied.high, tolerate)  # SegmentGrew: left as it was
    rows = old.execute("SELECT * FROM events WHERE seq > ? ORDER BY seq",
                       (copied.high,)).fetchall()
    if not rows:
        return False
    conn = connect(tmp)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        conn.executemany(f"INSERT INTO events VALUES ({','.join('?' * len(rows[0]))})", rows)
        conn.execute("COMMIT")
    finally:
        conn.close()
    fsync_path(tmp)
    return True
