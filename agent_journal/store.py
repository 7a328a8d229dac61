"""Storage: the only module that opens a segment.

Invariants:
- Every SQLite connection, pragma and transaction in the package is made here.
- A segment is one SQLite file holding the events of one workspace. A replica
  appends only to segments named after its own replica id; segments from other
  replicas (imports) are never appended to. Only compaction deletes rows.
- Every connection sets its busy timeout before anything else, and every write
  runs in `BEGIN IMMEDIATE` with a bounded retry, so concurrent writer
  processes on one replica queue instead of failing or losing events.
- The journal mode is chosen from the SQLite version loaded at run time (see
  `journal_mode_for`): WAL only where SQLite has the WAL-reset fix.
- Folders are 0700 and files 0600; a shared-writable root is refused.
- Reads never trust a row: each body is checked against its checksum, and a
  segment that cannot be read is reported, not raised.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterable, Iterator

from xxhash import xxh3_64_hexdigest as _xxh3_hex

from agent_journal import codec
from agent_journal.errors import BusyError, JournalError, UnsafeRootError
from agent_journal.model import Event, validate_id

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

ENV_ROOT = "AGENT_JOURNAL_ROOT"
ENV_SEGMENT_MAX_BYTES = "AGENT_JOURNAL_SEGMENT_MAX_BYTES"
SEGMENT_MAX_BYTES = 64 * 1024 * 1024
SEGMENT_SUFFIX = ".sqlite"
SEGMENT_FORMAT = 1
BUSY_TIMEOUT_S = 15.0
WRITE_ATTEMPTS = 6

DIR_MODE = 0o700
FILE_MODE = 0o600

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    subject TEXT,
    ts TEXT NOT NULL,
    body BLOB NOT NULL,
    checksum TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_subject ON events(subject);
"""


# -- journal mode -----------------------------------------------------------------------

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


# -- roots and permissions --------------------------------------------------------------

def default_root() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "share")
    return os.path.join(base, "agent-journal")


def resolve_root(root: str | os.PathLike[str] | None) -> str:
    """--root, else $AGENT_JOURNAL_ROOT, else the XDG data folder; always absolute.

    Paths are plain strings throughout this module: pathlib costs the hook
    path ~8 ms of imports per process.
    """
    if root is not None and str(root) != "":
        chosen = os.fspath(root)
    else:
        chosen = os.environ.get(ENV_ROOT) or default_root()
    return os.path.abspath(os.path.expanduser(chosen))


def _shared_writable(mode: int) -> bool:
    return bool(mode & (stat.S_IWGRP | stat.S_IWOTH))


def check_root(path: str, *, create: bool) -> bool:
    """Refuse shared-writable roots. Returns True when the root exists.

    A root others can write to lets them plant or swap segments, so an
    existing group/world-writable root is refused, and so is creating one
    inside a folder that others can write (such as /tmp itself).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is None:
        ancestor = _nearest_existing(path)
        if _shared_writable(os.stat(ancestor).st_mode):
            raise UnsafeRootError(
                f"refusing to create journal root {path}: {ancestor} is group- or "
                "world-writable")
        if create:
            make_private_dirs(path)
            return True
        return False
    if not stat.S_ISDIR(st.st_mode):
        raise JournalError(f"journal root {path} is not a folder")
    if _shared_writable(st.st_mode):
        raise UnsafeRootError(f"refusing journal root {path}: it is group- or world-writable")
    return True


def _nearest_existing(path: str) -> str:
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    return ancestor


def make_private_dirs(path: str) -> None:
    missing: list[str] = []
    current = path
    while not os.path.exists(current):
        missing.append(current)
        current = os.path.dirname(current)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask


def create_private_file(path: str) -> bool:
    """Create an empty 0600 file; False when it already exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def write_file_atomic(path: str, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Temp file, fsync, rename, fsync folder: a reader sees the old file or the whole new one.

    The temporary name is unique per call, so concurrent writers of the same
    path never share a half-written file; a failed write leaves no temp file.
    """
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode != FILE_MODE:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# -- the root ---------------------------------------------------------------------------

class Root:
    """One journal root: a replica id and a folder per workspace."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._replica_id: str | None = None

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, *, create: bool) -> Root:
        path = resolve_root(root)
        check_root(path, create=create)
        return cls(path)

    @property
    def exists(self) -> bool:
        return os.path.isdir(self.path)

    @property
    def replica_id(self) -> str:
        """Made once per root, on first write; every later process reads it back."""
        if self._replica_id is None:
            self._replica_id = self._load_or_make_replica_id()
        return self._replica_id

    def _load_or_make_replica_id(self) -> str:
        path = os.path.join(self.path, "replica-id")
        try:
            return validate_id(_read_text(path).strip(), "replica id")
        except FileNotFoundError:
            pass
        make_private_dirs(self.path)
        candidate = "r" + os.urandom(8).hex()[:15]
        tmp = os.path.join(self.path, f".replica-id.{os.getpid()}.{candidate}")
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
        try:
            os.write(fd, candidate.encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # link() fails if another process won the race; its id then stands.
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return validate_id(_read_text(path).strip(), "replica id")

    def workspace(self, name: str) -> Workspace:
        return Workspace(self, validate_id(name, "workspace"))

    def workspaces(self) -> list[str]:
        folder = os.path.join(self.path, "workspaces")
        if not os.path.isdir(folder):
            return []
        return sorted(n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n)))


# -- connections ------------------------------------------------------------------------

def connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    """Open an existing segment. Busy timeout first, autocommit, no file creation."""
    mode = "ro" if readonly else "rw"
    uri = f"file:{_quote_path(path)}?mode={mode}"
    # `timeout` installs SQLite's busy handler as the connection opens, before
    # any statement runs.
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                           check_same_thread=False)
    return conn


def _quote_path(path: str) -> str:
    # Only these characters are special in a URI filename; urllib.parse is
    # too costly to import on the hook path.
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def run_write(conn: sqlite3.Connection, work: Any) -> Any:
    """Run `work(conn)` inside BEGIN IMMEDIATE, retrying when writers hold the lock."""
    delay = 0.05
    for attempt in range(WRITE_ATTEMPTS):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc) and attempt + 1 < WRITE_ATTEMPTS:
                time.sleep(delay)
                delay *= 2
                continue
            if _is_busy(exc):
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


