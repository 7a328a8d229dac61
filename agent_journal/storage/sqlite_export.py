"""`export --sqlite FILE`: one Datasette-ready SQLite database of a workspace, written with
sqlite-utils (the only module that imports it).

Invariants:
- The schema lives here: the tables `events` (one row per event), `observations` (one
  row per observation, its events folded), `entries` (one row per entry, with its
  outcome), each a rowid table in time order with its natural key unique, and `meta`;
  their indexes; full-text search (FTS5, built by sqlite-utils' `enable_fts`) on their
  text columns; a few views. Every value is a number or text:
  JSON is stored as JSON text, never as a BLOB (which Datasette shows as `<Binary>`).
- What goes in is decided by the caller (ops/export_sqlite.py): this module writes the
  rows it is given and nothing else.
- All or nothing: the database is built under a temporary name beside FILE (0600),
  fsynced, and renamed into place only when complete; any failure removes it. An
  existing FILE is replaced only with `overwrite`; without it, a FILE that appears
  meanwhile is not replaced either (the rename is a link, which refuses).
- The file is private (0600), like everything the journal writes.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_journal.core.errors import JournalError
from agent_journal.storage.files import FILE_MODE, fsync_path, rename_durable

# The version of this database's layout, kept in `meta` (key `format`).
FORMAT = 1
BATCH = 1000

EVENT_COLUMNS: dict[str, type] = {
    "event_id": str, "ts": str, "type": str, "kind": str, "id": str, "session": str,
    "author": str, "replica": str, "tool": str, "status": str, "exit_code": int,
    "duration_ms": int, "failed": int, "target": str, "text": str, "subject": str,
    "input": str, "output": str, "data": str,
}
OBSERVATION_COLUMNS: dict[str, type] = {
    "id": str, "kind": str, "ts": str, "last_ts": str, "session": str, "author": str,
    "tool": str, "call_id": str, "status": str, "exit_code": int, "duration_ms": int,
    "failed": int, "target": str, "text": str, "input": str, "output": str,
    "artifact": str, "cwd": str, "events": int, "data": str,
}
ENTRY_COLUMNS: dict[str, type] = {
    "id": str, "kind": str, "ts": str, "session": str, "author": str, "text": str,
    "subject": str, "live": int, "outcome": str, "invalidation_reason": str,
    "suppressed_through": str, "anchors": str, "depends_on": str, "fields": str,
    "conflicts": int, "event_id": str,
}

TABLES: dict[str, dict[str, Any]] = {
    "events": {"columns": EVENT_COLUMNS, "key": "event_id", "not_null": ("ts", "type", "kind"),
               "indexes": (("ts",), ("type",), ("kind",), ("session",), ("tool",), ("id",)),
               "fts": ("target", "text", "output")},
    "observations": {"columns": OBSERVATION_COLUMNS, "key": "id",
                     "not_null": ("kind", "ts"),
                     "indexes": (("ts",), ("kind",), ("tool",), ("session",), ("status",)),
                     "fts": ("target", "text", "input", "output")},
    "entries": {"columns": ENTRY_COLUMNS, "key": "id", "not_null": ("kind", "ts"),
                "indexes": (("ts",), ("kind",), ("outcome",)),
                "fts": ("text", "subject")},
}

VIEWS: dict[str, str] = {
    "tool_calls": "SELECT * FROM observations WHERE kind = 'tool_call' ORDER BY ts, id",
    "failed_calls": "SELECT * FROM observations WHERE failed = 1 ORDER BY ts, id",
    "prompts": "SELECT id, ts, session, text FROM observations "
               "WHERE kind IN ('user_prompt', 'prompt') ORDER BY ts, id",
    "live_entries": "SELECT * FROM entries WHERE live = 1 ORDER BY ts, id",
    "retracted_entries": "SELECT * FROM entries WHERE live = 0 ORDER BY ts, id",
}


def names() -> tuple[list[str], list[str]]:
    """(tables, views) of the database, in the order they are written."""
    return [*TABLES, "meta"], list(VIEWS)


def write_database(path: str, rows: Mapping[str, Iterable[dict[str, Any]]],
                   meta: dict[str, str], *, overwrite: bool,
                   progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Write the database to `path` whole, from `rows` (table name -> its rows); the
    count of rows written per table. FileExistsError when `path` exists and not
    `overwrite` (also when it appeared while the database was built)."""
    import sqlite_utils  # here only: heavy, and only this command needs it

    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
    counts: dict[str, int] = {}
    try:
        conn = sqlite3.connect(tmp)
        try:
            # Built once and renamed whole: a journal file beside it would only
            # have to be cleaned up (a failed build is thrown away anyway).
            conn.execute("PRAGMA journal_mode = MEMORY")
            db = sqlite_utils.Database(conn, execute_plugins=False)
            for table, spec in TABLES.items():
                if progress is not None:
                    progress(f"writing {table}")
                # A rowid table, its rows in time order: Datasette lists a table
                # by its primary key, and time order is what a reader expects.
                created = db.table(table).create(spec["columns"], not_null=spec["not_null"])
                created.insert_all(_counted(rows.get(table, ()), counts, table),
                                   batch_size=BATCH)
                counts.setdefault(table, 0)
                created.create_index([spec["key"]], unique=True)
                for columns in spec["indexes"]:
                    created.create_index(list(columns))
                created.enable_fts(list(spec["fts"]), fts_version="FTS5")
            meta_table = db.table("meta").create({"key": str, "value": str}, pk="key")
            meta_table.insert_all([{"key": k, "value": v}
                                   for k, v in {**meta, "format": str(FORMAT)}.items()])
            for view, sql in VIEWS.items():
                db.create_view(view, sql)
            conn.commit()
        finally:
            conn.close()
        fsync_path(tmp)
        _publish(tmp, path, overwrite)
    except BaseException as exc:
        for leftover in (tmp, tmp + "-journal"):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        if isinstance(exc, FileExistsError):
            raise
        if isinstance(exc, (OSError, sqlite3.Error)):
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise JournalError(f"cannot write {path}: {reason} (nothing was written)") from None
        raise
    return counts


def _counted(rows: Iterable[dict[str, Any]], counts: dict[str, int], table: str
             ) -> Iterable[dict[str, Any]]:
    n = 0
    for row in rows:
        n += 1
        yield row
    counts[table] = n


def _publish(tmp: str, path: str, overwrite: bool) -> None:
    if overwrite:
        rename_durable(tmp, path)
        return
    try:
        rename_durable(tmp, path, clobber=False)
    except FileExistsError:
        raise
    except OSError as exc:
        # A filesystem without hard links: the check and the rename are two steps.
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "exists", path) from None
        rename_durable(tmp, path)
