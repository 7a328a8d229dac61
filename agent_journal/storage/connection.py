"""SQLite connections: the one opener, the write transaction, the journal mode.

Invariants:
- Every connection to a journal file is opened by `connect`: busy timeout set
  as it opens, autocommit, never creating a file.
- Every write runs in `BEGIN IMMEDIATE` with a bounded retry, so concurrent
  writer processes on one replica queue instead of failing or losing events;
  a lock held past every retry is a BusyError, never a raw driver error.
- The journal mode is chosen from the SQLite version loaded at run time (see
  `journal_mode_for`): WAL only where SQLite has the WAL-reset fix.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time

from agent_journal.core.errors import BusyError
from agent_journal.storage.files import check_confined

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


BUSY_TIMEOUT_S = 15.0
WRITE_ATTEMPTS = 6


def journal_mode_for(version: tuple[int, int, int]) -> str:
    """WAL only on SQLite versions with the WAL-reset fix; rollback journal elsewhere.

    SQLite before 3.51.3 can corrupt a WAL database when concurrent writers and
    checkpoints race a WAL reset; 3.44.6 and 3.50.7 carry the backported fix.
    A rollback journal (DELETE) is not exposed to that bug, at the cost of
    readers briefly waiting on writers, which the busy timeout absorbs.
    """
    if version >= (3, 51, 3):
        return "wal"
    if (3, 44, 6) <= version < (3, 45, 0) or (3, 50, 7) <= version < (3, 51, 0):
        return "wal"
    return "delete"


JOURNAL_MODE = journal_mode_for(sqlite3.sqlite_version_info)


def connect(path: str, *, readonly: bool = False, immutable: bool = False,
            busy_s: float | None = None) -> sqlite3.Connection:
    """Open an existing SQLite file. Busy timeout first, autocommit, no file creation.

    `immutable` is for a verified export file: nobody writes it, so SQLite
    takes no locks and looks for no journal. `busy_s`: how long a statement waits
    for a lock another connection holds (a probe that must not hold up its caller
    waits less); by default BUSY_TIMEOUT_S as it stands now (set_write_patience
    lowers it for the hook).
    """
    check_confined(path)  # SQLite follows symbolic links; the journal does not
    _check_regular(path)
    mode = "ro" if readonly or immutable else "rw"
    uri = f"file:{quote_path(path)}?mode={mode}" + ("&immutable=1" if immutable else "")
    # `timeout` installs SQLite's busy handler as the connection opens, before
    # any statement runs.
    try:
        conn = sqlite3.connect(uri, uri=True,
                               timeout=BUSY_TIMEOUT_S if busy_s is None else busy_s,
                               isolation_level=None,
                               check_same_thread=False)
    except sqlite3.OperationalError:
        # "unable to open database file" names neither the file nor the reason; the
        # operating system knows both.
        try:
            os.close(os.open(path, os.O_RDONLY if mode == "ro" else os.O_RDWR))
        except OSError as exc:
            raise sqlite3.OperationalError(f"cannot open {path}: {exc.strerror}") from None
        raise
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    except UnicodeDecodeError as exc:
        conn.close()
        raise as_sqlite_error(exc) from None
    except sqlite3.Error:
        pass  # reported by the caller's first statement, as before
    return conn


def _check_regular(path: str) -> None:
    """A folder, FIFO or device where a database is expected is unreadable, said plainly
    (SQLite would say "unable to open database file", or wait forever on a FIFO)."""
    try:
        st = os.stat(path)
    except OSError:
        return  # sqlite3.connect reports it
    if not stat.S_ISREG(st.st_mode):
        raise sqlite3.OperationalError(f"{path} is not a regular file")


def as_sqlite_error(exc: UnicodeDecodeError) -> sqlite3.DatabaseError:
    """The driver's error for a damaged schema whose message is not UTF-8.

    SQLite quotes the damaged schema text in its message ("malformed database
    schema (...)"), and the driver, failing to decode that message, raises
    UnicodeDecodeError instead of sqlite3.Error. Opening a connection reads
    the schema, so `connect` turns it back into the error it stands for.
    """
    raw = exc.object if isinstance(exc.object, bytes) else b""
    return sqlite3.DatabaseError(raw.decode("utf-8", "replace") or "malformed database schema")


def quote_path(path: str) -> str:
    # Only these characters are special in a URI filename; urllib.parse is
    # too costly to import on the hook path.
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def run_write(conn: sqlite3.Connection, work: Any) -> Any:
    """Run `work(conn)` inside BEGIN IMMEDIATE, retrying when writers hold the lock."""
    delay = 0.05
    for attempt in range(WRITE_ATTEMPTS):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if is_busy(exc) and attempt + 1 < WRITE_ATTEMPTS:
                time.sleep(delay)
                delay *= 2
                continue
            if is_busy(exc):
                raise BusyError("the journal stayed locked by other writers; retry") from None
            raise
        try:
            result = work(conn)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    raise BusyError("the journal stayed locked by other writers; retry")


def describe_sqlite_error(exc: Exception) -> str:
    name = getattr(exc, "sqlite_errorname", None)
    told = f" ({name})" if name and name not in str(exc) else ""
    return f"{exc.__class__.__name__}: {exc}{told}".splitlines()[0]


def set_write_patience(busy_timeout_s: float, attempts: int) -> None:
    """Bound how long this process waits on a locked journal (the hook must not stall
    the agent's tool call; a CLI user can afford the defaults)."""
    global BUSY_TIMEOUT_S, WRITE_ATTEMPTS
    BUSY_TIMEOUT_S = busy_timeout_s
    WRITE_ATTEMPTS = attempts