def init_segment(conn: sqlite3.Connection, *, workspace: str, replica: str) -> None:
    """Give a fresh segment its schema and journal mode (idempotent)."""
    current = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if current.lower() != JOURNAL_MODE:
        conn.execute(f"PRAGMA journal_mode={JOURNAL_MODE}")

    def work(c: sqlite3.Connection) -> None:
        if c.execute("PRAGMA user_version").fetchone()[0] != 0:
            return
        for statement in SCHEMA.strip().split(";"):
            if statement.strip():
                c.execute(statement)
        c.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [
            ("format", str(SEGMENT_FORMAT)), ("workspace", workspace), ("replica", replica),
        ])
        c.execute(f"PRAGMA user_version = {SEGMENT_FORMAT}")

    run_write(conn, work)


def insert_events(conn: sqlite3.Connection, events: Iterable[Event]) -> int:
    """Insert inside the caller's transaction; events already present are skipped."""
    rows = []
    for ev in events:
        body, digest = codec.encode(ev)
        rows.append((ev.event_id, ev.type, ev.id, ev.ts, body, digest))
    before = conn.total_changes
    conn.executemany(
        "INSERT OR IGNORE INTO events(event_id, type, subject, ts, body, checksum) "
        "VALUES (?, ?, ?, ?, ?, ?)", rows)
    return conn.total_changes - before


# -- reading ----------------------------------------------------------------------------

class ReadResult:
    """What a whole-workspace read saw, including what it could not trust."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.unreadable: list[dict[str, str]] = []
        self.malformed: list[dict[str, Any]] = []
        self.segments: list[str] = []
        # segment relative path -> highest seq read (compaction's "did it grow" check)
        self.high_water: dict[str, int] = {}

    @property
    def damaged(self) -> bool:
        return bool(self.unreadable or self.malformed)


def describe_sqlite_error(exc: Exception) -> str:
    return f"{exc.__class__.__name__}: {exc}".splitlines()[0]


# -- workspaces -------------------------------------------------------------------------

class Workspace:
    def __init__(self, root: Root, name: str) -> None:
        self.root = root
        self.name = name
        self.path = os.path.join(root.path, "workspaces", name)
        self.segments_dir = os.path.join(self.path, "segments")

    def rel(self, path: str) -> str:
        """A path as reported to users: relative to the journal root."""
        return os.path.relpath(path, self.root.path)

    def segment_paths(self) -> list[str]:
        try:
            names = os.listdir(self.segments_dir)
        except FileNotFoundError:
            return []
        return sorted(os.path.join(self.segments_dir, n) for n in names
                      if n.endswith(SEGMENT_SUFFIX) and not n.startswith("."))

    # -- appending ----------------------------------------------------------------------

    def _own_segment_pattern(self) -> re.Pattern[str]:
        own = re.escape(self.root.replica_id)
        return re.compile(rf"^{own}-(\d{{6}}){re.escape(SEGMENT_SUFFIX)}$")

    def current_segment(self) -> str:
        """This replica's newest segment, rotated when it passes the size limit."""
        pattern = self._own_segment_pattern()
        numbers = []
        for p in self.segment_paths():
            m = pattern.match(os.path.basename(p))
            if m:
                numbers.append(int(m.group(1)))
        number = max(numbers) if numbers else 1
        path = self._own_segment_name(number)
        limit = int(os.environ.get(ENV_SEGMENT_MAX_BYTES) or SEGMENT_MAX_BYTES)
        try:
            if os.stat(path).st_size >= limit:
                path = self._own_segment_name(number + 1)
        except FileNotFoundError:
            pass
        return path

    def _own_segment_name(self, number: int) -> str:
        return os.path.join(self.segments_dir,
                            f"{self.root.replica_id}-{number:06d}{SEGMENT_SUFFIX}")

    def open_for_append(self) -> sqlite3.Connection:
        make_private_dirs(self.segments_dir)
        path = self.current_segment()
        created = create_private_file(path)
        conn = connect(path)
        try:
            if created or conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                init_segment(conn, workspace=self.name, replica=self.root.replica_id)
        except BaseException:
            conn.close()
            raise
        return conn

    def append(self, events: list[Event], *, unique_subject: str | None = None,
               subject_type: str | None = None) -> int:
        """Append events to this replica's current segment.

        With `unique_subject`, refuse (ConflictError via `on_conflict`) when an
        event of `subject_type` about that id already exists in any segment.
        Older and imported segments are checked first; the current segment is
        checked inside the write lock, so two local writers cannot both pass.
        """
        from agent_journal.errors import ConflictError

        conn = self.open_for_append()
        current = conn.execute("PRAGMA database_list").fetchone()[2]
        try:
            if unique_subject is not None:
                for path in self.segment_paths():
                    if os.path.basename(path) == os.path.basename(current):
                        continue
                    if self._segment_has_subject(path, unique_subject, subject_type):
                        raise ConflictError(
                            f"{subject_type} {unique_subject} already exists in workspace "
                            f"{self.name}")

            def work(c: sqlite3.Connection) -> int:
                if unique_subject is not None and _has_subject(c, unique_subject, subject_type):
                    raise ConflictError(
                        f"{subject_type} {unique_subject} already exists in workspace {self.name}")
                return insert_events(c, events)

            return int(run_write(conn, work))
        finally:
            conn.close()

    # -- lookups ------------------------------------------------------------------------

    def _segment_has_subject(self, path: str, subject: str, type_: str | None) -> bool:
        try:
            conn = connect(path)
        except sqlite3.Error:
            return False
        try:
            return _has_subject(conn, subject, type_)
        except sqlite3.Error:
            return False
        finally:
            conn.close()

    def events_about(self, subject: str) -> list[Event]:
        """Every readable, well-formed event whose subject is `subject` (indexed lookup)."""
        return list(self.events_with_subjects([subject]))

    def events_with_subjects(self, subjects: Iterable[str], type_: str | None = None
                             ) -> Iterator[Event]:
        """Readable, well-formed events about any of `subjects` (of one type if given).

        An indexed lookup for writers' checks; unreadable segments and malformed
        rows are skipped here, and read commands report them.
        """
        wanted = sorted(set(subjects))
        if not wanted:
            return
        only = "" if type_ is None else "type = ? AND "
        for path in self.segment_paths():
            try:
                conn = connect(path)
            except sqlite3.Error:
                continue
            try:
                rows: list[tuple[Any, ...]] = []
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start:start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows.extend(conn.execute(
                        "SELECT event_id, type, subject, ts, body, checksum FROM events "
                        f"WHERE {only}subject IN ({marks})",
                        ([type_] if type_ is not None else []) + chunk))
            except sqlite3.Error:
                continue
            finally:
                conn.close()
            for event_id, type_found, subject, ts, body, digest in rows:
                try:
                    yield codec.decode_checked(body, digest, event_id, type_found, subject, ts)
                except codec.MalformedEvent:
                    continue

    def holds_subject(self, subject: str, types: tuple[str, ...]) -> bool:
        """Whether any readable segment has an event of one of `types` about `subject`."""
        for path in self.segment_paths():
            for t in types:
                if self._segment_has_subject(path, subject, t):
                    return True
        return False

    # -- reading ------------------------------------------------------------------------

    def read(self, *, lazy: bool = False, peek: Peek | None = None) -> ReadResult:
        """Every event of the workspace, with what could not be trusted.

        `lazy=True` verifies every row's checksum and header but defers
        parsing observation bodies until they are used (see
        codec.decode_lazy); destructive commands read strictly. `peek`
        (implies lazy) has SQLite read a few fields of each observation.
        """
        with PausedGC():
            return self._read(lazy, peek)

    def _read(self, lazy: bool, peek: Peek | None = None) -> ReadResult:
        result = ReadResult()
        for path in self.segment_paths():
            rel = self.rel(path)
            result.segments.append(rel)
            scan = read_segment(path, lazy=lazy, peek=peek)
            result.events.extend(scan.events)
            result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                    for seq, why in scan.malformed)
            if scan.unreadable is not None:
                result.unreadable.append({"path": rel, "reason": scan.unreadable})
            else:
                result.high_water[rel] = scan.high
        return result

    def iter_segment(self, path: str, *, lazy: bool = False
                     ) -> Iterator[Event | tuple[str, int, str]]:
        """Yield events, then ("high", seq, ""); damage as ("malformed"|"unreadable", ...)."""
        scan = read_segment(path, lazy=lazy)
        yield from scan.events
        for seq, why in scan.malformed:
            yield ("malformed", seq, why)
        if scan.unreadable is not None:
            yield ("unreadable", 0, scan.unreadable)
        else:
            yield ("high", scan.high, "")


