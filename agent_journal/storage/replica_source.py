"""Reading another replica's segments for export and merge.

Invariants:
- A source segment is read in one transaction, rows exactly as stored (body
  and checksum unverified: the caller decides what to trust); any SQLite
  failure is `Unreadable`, with a one-line reason.
- A verified export file is opened immutable: nobody writes it, so no locks
  and no journal.
- A row scrubbed from an export snapshot (`scrub_rows`) leaves no byte of
  itself in the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any, NoReturn

from agent_journal.core.errors import BusyError, StorageError
from agent_journal.core.merge_plan import TOMBSTONE_WORDS
from agent_journal.core.model import TOMBSTONE
from agent_journal.storage import provenance
from agent_journal.storage.connection import connect, describe_sqlite_error, is_busy
from agent_journal.storage.files import create_private_file, unlink_quietly
from agent_journal.storage.segment import never_initialised, open_segment_for_read


class Unreadable(Exception):
    """A source or snapshot file SQLite cannot read; str() is the one-line reason."""


def _open_for_reading(path: str, *, immutable: bool) -> sqlite3.Connection:
    if immutable:
        return connect(path, immutable=True)
    return open_segment_for_read(path)


def _begin_read(path: str, *, immutable: bool) -> sqlite3.Connection | None:
    """The segment open inside one read transaction, or None when it was never
    initialised (the one empty-segment rule: it holds no events). Raises Unreadable."""
    try:
        conn = _open_for_reading(path, immutable=immutable)
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    try:
        conn.execute("BEGIN")
        if not never_initialised(conn):
            return conn
    except sqlite3.Error as exc:
        conn.close()
        raise Unreadable(describe_sqlite_error(exc)) from None
    conn.close()
    return None


# merge_plan.tombstone_candidate, asked of SQLite: the same rule, row for row
# (tests/test_damage_health.py holds the two equal). LIKE (on the bytes read
# as text: on a blob it never matches) compares ASCII letters without case,
# as the rule does, and takes half the time of instr over every body; it
# stops at a NUL byte, but a body holding one is a candidate anyway. The
# NUL test: length() of text counts characters up to the first NUL, so one
# more byte appended adds a character exactly when the body holds none.
TOMBSTONE_CANDIDATES_WHERE = (
    f" WHERE type = '{TOMBSTONE}' OR typeof(body) != 'blob'"
    " OR length(CAST(body AS TEXT)) = length(body || x'01') OR "
    + " OR ".join(f"CAST(body AS TEXT) LIKE '%{word.decode('ascii')}%'"
                  for word in TOMBSTONE_WORDS))


class SegmentRows:
    """One segment read in one transaction: meta, stored rows and import provenance.

    Rows come back exactly as stored (body and checksum unverified): the
    caller decides what to trust. Any SQLite failure raises `Unreadable`.

    `only` filters inside SQLite: "all"; "tombstone_rows", the rows whose
    type column says tombstone (a quick pre-scan: the column is a lookup
    copy, so callers must still catch a tombstone found later); or
    "tombstone_candidates", every row whose bytes could decode to a
    tombstone (merge_plan.tombstone_candidate; exact, slower). With
    `provenance_keys`, also the distinct (replica, segment) pairs an import
    segment's origin table names.
    """

    def __init__(self, path: str, *, immutable: bool = False, only: str = "all",
                 provenance_keys: bool = False) -> None:
        self.path = path
        self.meta: dict[str, str] = {}
        self.rows: list[tuple[int, str, str, str | None, str, bytes, str]] = []
        self.provenance_keys: set[tuple[str, str]] = set()
        conn = _begin_read(path, immutable=immutable)
        if conn is None:
            return
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "events" not in tables:
                raise Unreadable("no events table")
            if "meta" in tables:
                self.meta = {str(k): str(v) for k, v in conn.execute(
                    "SELECT key, value FROM meta")}
            query = "SELECT seq, event_id, type, subject, ts, body, checksum FROM events"
            if only == "tombstone_rows":
                query += " WHERE type = 'tombstone'"
            elif only == "tombstone_candidates":
                query += TOMBSTONE_CANDIDATES_WHERE
            self.rows = conn.execute(query + " ORDER BY seq").fetchall()
            if provenance_keys and provenance.kind(conn) is not None:
                self.provenance_keys = {(str(r), str(s)) for r, s in conn.execute(
                    "SELECT DISTINCT replica, segment FROM origin")}
        except sqlite3.Error as exc:
            raise Unreadable(describe_sqlite_error(exc)) from None
        finally:
            conn.close()


def joined_ids(conn: sqlite3.Connection, table: str = "events") -> list[str]:
    """Every event id of `table` (no order promised), read from its event_id index.

    One string from SQLite split in Python rather than a row object per id,
    which is several times cheaper for a segment's worth of ids. An id holding
    the separator would split in two, so the count read by the same statement
    must agree; otherwise the ids are read one row at a time.
    """
    (count, joined), = conn.execute(
        f"SELECT count(*), group_concat(event_id, char(10)) FROM {table}").fetchall()
    if not count:
        return []
    ids = joined.split("\n") if type(joined) is str else []
    if len(ids) != count:
        ids = [str(e) for (e,) in conn.execute(f"SELECT event_id FROM {table}")]
    return ids


class SealedFacts:
    """What a merge decides a sealed source segment by, before copying anything:
    its event ids (joined_ids: as read, which is in practice the index's
    order, so the sort an import's name takes is quick, and as the set the
    merge planner takes), its rows
    whose type column says tombstone (seq, event_id, type, subject, ts,
    checksum, body), its `sqlite_master` rows (type, name, tbl_name, sql), its
    `meta` rows and its free pages. Read by `sealed_facts` on the merge's own
    connection, or ahead of the merge (read_sealed_facts: a pull reads them as
    soon as a file is fetched and checked, while other objects are on the
    wire) for a file nobody writes, a pull's private stage."""

    __slots__ = ("ids", "id_set", "tombstones", "schema", "meta", "free_pages")

    def __init__(self, ids: list[str], tombstones: list[Any],
                 schema: set[tuple[Any, ...]], meta: dict[Any, Any], free_pages: int) -> None:
        self.ids, self.id_set = ids, frozenset(ids)
        self.tombstones, self.schema = tombstones, schema
        self.meta, self.free_pages = meta, free_pages


