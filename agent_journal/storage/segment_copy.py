"""Erasure by copy: a sealed segment's surviving rows copied into a new file that
replaces it.

Deleting rows in place costs what secure_delete rewrites, then a VACUUM that
copies the whole file again (erasure.py); copying the rows that stay into a
new file costs one copy, and leaves no freed page, journal or stale cell with
a deleted row's bytes. It is used only where no append can reach.

Invariants:
- Only a sealed segment is copied (`sealed_segments`: every segment but this
  replica's two newest own ones), and only in a rollback journal mode: a WAL
  and its index are found by the file's name, and a new file under that name
  would inherit them. Anything else is changed in place.
- The copy is the old file without the deleted rows: the same schema and
  header settings (page size, encoding, user_version, application_id), every
  other row as stored at the same seq (the INTEGER PRIMARY KEY, which readers
  and the read projection's marks count on), in the same order, and each
  tombstone turned purged exactly as in place (segment_edit.py); `meta`
  without the rebuild mark (nothing was ever deleted in the new file), and
  `removed` with the ids deleted (segment_edit.keep_removed_ids).
- The copy replaces the old file whole (written, fsynced, renamed over it,
  the folder fsynced), under the old file's exclusive lock, and only while
  no other connection has committed to the old file since the copy was made
  (`data_version`), its only name is the segment's (a push links a sealed
  segment into its stage, ops/export.py: such a segment is changed in place,
  where the link sees the change too), and no journal or WAL lies beside it.
  Otherwise the copy is deleted, the old file is as it was, and the caller
  changes the segment in place.
- So no name under the root keeps the old bytes. A process that had the old
  file open reads what it read before (as if it had read before the
  compaction; the erasure generation keeps it from storing that, see
  erasure_generation.py); a writer that had it open is refused by SQLite
  (SQLITE_READONLY_DBMOVED), never silently lost (a hook spools the event).
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

from agent_journal.core import merge_plan
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

if TYPE_CHECKING:
    from agent_journal.storage.workspace import Workspace

COPY_PREFIX = ".compact-"


def sealed_segments(ws: Workspace) -> set[str]:
    """The segments (relative to the root) no append can reach: every other replica's,
    and this replica's own but its two newest (merge_plan.sealed_own), of its id and of
    each id it forked from (a process that read the old id may still append there)."""
    from agent_journal.storage.replica_fork import own_replicas

    paths = ws.segment_paths()
    replicas = own_replicas(ws.root)
    names = [os.path.basename(p) for p in paths]
    own_sealed = frozenset().union(*(merge_plan.sealed_own(names, r) for r in replicas))
    sealed: set[str] = set()
    for path in paths:
        name = os.path.basename(path)
        found = merge_plan.own_segment(name)
        if found is None or found[0] not in replicas or name in own_sealed:
            sealed.add(ws.rel(path))
    return sealed


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


def copy_survivors(path: str, expected_high: int, deletes: list[str],
                   rewrites: list[TombstoneRewrite], tolerate: Tolerate | None, *,
                   bulk: Callable[[sqlite3.Connection], bool]) -> Applied | None:
    """Replace a sealed segment by a copy without the rows `deletes` names and
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
        if copied is None or not _swap(old, path, tmp, copied.version, inode):
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
    return _Copy(high, rewritten, version)


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


def _swap(old: sqlite3.Connection, path: str, tmp: str, version: int,
          inode: tuple[int, int]) -> bool:
    """Rename the copy over the old file under its exclusive lock (no reader
    between), if nothing changed it since the copy; False, changing nothing,
    when something did or readers kept it busy."""
    try:
        old.execute("BEGIN EXCLUSIVE")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            return False
        raise
    try:
        st = os.stat(path)
        if int(old.execute("PRAGMA data_version").fetchone()[0]) != version \
                or (st.st_dev, st.st_ino) != inode or st.st_nlink != 1 \
                or os.path.exists(path + "-journal") or os.path.exists(path + "-wal"):
            return False
        check_confined(path)
        os.replace(tmp, path)
        return True
    finally:
        old.execute("ROLLBACK")