class SegmentScan:
    """One segment's rows: events, malformed rows, or why it could not be read."""

    __slots__ = ("events", "malformed", "unreadable", "high", "seqs", "fold")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.malformed: list[tuple[int, str]] = []
        self.unreadable: str | None = None
        self.high = 0
        # Peeked reads only: the seq of each event (a cache keeps rows by seq).
        self.seqs: list[int] = []
        # With `fold_from`: that fold carried over every row read (see fold_row).
        self.fold: str | None = None


def open_segment_for_read(path: str) -> sqlite3.Connection:
    """Read-write so a hot journal left by a killed writer can be rolled back;
    read-only when the file cannot be opened for writing."""
    try:
        return connect(path)
    except sqlite3.Error:
        return connect(path, readonly=True)


def never_initialised(conn: sqlite3.Connection, path: str) -> bool:
    """Created but never given a schema (its writer died first): an empty segment."""
    return conn.execute("SELECT name FROM sqlite_master WHERE name = 'events'"
                        ).fetchone() is None and os.path.getsize(path) == 0


def strict_json_check(version: tuple[int, int, int]) -> str | None:
    """The SQL test that body text `t` is JSON that Python's json also accepts,
    for this SQLite version; None where there is none, and then every row is
    decoded the exact way.

    3.39 to 3.41 accept RFC 8259 JSON only (checked against Python's json for
    the cases in tests/test_compact.py). 3.42 to 3.44 also accept JSON5 (single
    quotes, NaN, hexadecimal, trailing commas, comments) in json_valid and
    cannot be asked not to. 3.45 and later take json_valid(t, 1) for RFC 8259
    text only. Before 3.39 the parser was not checked (and before 3.38 the
    JSON functions may be missing altogether).
    """
    if version >= (3, 45, 0):
        return "json_valid(t, 1)"
    if (3, 39, 0) <= version < (3, 42, 0):
        return "json_valid(t)"
    return None


_JSON_CHECK: list[str | None] = []


def json_check() -> str | None:
    """`strict_json_check` for the SQLite in use, or None when it was built
    without JSON functions (then nothing is peeked or judged by SQLite)."""
    if not _JSON_CHECK:
        check = strict_json_check(sqlite3.sqlite_version_info)
        if check is not None:
            probe = sqlite3.connect(":memory:")
            try:
                probe.execute(f"SELECT {check}, json_extract(t, '$.a'), json_type(t, '$.a') "
                              "FROM (SELECT '{\"a\":1}' AS t)").fetchone()
            except sqlite3.Error:
                check = None
            finally:
                probe.close()
        _JSON_CHECK.append(check)
    return _JSON_CHECK[0]


class Peek:
    """Fields of observation bodies that SQLite reads during a lazy scan.

    A bulk reader that needs a few fields of every observation (digest:
    status, tool, the input's path) would otherwise parse every body in
    Python, which costs several times the read itself. `values` are JSON
    paths whose values come back as JSON (so a string stays distinct from a
    number and `true` from 1); `types` are paths whose `json_type` comes
    back (null when absent). An observation read this way is a
    codec.PeekedEvent whose `peek` is the values followed by the types.
    Only bodies SQLite finds valid JSON (by `strict_json_check`) are peeked;
    any other stays lazy, and so does every body on a SQLite whose JSON
    parser is looser than Python's.
    """

    def __init__(self, values: tuple[str, ...], types: tuple[str, ...] = ()) -> None:
        self.values = values
        self.types = types
        outputs = [f"json_extract(t{', ?' * len(values)})"]
        outputs += ["json_type(t, ?)"] * len(types)
        # Peeked only where SQLite's JSON is no looser than Python's; elsewhere
        # every observation is read lazily and parsed when used.
        check = json_check()
        self.sql = (
            "SELECT seq, event_id, body, checksum, type, subject, ts, "
            + ", ".join("NULL" if check is None else
                        f"CASE WHEN type = 'observation' AND {check} THEN {o} END"
                        for o in outputs)
            + " FROM (SELECT seq, event_id, body, checksum, type, subject, ts, "
            "CAST(body AS TEXT) AS t FROM events WHERE seq > ?) ORDER BY seq")
        self.params = () if check is None else (*values, *types)


