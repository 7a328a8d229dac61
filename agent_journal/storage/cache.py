"""Projection files: the disposable caches under <root>/cache/<area>/<ws>.sqlite.

Invariants:
- A projection is rebuilt from the segments whenever in doubt, so these helpers
  favour speed (no WAL, relaxed syncs during a rebuild) and never open a
  segment for writing.
- A projection is published whole: built under a temporary name and renamed
  into place, so a reader sees the old file or the new one, never half of one.
- A segment's signature (size, mtime, inode, rows) is how a projection knows
  what it has already folded; anything it cannot vouch for is read again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator

from agent_journal.core import codec
from agent_journal.storage.connection import connect, describe_sqlite_error, run_write
from agent_journal.storage.files import check_confined, create_private_file, make_private_dirs
from agent_journal.storage.segment import SEGMENT_SUFFIX, never_initialised, open_segment_for_read

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.storage.root import Root

CACHE_DIR = "cache"
CACHE_SIDECARS = ("-journal", "-wal", "-shm")


def cache_path(root: Root, area: str, workspace: str) -> str:
    """<root>/cache/<area>/<ws>.sqlite: the file `compact --apply` deletes with its sidecars."""
    return os.path.join(root.path, CACHE_DIR, area, workspace + SEGMENT_SUFFIX)


def cache_lock_path(root: Root, area: str, workspace: str) -> str:
    # One folder deeper than the cache files, so a sweep of <root>/cache/*/<ws>.*
    # never removes a lock another process holds.
    return os.path.join(root.path, CACHE_DIR, area, "locks", workspace + ".lock")


def remove_cache_files(path: str) -> None:
    """Delete a cache database and its sidecars; missing files are fine."""
    for name in (path,) + tuple(path + s for s in CACHE_SIDECARS):
        check_confined(name)
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


def open_identified_cache(path: str, schema: Iterable[str], identity: dict[str, str], *,
                          what: str, no_sync: bool = False) -> sqlite3.Connection:
    """Open a projection whose `meta` table names what it was built for (`identity`:
    format, workspace, ...): a fresh file gets `schema` and that identity; a file with
    another identity, or one SQLite cannot read, is removed and started afresh (once).
    `no_sync` is for a projection whose every record carries its own digest, so a
    record a crash tears is read again rather than trusted."""

    def init(c: sqlite3.Connection) -> bool:
        for statement in schema:
            c.execute(statement)
        have = dict(c.execute("SELECT key, value FROM meta").fetchall())
        if not have:
            c.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", identity.items())
            return True
        return have == identity

    for _ in range(2):
        conn = None
        try:
            conn = open_cache(path, erasing=True)
            if no_sync:
                conn.execute("PRAGMA synchronous=OFF")
            if run_write(conn, init):
                return conn
        except sqlite3.DatabaseError:
            pass  # not a projection this version can read: start again from nothing
        if conn is not None:
            conn.close()
        remove_cache_files(path)
    raise sqlite3.DatabaseError(f"the {what} could not be recreated")


def open_cache(path: str, *, bulk: bool = False, erasing: bool = False) -> sqlite3.Connection:
    """Open (creating, 0600) a cache database.

    A missing main file with a leftover journal beside it would make SQLite
    replay that journal into the new file, so sidecars go first. `bulk` is
    for a from-scratch build into a temporary file: no rollback journal and
    no syncs, because a crash there leaves a file nobody will ever open
    (it is only renamed into place once complete, see `publish_cache`).
    `erasing` is for a cache that deletes rows in place: what it frees is
    overwritten (secure_delete), whatever the build's default.
    """
    make_private_dirs(os.path.dirname(path))
    if not os.path.exists(path):
        remove_cache_files(path)
        create_private_file(path)
    conn = connect(path)
    try:
        if bulk:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
        else:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "delete":
                conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA cache_size=-65536")
        conn.execute("PRAGMA temp_store=MEMORY")
        if erasing:
            conn.execute("PRAGMA secure_delete = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def publish_cache(conn: sqlite3.Connection, tmp: str, path: str) -> None:
    """Close a bulk-built cache, make it durable, and rename it into place."""
    conn.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    remove_cache_files(path)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def segment_signature(path: str, st: os.stat_result | None = None
                      ) -> tuple[str, int] | None:
    """A cheap fingerprint of a segment's files and their newest mtime (ns).

    None when the file cannot be examined. Any commit changes the fingerprint:
    in rollback-journal mode SQLite bumps the header's file change counter; in
    WAL mode the -wal file grows or is rewritten (its mtime moves). Callers
    still re-check a fingerprint taken within a second or two of the newest
    mtime, since mtimes are only as fine as the kernel's clock tick. `st`: the
    file's stat, when the caller has just taken it.
    """
    try:
        if st is None:
            st = os.stat(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            header = os.read(fd, 28)
        finally:
            os.close(fd)
    except OSError:
        return None
    counter = header[24:28].hex() if len(header) == 28 else "-"
    newest = st.st_mtime_ns
    try:
        wal = os.stat(path + "-wal")
        wal_part = f"{wal.st_size}/{wal.st_mtime_ns}"
        newest = max(newest, wal.st_mtime_ns)
    except OSError:
        wal_part = "-"
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{counter}:{wal_part}", newest


def segment_census(path: str, after: int) -> tuple[int, int, int, str | None]:
    """(highest seq, rows in total, rows with seq > after, `row_mark` of row `after`
    or None), all from one snapshot.

    Raises sqlite3.Error when the segment cannot be read.
    """
    conn = open_segment_for_read(path)
    try:
        conn.execute("BEGIN")
        try:
            if never_initialised(conn):
                return 0, 0, 0, None
            high = conn.execute("SELECT max(seq) FROM events").fetchone()[0] or 0
            total = conn.execute("SELECT count(*) FROM events").fetchone()[0]
            newer = conn.execute("SELECT count(*) FROM events WHERE seq > ?",
                                 (after,)).fetchone()[0]
            row = conn.execute("SELECT event_id, checksum FROM events WHERE seq = ?",
                               (after,)).fetchone()
            return int(high), int(total), int(newer), (row_mark(*row) if row else None)
        finally:
            conn.execute("COMMIT")
    finally:
        conn.close()


def file_id(signature: str | None) -> str | None:
    """The device and inode a `segment_signature` names."""
    return None if signature is None else ":".join(signature.split(":", 2)[:2])


def not_appended(path: str, high: int, rows: int, last: str | None, then: str | None,
                 now: str | None) -> tuple[str | None, int]:
    """The census rule: whether a segment that a projection read up to seq `high`
    (`rows` rows, the row at `high` marked `last` (`row_mark`), from a file whose
    signature was `then`; `now` is its signature now) only gained rows above `high`.

    (None, rows above `high`) when it did; (why not, 0) when rows at or below `high`
    were lost, the row at `high` holds other content, the file was replaced (another
    inode), or it changed without gaining rows (rows edited in place). Costs SQLite's
    count of the rows, never a read of their bodies: a row below `high` edited in place
    by a write that also appends rows, in the same file, is not told from an append.
    Raises sqlite3.Error when the segment cannot be read.
    """
    now_high, total, newer, at_high = segment_census(path, high)
    # Rows only ever arrive above the high-water mark: fewer rows at or below it, or
    # other content at it (another event, or the same event id with another
    # checksum), means something was removed or changed.
    if now_high < high or total - newer != rows or at_high != last:
        return "lost rows or changed in place", 0
    if rows and then is not None and now is not None and file_id(now) != file_id(then):
        # Another file under the same name (copied over by rename, restored from a
        # backup): what was read of the old one cannot be trusted row by row.
        return "was replaced", 0
    if rows and not newer and now != then:
        # The file changed, yet no row arrived: rows already read were changed in
        # place (damage, a hand edit), and only a fresh read can say which still verify.
        return "changed without growing", 0
    return None, newer


def row_mark(event_id: str, checksum: str) -> str:
    """What identifies a row's content: its event id and checksum columns, as stored
    (a body edited in place, even with a valid new checksum, changes the mark)."""
    return f"{event_id} {checksum}"


def iter_segment_after(path: str, after: int, batch: int = 2000
                       ) -> Iterator[tuple[str, int, Any, str | None]]:
    """Rows with seq > after, in seq order, as tagged tuples.

    ("event", seq, Event, mark) for a trusted row, ("malformed", seq, reason,
    mark) for a row that fails its checksum or shape or whose lookup columns
    (event_id, type, subject, ts) disagree with its body: the verdict every
    read gives (`codec.decode_checked`), so a tombstone whose subject column
    was edited is malformed here as in `show`, and hides nothing. mark is
    `row_mark` of the row's columns, as stored. At most one ("unreadable", 0,
    reason, None) when SQLite gives up part way (what was yielded before
    stands, as in `Workspace.iter_segment`). Rows are fetched in short batches, so no
    read lock is held while the caller works and writers are never kept
    waiting on a long scan.
    """
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        yield ("unreadable", 0, describe_sqlite_error(exc), None)
        return
    try:
        decode = codec.decode_checked
        malformed = codec.MalformedEvent
        last = after
        while True:
            try:
                if last == after and never_initialised(conn):
                    return
                rows = conn.execute(
                    "SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
                    "WHERE seq > ? ORDER BY seq LIMIT ?", (last, batch)).fetchall()
            except sqlite3.Error as exc:
                yield ("unreadable", 0, describe_sqlite_error(exc), None)
                return
            if not rows:
                return
            for seq, event_id, body, digest, type_, subject, ts in rows:
                last = seq
                mark = row_mark(event_id, digest)
                try:
                    ev = decode(body, digest, event_id, type_, subject, ts)
                except malformed as exc:
                    yield ("malformed", seq, str(exc), mark)
                    continue
                yield ("event", seq, ev, mark)
    finally:
        conn.close()