def sealed_facts(conn: sqlite3.Connection, schema: str = "main") -> SealedFacts:
    """SealedFacts of the database `schema` names on `conn`, which holds an `events`
    table; inside the caller's read transaction. Raises sqlite3.Error."""
    master = {tuple(r) for r in conn.execute(
        f"SELECT type, name, tbl_name, sql FROM {schema}.sqlite_master")}
    tombstones = conn.execute(
        f"SELECT seq, event_id, type, subject, ts, checksum, body FROM {schema}.events "
        "WHERE type = 'tombstone'").fetchall()
    meta = dict(conn.execute(f"SELECT key, value FROM {schema}.meta").fetchall()) \
        if any(r[0] == "table" and r[1] == "meta" for r in master) else {}
    free = int(conn.execute(f"PRAGMA {schema}.freelist_count").fetchone()[0])
    return SealedFacts(joined_ids(conn, f"{schema}.events"), tombstones, master, meta, free)


def read_sealed_facts(path: str) -> SealedFacts | None:
    """SealedFacts of an immutable segment file, or None when they cannot be read
    (no events table, damage: the merge then reads the file itself and reports
    what it finds)."""
    try:
        conn = _open_for_reading(path, immutable=True)
    except sqlite3.Error:
        return None
    try:
        conn.execute("BEGIN")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
                        ).fetchone() is None:
            return None
        return sealed_facts(conn)
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    finally:
        conn.close()