def read_segment(path: str, *, lazy: bool = False, peek: Peek | None = None,
                 after: int = 0, fold_from: str | None = None) -> SegmentScan:
    """Read and verify every row of one segment; damage is recorded, never raised.

    Rows read before a mid-file error are kept (a floor), and the segment is
    reported unreadable. `peek` implies `lazy`; with it, only rows whose seq
    is above `after` are read, and `fold_from` folds them into `scan.fold`.
    """
    scan = SegmentScan()
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        scan.unreadable = describe_sqlite_error(exc)
        return scan
    events = scan.events
    malformed = scan.malformed
    decode_lazy = codec.decode_lazy
    decode_checked = codec.decode_checked
    bad = codec.MalformedEvent
    try:
        if never_initialised(conn, path):
            return scan
        if peek is not None:
            _read_peeked(conn, peek, after, scan, fold_from)
            return scan
        rows = conn.execute("SELECT seq, event_id, body, checksum, type, subject, ts "
                            "FROM events ORDER BY seq")
        seq = 0
        for seq, event_id, body, digest, type_, subject, ts in rows:
            try:
                if lazy and type_ == "observation":
                    events.append(decode_lazy(body, digest, event_id, type_, subject, ts))
                else:
                    events.append(decode_checked(body, digest, event_id, type_, subject, ts))
            except bad as exc:
                malformed.append((seq, str(exc)))
        scan.high = seq
    except sqlite3.Error as exc:
        scan.unreadable = describe_sqlite_error(exc)
    finally:
        conn.close()
    return scan


def _read_peeked(conn: sqlite3.Connection, peek: Peek, after: int, scan: SegmentScan,
                 fold_from: str | None) -> None:
    decode_lazy = codec.decode_lazy
    decode_peeked = codec.decode_peeked
    decode_checked = codec.decode_checked
    parse = codec.parse_json_text
    bad = codec.MalformedEvent
    events, seqs, malformed = scan.events, scan.seqs, scan.malformed
    one_value = len(peek.values) == 1  # json_extract with one path returns the bare value
    scan.high = after
    fold = fold_from
    for seq, event_id, body, digest, type_, subject, ts, values, *types in conn.execute(
            peek.sql, (*peek.params, after)):
        scan.high = seq
        if fold is not None:
            fold = fold_row(fold, seq, event_id, type_, subject, ts, body, digest)
        try:
            if type_ != "observation":
                events.append(decode_checked(body, digest, event_id, type_, subject, ts))
            elif values is None:
                events.append(decode_lazy(body, digest, event_id, type_, subject, ts))
            else:
                found = [parse(values)] if one_value else parse(values)
                events.append(decode_peeked(body, digest, event_id, type_, subject, ts,
                                            (*found, *types)))
        except bad as exc:
            malformed.append((seq, str(exc)))
            continue
        seqs.append(seq)
    scan.fold = fold


def fold_row(fold: str, seq: int, event_id: Any, type_: Any, subject: Any, ts: Any,
             body: Any, digest: Any) -> str:
    """Carry a fingerprint of a segment's rows over one more row.

    The fold covers every column and whether the body still matches its
    checksum, so any change to a row already folded (an edit, a rewrite,
    damage to its bytes) gives another fold. It is a tamper-evident summary
    for caches, not a security measure.
    """
    try:
        verified = digest == codec.checksum(codec.as_bytes(body))
    except codec.MalformedEvent:
        verified = False
    return _xxh3_hex(f"{fold}\x1e{seq}\x1f{event_id}\x1f{type_}\x1f{subject}\x1f{ts}\x1f"
                     f"{digest}\x1f{int(verified)}".encode("utf-8", "surrogatepass"))


def segment_fold(path: str, upto: int) -> tuple[str, int]:
    """(fold from "" over every row with seq <= upto, how many rows that is).

    Raises sqlite3.Error when the segment cannot be read.
    """
    conn = open_segment_for_read(path)
    try:
        if never_initialised(conn, path):
            return "", 0
        fold, rows = "", 0
        for row in conn.execute("SELECT seq, event_id, type, subject, ts, body, checksum "
                                "FROM events WHERE seq <= ? ORDER BY seq", (upto,)):
            fold = fold_row(fold, *row)
            rows += 1
        return fold, rows
    finally:
        conn.close()


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _has_subject(conn: sqlite3.Connection, subject: str, type_: str | None) -> bool:
    if type_ is None:
        row = conn.execute("SELECT 1 FROM events WHERE subject = ? LIMIT 1", (subject,)).fetchone()
    else:
        row = conn.execute("SELECT 1 FROM events WHERE subject = ? AND type = ? LIMIT 1",
                           (subject, type_)).fetchone()
    return row is not None


# -- search cache -----------------------------------------------------------------------
# Disposable projections live under <root>/cache/<area>/<ws>.sqlite. They are
# rebuilt from the segments whenever in doubt, so these helpers favour speed
# (no WAL, relaxed syncs during a rebuild) and never open a segment for writing.

CACHE_DIR = "cache"
CACHE_SIDECARS = ("-journal", "-wal", "-shm")


def cache_path(root: Root, area: str, workspace: str) -> str:
    """<root>/cache/<area>/<ws>.sqlite: the file `compact --apply` deletes with its sidecars."""
    return os.path.join(root.path, CACHE_DIR, area, workspace + SEGMENT_SUFFIX)


def cache_lock_path(root: Root, area: str, workspace: str) -> str:
    # One folder deeper than the cache files, so a sweep of <root>/cache/*/<ws>.*
    # never removes a lock another process holds.
    return os.path.join(root.path, CACHE_DIR, area, "locks", workspace + ".lock")


class FileLock:
    """An exclusive advisory lock (flock): a projection being brought up to
    date (a lock file, created), or a workspace being compacted (its existing
    folder: taking it writes nothing).

    With `wait_s`, entering gives up after that long with BlockingIOError
    instead of waiting for whoever holds it.
    """

    def __init__(self, path: str, *, wait_s: float | None = None, folder: bool = False) -> None:
        self.path = path
        self.wait_s = wait_s
        self.folder = folder
        self.fd = -1

    def __enter__(self) -> FileLock:
        import fcntl

        if self.folder:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        else:
            make_private_dirs(os.path.dirname(self.path))
            self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, FILE_MODE)
        try:
            if self.wait_s is None:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + self.wait_s
                while True:
                    try:
                        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise
                        time.sleep(0.05)
        except BlockingIOError:
            os.close(self.fd)
            raise
        except OSError:
            if not self.folder:
                os.close(self.fd)
                raise
            # A filesystem that cannot lock a folder (some network mounts
            # emulate flock with locks that need a writable descriptor): go
            # on unlocked, as every run did before this lock existed.
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the descriptor releases the flock
        self.fd = -1


