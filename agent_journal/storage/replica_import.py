"""Writing an import: another replica's rows copied into a segment of their own.

Invariants:
- An import is built under a temporary name and renamed into place whole; a
  killed merge leaves a temporary file (cleared by the next one), never a
  half-imported segment.
- Rows are copied by SQLite itself, exactly as stored; what to copy is decided
  by the merge planner (core/merge_plan.py), never here.
- Every `origin` row of an import describes an event the same file holds (rows
  and their provenance are written and dropped together; an adopted import's
  provenance is a view over its rows, see storage/provenance.py), so a
  published import names no event as imported and since removed.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from agent_journal.core.errors import JournalError, StorageError
from agent_journal.storage import provenance
from agent_journal.storage.cache import segment_signature
from agent_journal.storage.connection import (
    JOURNAL_MODE,
    as_sqlite_error,
    describe_sqlite_error,
    quote_path,
)
from agent_journal.storage.erasure import REBUILD_KEY
from agent_journal.storage.files import (
    create_private_file,
    file_digest,
    fsync_path,
    make_private_dirs,
    rename_durable,
    unlink_quietly,
)
from agent_journal.storage.replica_source import SealedFacts, Unreadable, sealed_facts
from agent_journal.storage.segment import (
    IMPORT_TEMP_PREFIX,
    SCHEMA,
    SEGMENT_FORMAT,
    SEGMENT_SUFFIX,
    never_initialised,
)
from agent_journal.storage.workspace import Workspace

# Adopted files given their import meta at once (ImportWriter._finish_adoptions).
ADOPTING_THREADS = 4

_FRESH_SCHEMA: set[tuple[str, str, str, str | None]] = set()


def _fresh_schema() -> set[tuple[str, str, str, str | None]]:
    """sqlite_master of a segment just given its schema (type, name, table, sql)."""
    if not _FRESH_SCHEMA:
        conn = sqlite3.connect(":memory:")
        try:
            for statement in SCHEMA.strip().split(";"):
                if statement.strip():
                    conn.execute(statement)
            _FRESH_SCHEMA.update(tuple(r) for r in conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"))
        finally:
            conn.close()
    return _FRESH_SCHEMA


class ImportWriter:
    """Writes imported events into new segment files that no replica appends to.

    Each file is built under a hidden temporary name (readers skip names
    starting with '.'), closed, fsynced, and only then renamed to its final
    `import-<source>-<digest>.sqlite` name: a merge that dies half-way leaves
    nothing a reader can see. A file is cut once it reaches `max_bytes`, the
    size at which a replica starts a new own segment. Provenance (the source
    slot each event came from) is kept in an `origin` table so later merges
    can recognise replicas sharing an id.

    Rows are copied by SQLite itself (`ImportSource.copy`), inside the same
    read transaction in which the caller examined them, so what is written is
    exactly what was checked even if the source is being written meanwhile.
    """

    def __init__(self, ws: Workspace, source_replica: str, *, max_bytes: int,
                 name_for: Any) -> None:
        self.ws = ws
        self.source_replica = source_replica
        self.max_bytes = max_bytes
        self.name_for = name_for  # (source replica, event ids) -> final file name
        self._done: list[tuple[str, list[str]]] = []
        self._conn: sqlite3.Connection | None = None
        self._tmp = ""
        self._ids: list[str] = []
        # What the merge says it wrote as tombstones, and the (replica, segment)
        # pairs the provenance names, per temporary file; by final path once published.
        self._tombstones: set[str] = set()
        self._facts: dict[str, tuple[set[str], set[tuple[str, str]]]] = {}
        self.published: dict[str, tuple[set[str], set[tuple[str, str]]]] = {}
        # Final path -> (its fingerprint, (bytes, checksum)) read as it was published:
        # a file written this instant is trusted by its checksum, not its mtime
        # (storage/local_scans.py), and these are read here a few at a time.
        self.digests: dict[str, tuple[str, tuple[int, str]]] = {}
        self._counter = 0
        self._wanted: set[str] = set()
        self._unsynced: set[str] = set()  # adopted files not fsynced since adopt
        self._unadopted: set[str] = set()  # adopted files not yet given import meta
        self._slots: dict[str, tuple[str, str]] = {}  # adopted file -> its slot

    def _open(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            return self._open_new()
        except (sqlite3.Error, OSError) as exc:
            # (a full disk) the file it began is not among the builds abort() clears
            for suffix in ("", "-journal"):
                unlink_quietly(self._tmp + suffix)
            reason = describe_sqlite_error(exc) if isinstance(exc, sqlite3.Error) \
                else exc.strerror
            raise StorageError(f"cannot create an import segment in {self.ws.segments_dir}: "
                               f"{reason}") from None

    def _open_new(self) -> sqlite3.Connection:
        make_private_dirs(self.ws.segments_dir)
        self._counter += 1
        self._tmp = os.path.join(
            self.ws.segments_dir, f"{IMPORT_TEMP_PREFIX}{os.getpid()}-{self._counter}.tmp")
        unlink_quietly(self._tmp)
        create_private_file(self._tmp)
        conn = sqlite3.connect(f"file:{quote_path(self._tmp)}", uri=True,
                               isolation_level=None, check_same_thread=False)
        # A temp file no reader can see: no journal, no syncs until it is done.
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -65536")
        for statement in SCHEMA.strip().split(";"):
            if statement.strip() and "CREATE INDEX" not in statement:
                conn.execute(statement)
        conn.execute(provenance.TABLE_SQL)
        conn.execute("CREATE TEMP TABLE skip (event_id TEXT PRIMARY KEY)")
        conn.execute("CREATE TEMP TABLE wanted (id TEXT PRIMARY KEY)")
        self._wanted = set()  # what temp.wanted holds
        self._conn = conn
        return conn

    def source(self, path: str, *, immutable: bool,
               facts: SealedFacts | None = None) -> ImportSource:
        """Attach a source segment for reading and copying, in one transaction.
        `facts`: what was read of it ahead (an immutable file only)."""
        return ImportSource(self, path, immutable=immutable, facts=facts)

    def _cut_if_full(self) -> None:
        # The same measure a replica rotates its own segments by: file size.
        if self._conn is not None and os.path.getsize(self._tmp) >= self.max_bytes:
            self._close_current()

    def _close_current(self) -> None:
        try:
            self._seal_current()
        except sqlite3.Error as exc:  # a full disk: abort() removes the file
            raise StorageError(f"cannot finish the import segment {self._tmp}: "
                               f"{describe_sqlite_error(exc)}") from None

    def _seal_current(self) -> None:
        conn = self._conn
        if conn is None:
            return
        for statement in SCHEMA.strip().split(";"):
            if "CREATE INDEX" in statement:
                conn.execute(statement)
        conn.execute("BEGIN")
        self._write_meta(conn)
        conn.execute("COMMIT")
        self._facts[self._tmp] = (self._tombstones, {(str(r), str(s)) for r, s in conn.execute(
            "SELECT DISTINCT replica, segment FROM origin")})
        self._tombstones = set()
        conn.execute("DROP TABLE temp.skip")
        conn.execute("DROP TABLE temp.wanted")
        conn.execute(f"PRAGMA journal_mode = {JOURNAL_MODE}")
        conn.close()
        self._conn = None
        fsync_path(self._tmp)
        self._done.append((self._tmp, self._ids))
        self._ids = []

    def _write_meta(self, conn: sqlite3.Connection) -> None:
        conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [
            ("format", str(SEGMENT_FORMAT)), ("workspace", self.ws.name),
            ("replica", self.source_replica), ("importedBy", self.ws.root.replica_id),
            ("kind", "import"),
        ])
        conn.execute(f"PRAGMA user_version = {SEGMENT_FORMAT}")

    def adopt(self, path: str, ids: list[str], own: tuple[str, str],
              tombstones: set[str]) -> None:
        """Make a source file the caller owns an import of its own: every row of it
        was taken as stored, so the file itself is published instead of a copy.

        Only for another replica's own segment, fetched into a pull's staging
        folder and found `adoptable` (our schema and nothing else): its rows
        keep their seq, which is their slot, so the provenance is a view
        over them (storage/provenance.py). The file is given its import meta
        and provenance, fsynced and renamed by `finish` (or first by `drop`),
        like a build.
        """
        self._done.append((path, list(ids)))
        self._unadopted.add(path)
        self._facts[path] = (set(tombstones), {own})
        self._slots[path] = own

    def _finish_adoptions(self) -> None:
        """Write the import meta and provenance into every file adopted since the
        last call, a few at a time: each is its own file, and SQLite does the
        work with Python's lock released."""
        pending = sorted(self._unadopted)
        if not pending:
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=ADOPTING_THREADS) as pool:
            list(pool.map(self._make_import, pending))
        self._unadopted.clear()

    def _make_import(self, path: str) -> None:
        own = self._slots[path]
        try:
            conn = sqlite3.connect(f"file:{quote_path(path)}", uri=True, isolation_level=None,
                                   check_same_thread=False)
            try:
                # Private until published, as a build is: no journal, no syncs.
                conn.execute("PRAGMA journal_mode = OFF")
                conn.execute("PRAGMA synchronous = OFF")
                conn.execute("BEGIN")
                # Every row keeps the seq it had in the source replica's segment,
                # so its slot is (that replica, that segment, seq): a view says
                # so without writing a row per event.
                conn.execute(provenance.view_sql(*own))
                self._write_meta(conn)
                # The bytes between its rows are the pusher's (push writes them as
                # VACUUM does, holding nothing; a file made by hand could hold
                # anything): the next `compact --apply` rebuilds it from its rows,
                # as it does a segment rows were deleted from.
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')",
                             (REBUILD_KEY,))
                conn.execute("COMMIT")
                conn.execute(f"PRAGMA journal_mode = {JOURNAL_MODE}")
            finally:
                conn.close()
        except sqlite3.Error as exc:  # a full disk: abort() removes the file
            raise StorageError(f"cannot finish the import segment {path}: "
                               f"{describe_sqlite_error(exc)}") from None
        self._unsynced.add(path)  # fsynced by finish, with the others

    def drop(self, subjects: set[str], types: tuple[str, ...]) -> list[str]:
        """Remove not yet published rows about `subjects`; returns their event ids.

        For a tombstone a merge meets only after it wrote rows its target
        names: those bytes must not be published. secure_delete zeroes them
        in the (journal-less) temporary files.
        """
        if not subjects:
            return []
        self._finish_adoptions()
        dropped: list[str] = []
        builds = list(self._done)
        if self._conn is not None:
            builds.append((self._tmp, self._ids))
        marks = ",".join("?" * len(types))
        for tmp, ids in builds:
            current = self._conn is not None and tmp == self._tmp
            conn = self._conn if current else sqlite3.connect(tmp, isolation_level=None)
            assert conn is not None
            if not current:
                conn.execute("PRAGMA journal_mode = OFF")  # no journal keeps old pages
            conn.execute("PRAGMA secure_delete = ON")
            gone = [r[0] for r in conn.execute(
                f"SELECT event_id, subject FROM events WHERE type IN ({marks})", types)
                if r[1] in subjects]
            conn.executemany("DELETE FROM events WHERE event_id = ?", [(g,) for g in gone])
            if provenance.kind(conn) == "table":  # (a view's rows went with the events)
                conn.executemany("DELETE FROM origin WHERE event_id = ?", [(g,) for g in gone])
            if not current:
                if gone:  # (tombstones are never among the types dropped)
                    self._facts[tmp] = (self._facts[tmp][0], {
                        (str(r), str(s)) for r, s in conn.execute(
                            "SELECT DISTINCT replica, segment FROM origin")})
                conn.execute("PRAGMA temp_store = MEMORY")  # as in _scrub
                conn.execute("VACUUM")
                conn.execute(f"PRAGMA journal_mode = {JOURNAL_MODE}")
                conn.close()
                fsync_path(tmp)
            gone_set = set(gone)
            ids[:] = [i for i in ids if i not in gone_set]
            dropped.extend(gone)
        return dropped

    def finish(self) -> list[str]:
        """Make every built file visible; returns their final paths."""
        self._close_current()
        self._finish_adoptions()
        # Fsyncs issued together are committed together by the file system's
        # journal, where one after another each waits for its own commit; the
        # checksums are read in the same threads (xxhash releases Python's lock).
        from concurrent.futures import ThreadPoolExecutor

        kept = sorted(tmp for tmp, ids in self._done if ids)
        with ThreadPoolExecutor(max_workers=4) as pool:
            digests = dict(zip(kept, pool.map(self._sync_and_digest, kept), strict=True))
        self._unsynced.clear()
        final_paths = []
        for tmp, ids in self._done:
            if not ids:  # nothing imported into it, or everything dropped again
                unlink_quietly(tmp)
                continue
            name = self.name_for(self.source_replica, ids)
            final = os.path.join(self.ws.segments_dir, name)
            for n in range(2, 1000):
                try:
                    rename_durable(tmp, final, clobber=False, sync_folder=False)
                    break
                except FileExistsError:
                    # An earlier import of these very ids, since shrunk by a
                    # compaction, still has the name: this one takes the next.
                    final = os.path.join(self.ws.segments_dir,
                                         name[:-len(SEGMENT_SUFFIX)] + f"-{n}{SEGMENT_SUFFIX}")
            else:
                raise JournalError(f"no free import file name beside {name}")
            final_paths.append(final)
            self.published[final] = self._facts.pop(tmp)
            if (digest := digests[tmp]) is not None:
                self.digests[final] = digest  # (a rename keeps the fingerprint)
        self._done = []
        if final_paths:
            fsync_path(self.ws.segments_dir)  # every rename above, persisted at once
        return final_paths

    def _sync_and_digest(self, tmp: str) -> tuple[str, tuple[int, str]] | None:
        """Fsync an adopted file (a built one was fsynced when sealed); then its
        (fingerprint, (bytes, checksum)), or None if it moved while read."""
        if tmp in self._unsynced:
            fsync_path(tmp)
        before = segment_signature(tmp)
        digest = file_digest(tmp)
        after = segment_signature(tmp)
        return None if before is None or after != before else (before[0], digest)

    def abort(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            self._done.append((self._tmp, self._ids))
        for tmp, _ in self._done:
            for suffix in ("", "-journal", "-wal", "-shm"):
                unlink_quietly(tmp + suffix)
        self._done = []


class ImportSource:
    """One source segment attached to the import being built (see ImportWriter.source).

    Use as a context manager: everything between entering and leaving reads
    one snapshot of the source. The caller reads what it needs to decide
    (`rows`, or for a sealed source the cheaper `ids`, `tombstone_rows` and
    `rows_about`), then `copy` lets SQLite copy every row not skipped, and
    `insert` adds rows the caller rebuilt (a tombstone re-encoded, a row with
    corrected columns). Row tuples are (seq, event_id, type, subject, ts,
    checksum, body or None). A source SQLite cannot read raises Unreadable.
    """

    def __init__(self, writer: ImportWriter, path: str, *, immutable: bool,
                 facts: SealedFacts | None = None) -> None:
        self.writer = writer
        # Read ahead of the merge from the same immutable bytes (read_sealed_facts),
        # else read on the first call that needs them, inside the attach.
        self._facts = facts if immutable else None
        self.path = path
        self.immutable = immutable
        self.empty = False
        self.has_origin = False
        self._conn: sqlite3.Connection | None = None
        self._adopt: tuple[list[str], tuple[str, str], set[str]] | None = None

    def __enter__(self) -> ImportSource:
        conn = self.writer._open()
        attached = False
        error: sqlite3.Error | None = None
        tables: set[str] = set()
        origin: str | None = None
        for mode in (("ro&immutable=1",) if self.immutable else ("ro", "rw")):
            try:
                conn.execute("ATTACH DATABASE ? AS src",
                             (f"file:{quote_path(self.path)}?mode={mode}",))
                attached = True
                conn.execute("BEGIN")
                tables = {r[0] for r in conn.execute(
                    "SELECT name FROM src.sqlite_master WHERE type = 'table'")}
                origin = provenance.kind(conn, "src")
                break
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                # (UnicodeDecodeError: a damaged schema, see connection.as_sqlite_error)
                error = exc if isinstance(exc, sqlite3.Error) else as_sqlite_error(exc)
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if attached:
                    conn.execute("DETACH DATABASE src")
                    attached = False
        if not attached:
            assert error is not None
            raise Unreadable(describe_sqlite_error(error))
        self._conn = conn
        if "events" not in tables:
            blank = never_initialised(conn, "src")
            self.__exit__(None, None, None)
            if not blank:
                raise Unreadable("no events table")
            self.empty = True
        self.has_origin = origin is not None
        return self

    def _query(self, sql: str, params: Any = ()) -> list[Any]:
        assert self._conn is not None
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise Unreadable(describe_sqlite_error(exc)) from None

    def rows(self, *, bodies: str) -> list[tuple[int, str, str, str | None, str, str, Any]]:
        """Every row in seq order; `bodies` "all", or "tombstones" (only rows whose
        type column says tombstone carry their body, for a sealed source)."""
        if self.empty:
            return []
        body = "body" if bodies == "all" else "CASE WHEN type = 'tombstone' THEN body END"
        return self._query(f"SELECT seq, event_id, type, subject, ts, checksum, {body} "
                           "FROM src.events ORDER BY seq")

    def ids(self) -> list[tuple[int, str]]:
        """(seq, event_id) of every row, read from the event_id index alone."""
        if self.empty:
            return []
        return self._query("SELECT seq, event_id FROM src.events")

    def event_ids(self) -> frozenset[str]:
        """Every row's event id, read from the event_id index alone."""
        return frozenset() if self.empty else self._sealed().id_set

    def event_id_list(self) -> list[str]:
        """The same ids as a list, in the order read (in practice the index's)."""
        return [] if self.empty else self._sealed().ids

    def tombstone_rows(self) -> list[tuple[int, str, str, str | None, str, str, Any]]:
        """Rows whose type column says tombstone, with their bodies."""
        if self.empty:
            return []
        return self._sealed().tombstones

    def rows_about(self, subjects: set[str]) -> list[tuple[int, str, str, str | None]]:
        """(seq, event_id, type, subject) of rows whose subject is in `subjects`,
        found through the subject index."""
        if self.empty or not subjects:
            return []
        assert self._conn is not None
        loaded = self.writer._wanted
        if not loaded <= subjects:
            self._conn.execute("DELETE FROM temp.wanted")
            loaded.clear()
        # The set only grows during a merge: add what is new since last time.
        self._conn.executemany("INSERT OR IGNORE INTO temp.wanted(id) VALUES (?)",
                               [(s,) for s in subjects - loaded])
        loaded |= subjects
        return self._query("SELECT seq, event_id, type, subject FROM src.events "
                           "WHERE subject IN (SELECT id FROM temp.wanted)")

    def adoptable(self) -> bool:
        """Whether the attached file holds exactly what a fresh own segment of this
        workspace does: our schema and no other table, index, view or trigger,
        the three meta rows a replica writes (this workspace, the source's
        replica), no free page. Nothing but rows could then travel with it."""
        if self.empty or self.has_origin:
            return False
        facts = self._sealed()
        return facts.schema == _fresh_schema() and facts.free_pages == 0 and facts.meta == {
            "format": str(SEGMENT_FORMAT), "workspace": self.writer.ws.name,
            "replica": self.writer.source_replica}

    def _sealed(self) -> SealedFacts:
        if self._facts is None:
            assert self._conn is not None
            try:
                self._facts = sealed_facts(self._conn, "src")
            except sqlite3.Error as exc:
                raise Unreadable(describe_sqlite_error(exc)) from None
        return self._facts

    def adopt(self, ids: list[str], own: tuple[str, str], tombstones: set[str]) -> None:
        """Publish the attached file itself once it is detached (ImportWriter.adopt)
        instead of copying rows; for a file `adoptable` said yes to."""
        self._adopt = (ids, own, tombstones)

    def provenance(self) -> dict[str, tuple[str, str, int]]:
        """event id -> (replica, segment, seq) when the source is itself an import."""
        if self.empty or not self.has_origin:
            return {}
        return {e: (str(r), str(s), int(q)) for e, r, s, q in self._query(
            "SELECT event_id, replica, segment, seq FROM src.origin")}

    def copy(self, skip: Iterable[str], *, copied_ids: list[str],
             own: tuple[str, str] | None) -> None:
        """Copy every source row whose event id is not in `skip`, with its provenance.

        `own` is (replica, file name) when the source is that replica's own
        segment (each row's slot is its seq); otherwise the source's own
        provenance is carried over.
        """
        try:
            self._copy(skip, copied_ids, own)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot import {self.path}: {describe_sqlite_error(exc)}"
                               ) from None

    def _copy(self, skip: Iterable[str], copied_ids: list[str],
              own: tuple[str, str] | None) -> None:
        conn = self.writer._conn
        assert conn is not None
        if self.empty:
            return
        conn.execute("DELETE FROM temp.skip")
        conn.executemany("INSERT OR IGNORE INTO temp.skip(event_id) VALUES (?)",
                         [(s,) for s in skip])
        where = "WHERE event_id NOT IN (SELECT event_id FROM temp.skip)"
        before = conn.total_changes
        conn.execute("INSERT INTO main.events(event_id, type, subject, ts, body, checksum) "
                     f"SELECT event_id, type, subject, ts, body, checksum FROM src.events {where} "
                     "ORDER BY seq")
        if conn.total_changes - before != len(copied_ids):
            raise JournalError(f"import of {self.path} copied "
                               f"{conn.total_changes - before} rows, expected {len(copied_ids)}")
        if own is not None:
            conn.execute("INSERT INTO main.origin(event_id, replica, segment, seq) "
                         f"SELECT event_id, ?, ?, seq FROM src.events {where}", own)
        elif self.has_origin:
            conn.execute("INSERT INTO main.origin(event_id, replica, segment, seq) "
                         "SELECT event_id, replica, segment, seq FROM src.origin "
                         f"{where} AND event_id IN (SELECT event_id FROM src.events)")
        self.writer._ids.extend(copied_ids)

    def wrote_tombstones(self, subjects: set[str]) -> None:
        """The caller's word on the ids the tombstones it copied or inserted name
        (kept with the file for its merge's scan-points projection)."""
        self.writer._tombstones.update(subjects)

    def insert(self, rows: Sequence[tuple[str, str, str | None, str, bytes, str]],
               origins: Sequence[tuple[str, str, str, int]]) -> None:
        """Add rows the caller rebuilt: (event_id, type, subject, ts, body, checksum)."""
        conn = self.writer._conn
        assert conn is not None
        try:
            conn.executemany("INSERT INTO main.events(event_id, type, subject, ts, body, "
                             "checksum) VALUES (?, ?, ?, ?, ?, ?)", rows)
            conn.executemany("INSERT INTO main.origin(event_id, replica, segment, seq) "
                             "VALUES (?, ?, ?, ?)", origins)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot import {self.path}: {describe_sqlite_error(exc)}"
                               ) from None
        self.writer._ids.extend(r[0] for r in rows)

    def __exit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if conn.in_transaction:
                conn.execute("COMMIT" if exc[0] is None else "ROLLBACK")
            conn.execute("DETACH DATABASE src")
        except sqlite3.Error as error:  # a full disk at commit: the merge aborts
            if exc[0] is not None:
                return  # the first failure is the one to report
            raise StorageError(f"cannot import {self.path}: "
                               f"{describe_sqlite_error(error)}") from None
        if exc[0] is None:
            if self._adopt is not None:
                self.writer.adopt(self.path, *self._adopt)
            self.writer._cut_if_full()