def fetched_segment_fault(path: str, listed: set[int]) -> str | None:
    """Why a segment fetched from a remote, whole and as its manifest describes it, must
    still not be merged, or None; `listed` are the rows its manifest calls malformed.

    Its writer's manifest is all that vouches for its rows, so they are read as a local
    reader reads them: a file this journal could not read (structural damage, `events`
    or `meta` not a table), or a row a reader would call malformed that the manifest
    does not list, would otherwise be imported as it is and leave the local workspace
    damaged. The structure is read through an immutable connection (the merge may
    publish this very file); the rows as every reader reads them."""
    from agent_journal.storage.segment_reader import quick_check, read_segment

    try:
        conn = _open_for_reading(path, immutable=True)
        try:
            if never_initialised(conn):
                return None  # an empty segment: it holds no event
            damage = quick_check(conn)
            kinds = dict(conn.execute("SELECT name, type FROM sqlite_master "
                                      "WHERE name IN ('events', 'meta')").fetchall())
        finally:
            conn.close()
    except sqlite3.Error as exc:
        damage = describe_sqlite_error(exc)
    else:
        if damage is None and (kinds.get("events") != "table"
                               or kinds.get("meta", "table") != "table"):
            damage = "its events or meta is not a table"
    if damage is None:
        scan = read_segment(path, observations=False)
        damage = scan.unreadable
    if damage is not None:
        return f"not a segment this journal can read: {' '.join(str(damage).split())}"
    unlisted = [(seq, why) for seq, why in scan.malformed if seq not in listed]
    if unlisted:
        seq, why = unlisted[0]
        return (f"{len(unlisted)} malformed row(s) its manifest does not list "
                f"(row {seq}: {why})")
    return None


def event_ids(path: str) -> list[str]:
    """A segment's event ids, from one read transaction, without reading the
    bodies: for learning which events a workspace holds. Raises Unreadable."""
    conn = _begin_read(path, immutable=False)
    if conn is None:
        return []
    try:
        return joined_ids(conn)
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    finally:
        conn.close()


# Asking a segment's event_id index about one id costs about as much as reading
# the ids of this many bytes of segment in one ordered scan (joined_ids): a
# lookup walks the index from its root, the scan reads each leaf once.
PROBE_BYTES = 2048


def ids_held(path: str, wanted: set[str]) -> set[str]:
    """Which of `wanted` the segment holds: each asked of its event_id index when
    they are few next to the segment's size, else found in one scan of the
    index (the answer is the same). Raises Unreadable."""
    if not wanted:
        return set()
    conn = _begin_read(path, immutable=False)
    if conn is None:
        return set()
    try:
        return _held_in(conn, path, wanted)
    finally:
        conn.close()