def remove_cache_files(path: str) -> None:
    """Delete a cache database and its sidecars; missing files are fine."""
    for name in (path,) + tuple(path + s for s in CACHE_SIDECARS):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


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


def segment_signature(path: str) -> tuple[str, int] | None:
    """A cheap fingerprint of a segment's files and their newest mtime (ns).

    None when the file cannot be examined. Any commit changes the fingerprint:
    in rollback-journal mode SQLite bumps the header's file change counter; in
    WAL mode the -wal file grows or is rewritten (its mtime moves). Callers
    still re-check a fingerprint taken within a second or two of the newest
    mtime, since mtimes are only as fine as the kernel's clock tick.
    """
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            header = fh.read(28)
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
    """(highest seq, rows in total, rows with seq > after, event_id column of row
    `after` or None), all from one snapshot.

    Raises sqlite3.Error when the segment cannot be read.
    """
    conn = open_segment_for_read(path)
    try:
        conn.execute("BEGIN")
        try:
            if never_initialised(conn, path):
                return 0, 0, 0, None
            high = conn.execute("SELECT max(seq) FROM events").fetchone()[0] or 0
            total = conn.execute("SELECT count(*) FROM events").fetchone()[0]
            newer = conn.execute("SELECT count(*) FROM events WHERE seq > ?",
                                 (after,)).fetchone()[0]
            row = conn.execute("SELECT event_id FROM events WHERE seq = ?", (after,)).fetchone()
            return int(high), int(total), int(newer), (row[0] if row else None)
        finally:
            conn.execute("COMMIT")
    finally:
        conn.close()


def iter_segment_after(path: str, after: int, batch: int = 2000
                       ) -> Iterator[tuple[str, int, Any, str | None]]:
    """Rows with seq > after, in seq order, as tagged tuples.

    ("event", seq, Event, event_id) for a trusted row, ("malformed", seq,
    reason, event_id) for a row that fails its checksum or shape (event_id is
    the row's column, as stored), and at most one ("unreadable", 0, reason,
    None) when SQLite gives up part way (what was yielded before stands, as
    in `Workspace.iter_segment`). Rows are fetched in short batches, so no
    read lock is held while the caller works and writers are never kept
    waiting on a long scan.
    """
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        yield ("unreadable", 0, describe_sqlite_error(exc), None)
        return
    try:
        decode = codec.decode
        malformed = codec.MalformedEvent
        last = after
        while True:
            try:
                if last == after and never_initialised(conn, path):
                    return
                rows = conn.execute(
                    "SELECT seq, event_id, body, checksum FROM events WHERE seq > ? "
                    "ORDER BY seq LIMIT ?", (last, batch)).fetchall()
            except sqlite3.Error as exc:
                yield ("unreadable", 0, describe_sqlite_error(exc), None)
                return
            if not rows:
                return
            for seq, event_id, body, digest in rows:
                last = seq
                try:
                    ev = decode(body, digest)
                except malformed as exc:
                    yield ("malformed", seq, str(exc), event_id)
                    continue
                if ev.event_id != event_id:
                    yield ("malformed", seq, "event_id column does not match body", event_id)
                    continue
                yield ("event", seq, ev, event_id)
    finally:
        conn.close()


# -- capture: artifacts, root config, the hook's log, import lookups --------------------
#
# Artifact layout (spec/FORMAT.md, "Artifacts"): a blob's reference is
# `xxh3-128:<32 hex>` of its exact bytes, and it lives at
# <root>/workspaces/<ws>/artifacts/<first 2 hex>/<32 hex>, 0600 in 0700 folders.
# A reference is validated before it becomes a path: references arrive in
# events, and events arrive from other replicas.

ARTIFACTS_DIR = "artifacts"
ARTIFACT_ALGO = "xxh3-128"
_ARTIFACT_HEX = re.compile(r"[0-9a-f]{32}")
CONFIG_NAME = "config.json"
LOGS_DIR = "logs"
LOG_MAX_BYTES = 1024 * 1024


def artifact_ref(data: bytes) -> str:
    """The content address of `data`."""
    import xxhash

    return f"{ARTIFACT_ALGO}:{xxhash.xxh3_128_hexdigest(data)}"


def artifact_path(ws: Workspace, ref: str) -> str:
    """Where the blob with reference `ref` lives; JournalError for anything but a valid ref."""
    algo, sep, hexdigest = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    if not sep or algo != ARTIFACT_ALGO or not _ARTIFACT_HEX.fullmatch(hexdigest):
        raise JournalError(f"not an artifact reference: {str(ref)[:80]!r}")
    return os.path.join(ws.path, ARTIFACTS_DIR, hexdigest[:2], hexdigest)


def write_artifact(ws: Workspace, data: bytes) -> str:
    """Store `data` as a blob (temp file, fsync, rename, fsync folder); return its ref.

    Content-addressed, so writing the same bytes twice is one file. An existing
    file is kept only if its bytes are exactly `data`; anything else there
    (damage, a hand edit) is replaced whole. OSError propagates: the caller
    records the capture as failed.
    """
    ref = artifact_ref(data)
    path = artifact_path(ws, ref)
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return ref
    except FileNotFoundError:
        pass
    make_private_dirs(os.path.dirname(path))
    write_file_atomic(path, data)
    return ref


def read_artifact(ws: Workspace, ref: str) -> bytes:
    """The blob's bytes as stored; FileNotFoundError when it is not there. Verifies nothing."""
    with open(artifact_path(ws, ref), "rb") as fh:
        return fh.read()


def read_root_config(root_path: str) -> tuple[str, bytes] | None:
    """(path, bytes) of <root>/config.json, or None when there is none.

    One failed open is all a missing file costs: the hook asks on every call.
    """
    path = os.path.join(root_path, CONFIG_NAME)
    try:
        with open(path, "rb") as fh:
            return path, fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"cannot read {path}: {exc.strerror}") from None


def append_private_log(root_path: str, name: str, line: str) -> None:
    """Append one line to <root>/logs/<name> (0600), keeping one previous file past 1 MiB."""
    folder = os.path.join(root_path, LOGS_DIR)
    make_private_dirs(folder)
    path = os.path.join(folder, name)
    try:
        if os.stat(path).st_size > LOG_MAX_BYTES:
            os.replace(path, path + ".1")
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, FILE_MODE)
    try:
        os.write(fd, line.encode("utf-8", errors="replace") + b"\n")
    finally:
        os.close(fd)


def set_write_patience(busy_timeout_s: float, attempts: int) -> None:
    """Bound how long this process waits on a locked journal (the hook must not stall
    the agent's tool call; a CLI user can afford the defaults)."""
    global BUSY_TIMEOUT_S, WRITE_ATTEMPTS
    BUSY_TIMEOUT_S = busy_timeout_s
    WRITE_ATTEMPTS = attempts


def observation_phases(ws: Workspace, ids: Iterable[str]) -> dict[str, tuple[set[Any], str]]:
    """For each observation id present in a readable segment: the statuses its events
    carry and the latest `ts` among them.

    Used by import to recognise calls the live hook already captured. Rows that fail
    verification are skipped here; read commands report them.
    """
    found: dict[str, tuple[set[Any], str]] = {}
    for ev in ws.events_with_subjects(ids, "observation"):
        subject = str(ev.id)
        statuses, latest = found.get(subject, (set(), ev.ts))
        statuses.add(ev.data.get("status"))
        found[subject] = (statuses, max(latest, ev.ts))
    return found


# -- bulk reads (audit and recovery reads) ---------------------------------------------

class PausedGC:
    """Pause Python's cyclic collector for a bulk read or computation; restore after.

    A whole-workspace read allocates millions of objects and none of them form
    cycles; with the collector running, its full passes over everything read so
    far cost as much as decoding it. Reference counting still frees everything.
    Nests: the collector is re-enabled only if it was enabled on entry.
    """

    def __enter__(self) -> PausedGC:
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            gc.enable()


# -- compaction ---------------------------------------------------------------------------
# The only code in the package that deletes rows or files holding events. Every
# deleting connection sets what erasure needs itself (secure_delete, a journal
# that is unlinked at commit) instead of trusting how SQLite was compiled, and
# every segment is changed in place, one transaction each, and only when it has
# not grown since it was read: a rewrite-and-rename could drop an append made
# through a connection that still had the old file open.

WAL_CHECKPOINT_ATTEMPTS = 20
COMPACT_INTENT = ".compact-pending.json"
# A second `compact --apply` waits this long for the first, then refuses.
COMPACT_LOCK_WAIT_S = 5.0


def compaction_lock(ws: Workspace) -> Any:
    """Held for the whole of an applied compaction: two at once would each
    overwrite the other's intent file, and a blob only the lost one named
    could outlive both. The lock is the workspace folder itself, so a
    refused run still writes nothing; a workspace with no folder has nothing
    to compact and needs none."""
    if not os.path.isdir(ws.path):
        from contextlib import nullcontext

        return nullcontext()
    return FileLock(ws.path, wait_s=COMPACT_LOCK_WAIT_S, folder=True)


class SegmentGrew(Exception):
    """A segment gained rows after it was read; it must be left alone."""


# Compaction's segment transactions are independent within a pass and spend
# their time in SQLite, which runs without the GIL, and much of it waiting on
# fsync: more run at once than there are cores. At 1M events on 2 cores a
# pass took 3.5 s on 2 threads, 2.8 s on 4, 2.3 s on 8, no less on 16.
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


def apply_to_segment(path: str, expected_high: int, delete_ids: Iterable[str],
                     rewrites: Iterable[tuple[str, str, bytes | None, str]]
                     ) -> tuple[int, set[str], bool]:
    """Delete rows and rewrite tombstones in one segment, in one transaction.

    `rewrites` are (event_id, checksum as read, new body or None, new
    checksum), as `Rewrite` says; a row whose checksum changed since it was
    read is left alone. Raises SegmentGrew
    (having changed nothing) when the segment's highest seq is no longer
    `expected_high`. Returns the new highest seq, the event ids rewritten, and
    whether the segment is clean afterwards (a WAL that could not be truncated
    may still hold old page images).
    """
    delete_rows = [(event_id,) for event_id in delete_ids]
    rewrite_rows = list(rewrites)
    conn = erasing_connection(path)
    try:
        wal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"

        def work(c: sqlite3.Connection) -> tuple[int, set[str]]:
            if _max_seq(c) != expected_high:
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
            if not _is_busy(exc):
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


def artifact_files(ws: Workspace, digests: Iterable[str]) -> dict[str, list[str]]:
    """Blob files under the workspace's artifact store named by each hex digest.

    The store is content-addressed, so a blob's path spells its digest (possibly
    split into fan-out folders); a digest shorter than 16 characters matches nothing.
    """
    wanted = {h.lower() for h in digests if len(h) >= 16}
    found: dict[str, list[str]] = {}
    top = os.path.join(ws.path, "artifacts")
    if not wanted or not os.path.isdir(top):
        return found
    for folder, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            flat = os.path.relpath(path, top).replace(os.sep, "").lower()
            for digest in wanted:
                if digest in flat:
                    found.setdefault(digest, []).append(path)
    return found