def _held_in(conn: sqlite3.Connection, path: str, wanted: set[str]) -> set[str]:
    import json
    import os

    try:
        if len(wanted) * PROBE_BYTES < os.path.getsize(path):
            return {str(e) for (e,) in conn.execute(
                "SELECT event_id FROM events WHERE event_id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(wanted)),))}
        return wanted.intersection(joined_ids(conn))
    except (sqlite3.Error, OSError) as exc:
        raise Unreadable(describe_sqlite_error(exc) if isinstance(exc, sqlite3.Error)
                         else str(exc)) from None


class HeldProbe:
    """`ids_held` asked of the same segments again and again (a merge asks about
    each source segment's ids in turn): each segment is opened once, with a small
    page cache, and each question is its own short read (no transaction is held
    between questions, so no writer waits on one). Close it when done."""

    CACHE_KIB = 256

    def __init__(self) -> None:
        self._conns: dict[str, sqlite3.Connection] = {}

    def held(self, path: str, wanted: set[str]) -> set[str]:
        """Which of `wanted` the segment at `path` holds. Raises Unreadable."""
        if not wanted:
            return set()
        conn = self._conns.get(path)
        if conn is None:
            try:
                conn = _open_for_reading(path, immutable=False)
                conn.execute(f"PRAGMA cache_size = -{self.CACHE_KIB}")
            except sqlite3.Error as exc:
                raise Unreadable(describe_sqlite_error(exc)) from None
            self._conns[path] = conn
        try:
            if never_initialised(conn):
                return set()
        except sqlite3.Error as exc:
            raise Unreadable(describe_sqlite_error(exc)) from None
        return _held_in(conn, path, wanted)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


def origin_keys(path: str) -> set[tuple[str, str]]:
    """The distinct (replica, segment) pairs an import segment's provenance names."""
    try:
        conn = _open_for_reading(path, immutable=False)
    except sqlite3.Error:
        return set()
    try:
        if provenance.kind(conn) is None:
            return set()
        return {(str(r), str(s)) for r, s in conn.execute(
            "SELECT DISTINCT replica, segment FROM origin")}
    except sqlite3.Error:
        return set()
    finally:
        conn.close()


def imported_then_removed(path: str) -> set[str]:
    """Event ids a compaction removed from this segment: those an import's
    provenance table names that it no longer holds (merge itself drops
    provenance with the rows it drops), and those a `removed` table names (an
    own segment has no provenance; an adopted import's is a view, which
    forgets a removed row). Raises Unreadable."""
    try:
        conn = _open_for_reading(path, immutable=False)
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    try:
        tables = {str(n) for (n,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('origin', 'removed')")}
        removed: set[str] = set()
        if "removed" in tables:
            removed = {str(e) for (e,) in conn.execute("SELECT event_id FROM removed")}
        if "origin" in tables:
            removed |= {str(e) for (e,) in conn.execute(
                "SELECT event_id FROM origin WHERE event_id NOT IN (SELECT event_id FROM events)")}
        return removed
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    finally:
        conn.close()


def read_slots(path: str, *, own: tuple[str, str] | None,
               keys: set[tuple[str, str]]) -> list[tuple[str, str, int, str, str, str | None]]:
    """Append slots a segment shows: (replica, segment, seq, event id, type, subject).

    `own` is (replica, file name) when the file is that replica's own
    segment (every row is a slot); otherwise slots come from the provenance
    an import segment keeps, limited to `keys`. Columns are read without the
    bodies: this feeds a collision report, not a decision about content.
    """
    out: list[tuple[str, str, int, str, str, str | None]] = []
    try:
        conn = _open_for_reading(path, immutable=False)
    except sqlite3.Error:
        return out
    try:
        conn.execute("BEGIN")
        if own is not None:
            if own in keys:
                for seq, event_id, type_, subject in conn.execute(
                        "SELECT seq, event_id, type, subject FROM events"):
                    out.append((own[0], own[1], seq, event_id, type_, subject))
        elif provenance.kind(conn) is not None:
            for event_id, replica, segment, seq, type_, subject in conn.execute(
                    "SELECT o.event_id, o.replica, o.segment, o.seq, e.type, e.subject "
                    "FROM origin o JOIN events e ON e.event_id = o.event_id"):
                if (replica, segment) in keys:
                    out.append((replica, segment, seq, event_id, type_, subject))
    except sqlite3.Error:
        pass
    finally:
        conn.close()
    return out


SNAPSHOT_ATTEMPTS = 3


def snapshot_segment(src: str, dest: str, *, immutable: bool = False) -> None:
    """Copy a live segment to `dest` (which must not exist) with SQLite's VACUUM INTO.

    VACUUM INTO reads one transaction, so the copy holds exactly what was
    committed when it began, whatever writers do meanwhile; a raw file copy
    could catch a page half-written. The copy is in rollback-journal mode.
    It is written without syncs: a snapshot is private until its taker
    fsyncs and publishes it (or uploads it and throws it away), so syncing
    each page of it on the way would buy nothing. `immutable`: the source's
    bytes are known not to change meanwhile (a SealedHold's link), so it is
    read without locks or a look for its journal.
    """
    if not create_private_file(dest):
        raise FileExistsError(dest)
    for attempt in range(SNAPSHOT_ATTEMPTS):
        try:
            conn = _open_for_reading(src, immutable=immutable)
            try:
                conn.execute("PRAGMA synchronous = OFF")
                conn.execute("VACUUM INTO ?", (dest,))
            finally:
                conn.close()
            return
        except sqlite3.OperationalError as exc:
            # Writers that never pause can keep a reader out past its busy
            # timeout; that says nothing about the segment's bytes, so it is
            # retried, then reported as busy, never as damage.
            if not is_busy(exc):
                _snapshot_failed(dest, exc)
            unlink_quietly(dest)
            if attempt + 1 == SNAPSHOT_ATTEMPTS:
                raise BusyError(f"{src} stayed locked by its writers; retry the command") from None
            create_private_file(dest)
        except sqlite3.Error as exc:
            _snapshot_failed(dest, exc)


def _snapshot_failed(dest: str, exc: sqlite3.Error) -> NoReturn:
    unlink_quietly(dest)
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        # The copy's disk is full: the source is fine, and saying it is unreadable
        # would send the user to repair a segment that needs nothing.
        raise StorageError(f"cannot write the snapshot {dest}: {exc}") from None
    raise Unreadable(describe_sqlite_error(exc)) from None


def scrub_rows(path: str, seqs: Iterable[int], *,
               fixes: Iterable[tuple[str, str | None, str, bytes, int]] = ()) -> int:
    """Delete rows from a private snapshot so that no byte of them remains in the file.

    secure_delete zeroes freed cells, journal_mode OFF writes no journal
    holding the old pages, and VACUUM rebuilds the file without free pages.
    `fixes` (type, subject, ts, body, seq) rewrite a row's lookup columns
    (and a text body as a blob) to agree with its bytes.
    """
    wanted = [(s,) for s in seqs]
    fixes = list(fixes)
    if not wanted and not fixes:
        return 0
    try:
        return _scrub(path, wanted, fixes)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot scrub the snapshot {path}: "
                           f"{describe_sqlite_error(exc)}") from None


def _scrub(path: str, wanted: list[tuple[int]],
           fixes: list[tuple[str, str | None, str, bytes, int]]) -> int:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("BEGIN")
        conn.executemany("UPDATE events SET type = ?, subject = ?, ts = ?, body = ? "
                         "WHERE seq = ?", fixes)
        conn.executemany("DELETE FROM events WHERE seq = ?", wanted)
        if provenance.kind(conn) == "table":  # (a view loses its rows with the events)
            conn.execute("DELETE FROM origin WHERE event_id NOT IN (SELECT event_id FROM events)")
        conn.execute("COMMIT")
        # VACUUM's working copy stays in memory: as a temporary file it would
        # put the scrubbed rows' bytes on disk outside anything we delete.
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("VACUUM")
        conn.execute("PRAGMA journal_mode = DELETE")
        return len(wanted)
    finally:
        conn.close()


def subjects_present(path: str, subjects: set[str], types: tuple[str, ...]) -> set[str]:
    """Which of `subjects` some row of one of `types` in the file names (read through
    the subject index; the file is opened immutable). Raises Unreadable."""
    return {str(subject) for _seq, subject in _rows_by_subject(path, subjects, types)}


def rows_about(path: str, subjects: set[str], types: tuple[str, ...]) -> list[int]:
    """The seqs of rows of one of `types` whose subject column is in `subjects`, in
    seq order (read through the subject index; the file is opened immutable).
    The columns are lookup copies: only for a file whose columns were checked
    against its bytes. Raises Unreadable."""
    return sorted(int(seq) for seq, _subject in _rows_by_subject(path, subjects, types))


def _rows_by_subject(path: str, subjects: set[str], types: tuple[str, ...]
                     ) -> list[tuple[Any, Any]]:
    """(seq, subject) of every row of one of `types` whose subject is in `subjects`."""
    if not subjects:
        return []
    wanted = sorted(subjects)
    try:
        conn = _open_for_reading(path, immutable=True)
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    found: list[tuple[Any, Any]] = []
    try:
        kinds = ",".join("?" * len(types))
        for start in range(0, len(wanted), 500):  # SQLite's bound on parameters
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.extend(conn.execute(
                f"SELECT seq, subject FROM events WHERE subject IN ({marks}) "
                f"AND type IN ({kinds})", (*chunk, *types)))
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    finally:
        conn.close()
    return found