def remove_files(paths: Iterable[str]) -> list[str]:
    removed = []
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def clear_workspace_cache(ws: Workspace) -> list[str]:
    """Delete every disposable projection of the workspace under <root>/cache.

    Projections are named after the workspace (`cache/<kind>/<ws>.<ext>`, with
    SQLite's `-wal`/`-shm`/`-journal` beside them); readers rebuild them from
    the segments, so removing them loses nothing. A name with a further dot
    after the workspace's belongs to another workspace (`a.b.sqlite` is not `a`'s).
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
            if name != ws.name and not (name.startswith(ws.name + ".")
                                        and "." not in name[len(ws.name) + 1:]):
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
        raw = _read_text(os.path.join(ws.path, COMPACT_INTENT))
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


# -- replicas: snapshots, raw reads, import segments, artifacts ------------------------
# Export and merge (agent_journal/replicas.py) do all their file and SQLite work
# through these functions. Nothing here decides what to import; merge_plan does.

IMPORT_TEMP_PREFIX = ".import-"
MERGE_LOCK_NAME = ".merge.lock"
ORIGIN_SCHEMA = """
CREATE TABLE IF NOT EXISTS origin (
    event_id TEXT NOT NULL,
    replica TEXT NOT NULL,
    segment TEXT NOT NULL,
    seq INTEGER NOT NULL
)
"""
_COPY_CHUNK = 1 << 20


class Unreadable(Exception):
    """A source or snapshot file SQLite cannot read; str() is the one-line reason."""


def read_replica_id(root_path: str) -> str | None:
    """Another root's replica id, read without creating one."""
    try:
        return _read_text(os.path.join(root_path, "replica-id")).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_durable(tmp: str, final: str, *, clobber: bool = True) -> None:
    """Rename a fully written, fsynced temp file into place and persist the rename.

    With clobber=False an existing `final` is an error (FileExistsError),
    never silently replaced.
    """
    if clobber:
        os.replace(tmp, final)
    else:
        os.link(tmp, final)
        os.unlink(tmp)
    fsync_path(os.path.dirname(final) or ".")


def file_digest(path: str) -> tuple[int, str]:
    """(byte count, `xxh3-64:` checksum) of a file, read in chunks."""
    import xxhash

    h = xxhash.xxh3_64()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_COPY_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, codec.CHECKSUM_PREFIX + h.hexdigest()


def _open_for_reading(path: str, *, immutable: bool) -> sqlite3.Connection:
    if immutable:
        # A verified export file: nobody writes it, so no locks and no journal.
        uri = f"file:{_quote_path(path)}?mode=ro&immutable=1"
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
    try:
        conn = connect(path, readonly=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.Error:
        # A hot journal left by a crashed writer needs a writable connection
        # to roll back before anything can be read.
        return connect(path)


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
        try:
            conn = _open_for_reading(path, immutable=immutable)
        except sqlite3.Error as exc:
            raise Unreadable(describe_sqlite_error(exc)) from None
        try:
            conn.execute("BEGIN")
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "events" not in tables:
                if not tables:
                    return  # created but never initialised (its writer died first): empty
                raise Unreadable("no events table")
            if "meta" in tables:
                self.meta = {str(k): str(v) for k, v in conn.execute(
                    "SELECT key, value FROM meta")}
            query = "SELECT seq, event_id, type, subject, ts, body, checksum FROM events"
            if only == "tombstone_rows":
                query += " WHERE type = 'tombstone'"
            elif only == "tombstone_candidates":
                query += (" WHERE type = 'tombstone' OR typeof(body) != 'blob'"
                          " OR instr(body, x'746f6d6273746f6e65') OR instr(body, x'5c75')"
                          " OR instr(body, x'00')")
            self.rows = conn.execute(query + " ORDER BY seq").fetchall()
            if "origin" in tables and provenance_keys:
                self.provenance_keys = {(str(r), str(s)) for r, s in conn.execute(
                    "SELECT DISTINCT replica, segment FROM origin")}
        except sqlite3.Error as exc:
            raise Unreadable(describe_sqlite_error(exc)) from None
        finally:
            conn.close()


def stream_ids(path: str, *, batch: int = 50_000) -> Iterator[list[tuple[str]]]:
    """A segment's event_id column in batches, from one read transaction.

    For learning which events a large workspace holds without reading the
    bodies. Raises Unreadable, possibly after some batches were yielded.
    """
    try:
        conn = _open_for_reading(path, immutable=False)
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    try:
        conn.execute("BEGIN")
        if not conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            return  # created but never initialised: empty
        cursor = conn.execute("SELECT event_id FROM events")
        while rows := cursor.fetchmany(batch):
            yield rows
    except sqlite3.Error as exc:
        raise Unreadable(describe_sqlite_error(exc)) from None
    finally:
        conn.close()


def origin_keys(path: str) -> set[tuple[str, str]]:
    """The distinct (replica, segment) pairs an import segment's provenance names."""
    try:
        conn = _open_for_reading(path, immutable=False)
    except sqlite3.Error:
        return set()
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'origin'").fetchone():
            return set()
        return {(str(r), str(s)) for r, s in conn.execute(
            "SELECT DISTINCT replica, segment FROM origin")}
    except sqlite3.Error:
        return set()
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
        elif conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'origin'").fetchone():
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


def snapshot_segment(src: str, dest: str) -> None:
    """Copy a live segment to `dest` (which must not exist) with SQLite's VACUUM INTO.

    VACUUM INTO reads one transaction, so the copy holds exactly what was
    committed when it began, whatever writers do meanwhile; a raw file copy
    could catch a page half-written. The copy is in rollback-journal mode.
    """
    if not create_private_file(dest):
        raise FileExistsError(dest)
    try:
        conn = _open_for_reading(src, immutable=False)
        try:
            conn.execute("VACUUM INTO ?", (dest,))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        _unlink_quietly(dest)
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
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("BEGIN")
        conn.executemany("UPDATE events SET type = ?, subject = ?, ts = ?, body = ? "
                         "WHERE seq = ?", fixes)
        conn.executemany("DELETE FROM events WHERE seq = ?", wanted)
        if conn.execute("SELECT name FROM sqlite_master WHERE name = 'origin'").fetchone():
            conn.execute("DELETE FROM origin WHERE event_id NOT IN (SELECT event_id FROM events)")
        conn.execute("COMMIT")
        conn.execute("VACUUM")
        conn.execute("PRAGMA journal_mode = DELETE")
        return len(wanted)
    finally:
        conn.close()


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


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
        self._counter = 0
        self._wanted: set[str] = set()

    def _open(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        make_private_dirs(self.ws.segments_dir)
        self._counter += 1
        self._tmp = os.path.join(
            self.ws.segments_dir, f"{IMPORT_TEMP_PREFIX}{os.getpid()}-{self._counter}.tmp")
        _unlink_quietly(self._tmp)
        create_private_file(self._tmp)
        conn = sqlite3.connect(f"file:{_quote_path(self._tmp)}", uri=True,
                               isolation_level=None, check_same_thread=False)
        # A temp file no reader can see: no journal, no syncs until it is done.
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -65536")
        for statement in SCHEMA.strip().split(";"):
            if statement.strip() and "CREATE INDEX" not in statement:
                conn.execute(statement)
        conn.execute(ORIGIN_SCHEMA)
        conn.execute("CREATE TEMP TABLE skip (event_id TEXT PRIMARY KEY)")
        conn.execute("CREATE TEMP TABLE wanted (id TEXT PRIMARY KEY)")
        self._wanted = set()  # what temp.wanted holds
        self._conn = conn
        return conn

    def source(self, path: str, *, immutable: bool) -> ImportSource:
        """Attach a source segment for reading and copying, in one transaction."""
        return ImportSource(self, path, immutable=immutable)

    def _cut_if_full(self) -> None:
        # The same measure a replica rotates its own segments by: file size.
        if self._conn is not None and os.path.getsize(self._tmp) >= self.max_bytes:
            self._close_current()

    def _close_current(self) -> None:
        conn = self._conn
        if conn is None:
            return
        for statement in SCHEMA.strip().split(";"):
            if "CREATE INDEX" in statement:
                conn.execute(statement)
        conn.execute("BEGIN")
        conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [
            ("format", str(SEGMENT_FORMAT)), ("workspace", self.ws.name),
            ("replica", self.source_replica), ("importedBy", self.ws.root.replica_id),
            ("kind", "import"),
        ])
        conn.execute(f"PRAGMA user_version = {SEGMENT_FORMAT}")
        conn.execute("COMMIT")
        conn.execute("DROP TABLE temp.skip")
        conn.execute("DROP TABLE temp.wanted")
        conn.execute(f"PRAGMA journal_mode = {JOURNAL_MODE}")
        conn.close()
        self._conn = None
        fsync_path(self._tmp)
        self._done.append((self._tmp, self._ids))
        self._ids = []

    def drop(self, subjects: set[str], types: tuple[str, ...]) -> list[str]:
        """Remove not yet published rows about `subjects`; returns their event ids.

        For a tombstone a merge meets only after it wrote rows its target
        names: those bytes must not be published. secure_delete zeroes them
        in the (journal-less) temporary files.
        """
        if not subjects:
            return []
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
            conn.executemany("DELETE FROM origin WHERE event_id = ?", [(g,) for g in gone])
            if not current:
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
        final_paths = []
        for tmp, ids in self._done:
            if not ids:  # nothing imported into it, or everything dropped again
                _unlink_quietly(tmp)
                continue
            final = os.path.join(self.ws.segments_dir, self.name_for(self.source_replica, ids))
            rename_durable(tmp, final, clobber=False)
            final_paths.append(final)
        self._done = []
        return final_paths

    def abort(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            self._done.append((self._tmp, self._ids))
        for tmp, _ in self._done:
            for suffix in ("", "-journal", "-wal", "-shm"):
                _unlink_quietly(tmp + suffix)
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

    def __init__(self, writer: ImportWriter, path: str, *, immutable: bool) -> None:
        self.writer = writer
        self.path = path
        self.immutable = immutable
        self.empty = False
        self.has_origin = False
        self._conn: sqlite3.Connection | None = None

    def __enter__(self) -> ImportSource:
        conn = self.writer._open()
        attached = False
        error: sqlite3.Error | None = None
        tables: set[str] = set()
        for mode in (("ro&immutable=1",) if self.immutable else ("ro", "rw")):
            try:
                conn.execute("ATTACH DATABASE ? AS src",
                             (f"file:{_quote_path(self.path)}?mode={mode}",))
                attached = True
                conn.execute("BEGIN")
                tables = {r[0] for r in conn.execute(
                    "SELECT name FROM src.sqlite_master WHERE type = 'table'")}
                break
            except sqlite3.Error as exc:
                error = exc
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
            self.__exit__(None, None, None)
            if tables:
                raise Unreadable("no events table")
            self.empty = True  # created but never initialised: nothing to read
        self.has_origin = "origin" in tables
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

    def tombstone_rows(self) -> list[tuple[int, str, str, str | None, str, str, Any]]:
        """Rows whose type column says tombstone, with their bodies."""
        if self.empty:
            return []
        return self._query("SELECT seq, event_id, type, subject, ts, checksum, body "
                           "FROM src.events WHERE type = 'tombstone'")

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

    def insert(self, rows: list[tuple[str, str, str | None, str, bytes, str]],
               origins: list[tuple[str, str, str, int]]) -> None:
        """Add rows the caller rebuilt: (event_id, type, subject, ts, body, checksum)."""
        conn = self.writer._conn
        assert conn is not None
        conn.executemany("INSERT INTO main.events(event_id, type, subject, ts, body, checksum) "
                         "VALUES (?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO main.origin(event_id, replica, segment, seq) "
                         "VALUES (?, ?, ?, ?)", origins)
        self.writer._ids.extend(r[0] for r in rows)

    def __exit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.in_transaction:
            conn.execute("COMMIT" if exc[0] is None else "ROLLBACK")
        conn.execute("DETACH DATABASE src")
        if exc[0] is None:
            self.writer._cut_if_full()


class MergeLock:
    """One merge at a time per workspace, so two merges never import the same event twice."""

    def __init__(self, ws: Workspace) -> None:
        self.path = os.path.join(ws.path, MERGE_LOCK_NAME)
        self.segments_dir = ws.segments_dir
        self.fd = -1

    def __enter__(self) -> MergeLock:
        import fcntl

        make_private_dirs(self.segments_dir)
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, FILE_MODE)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        # Under the lock no other merge is running: any temp import is a leftover.
        for name in os.listdir(self.segments_dir):
            if name.startswith(IMPORT_TEMP_PREFIX):
                _unlink_quietly(os.path.join(self.segments_dir, name))
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def copy_file_verified(src: str, dest: str, *, size: int, checksum: str) -> bool:
    """Copy `src` to `dest` atomically if its bytes match `size` and `checksum`.

    Returns False (and leaves `dest` untouched) when `src` is missing or differs.
    """
    import xxhash

    make_private_dirs(os.path.dirname(dest))
    tmp = os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.{os.getpid()}.tmp")
    h = xxhash.xxh3_64()
    total = 0
    try:
        src_fh = open(src, "rb")
    except OSError:
        return False
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, FILE_MODE)
        try:
            while chunk := src_fh.read(_COPY_CHUNK):
                h.update(chunk)
                total += len(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        src_fh.close()
    if total != size or codec.CHECKSUM_PREFIX + h.hexdigest() != checksum:
        _unlink_quietly(tmp)
        return False
    rename_durable(tmp, dest)
    return True
