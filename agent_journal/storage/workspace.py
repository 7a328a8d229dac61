"""A workspace: its segments, appending to this replica's current one, and whole reads.

Invariants:
- Appends go only to this replica's newest segment, rotated past the size
  limit; a write that must be unique (an entry id) is checked in every other
  segment first and in the current one inside the write lock.
- Driver errors are translated here: a lock held past every retry is a
  BusyError, any other SQLite failure a StorageError naming the workspace.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator

from agent_journal.core import codec
from agent_journal.core.errors import BusyError, ConflictError, StorageError
from agent_journal.core.model import Event
from agent_journal.storage.connection import connect, describe_sqlite_error, is_busy, run_write
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.segment import (
    SEGMENT_SUFFIX,
    has_subject,
    init_segment,
    insert_events,
    open_segment_for_read,
)
from agent_journal.storage.swap_guard import writer_guard

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.storage.cut import Cut
    from agent_journal.storage.root import Root
    from agent_journal.storage.segment_reader import Peek, ReadResult

ENV_SEGMENT_MAX_BYTES = "AGENT_JOURNAL_SEGMENT_MAX_BYTES"
SEGMENT_MAX_BYTES = 64 * 1024 * 1024


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

    def current_segment(self, paths: list[str] | None = None) -> str:
        """This replica's newest segment, rotated when it passes the size limit (`paths`:
        segment_paths(), when the caller has listed them already)."""
        # Its own segments are named <replica>-<six digits><SEGMENT_SUFFIX> (read without
        # a regex: `re` costs the hook milliseconds to import).
        prefix = os.path.join(self.segments_dir, self.root.replica_id + "-")
        size = len(prefix) + 6 + len(SEGMENT_SUFFIX)
        numbers = []
        for p in self.segment_paths() if paths is None else paths:
            if len(p) == size and p.startswith(prefix) and p.endswith(SEGMENT_SUFFIX):
                digits = p[len(prefix):size - len(SEGMENT_SUFFIX)]
                if digits.isdecimal():
                    numbers.append(int(digits))
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

    def open_for_append(self, path: str | None = None) -> sqlite3.Connection:
        """A connection to this replica's current segment (`path`, when the caller chose
        it), made and initialised if need be."""
        make_private_dirs(self.segments_dir)
        path = self.current_segment() if path is None else path
        created = create_private_file(path)
        conn = connect(path)
        try:
            if created or conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                init_segment(conn, workspace=self.name, replica=self.root.replica_id)
        except BaseException:
            conn.close()
            raise
        return conn

    def writer(self) -> Writer:
        """A writer's one hold on this replica's current segment, for its look-ups and its
        appends (close it, or use it as a context manager)."""
        return Writer(self)

    def append(self, events: list[Event], *, unique_subject: str | None = None,
               subject_type: str | None = None) -> int:
        """Append events to this replica's current segment.

        With `unique_subject`, refuse (ConflictError via `on_conflict`) when an
        event of `subject_type` about that id already exists in any segment.
        Older and imported segments are checked first; the current segment is
        checked inside the write lock, so two local writers cannot both pass.
        """
        with self.writer() as writer:
            return writer.append(events, unique_subject=unique_subject,
                                 subject_type=subject_type)

    # -- lookups ------------------------------------------------------------------------

    def _segment_has_subject(self, path: str, subject: str, type_: str | None) -> bool:
        try:
            conn = open_segment_for_read(path)
        except sqlite3.Error:
            return False
        try:
            return has_subject(conn, subject, type_)
        except sqlite3.Error:
            return False
        finally:
            conn.close()

    def events_about(self, subject: str) -> list[Event]:
        """Every readable, well-formed event whose subject is `subject` (indexed lookup)."""
        return list(self.events_with_subjects([subject]))

    def events_with_subjects(self, subjects: Iterable[str], type_: str | None = None, *,
                             held: dict[str, sqlite3.Connection] | None = None
                             ) -> Iterator[Event]:
        """Readable, well-formed events about any of `subjects` (of one type if given).

        An indexed lookup for writers' checks; unreadable segments and malformed
        rows are skipped here, and read commands report them. A segment in `held`
        is asked through that connection (a writer's, inside its transaction).
        """
        wanted = sorted(set(subjects))
        if not wanted:
            return
        only = "" if type_ is None else "type = ? AND "
        for path in self.segment_paths():
            mine = (held or {}).get(path)
            try:
                conn = mine or open_segment_for_read(path)
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
                if mine is None:
                    conn.close()
            for event_id, type_found, subject, ts, body, digest in rows:
                try:
                    yield codec.decode_checked(body, digest, event_id, type_found, subject, ts)
                except codec.MalformedEvent:
                    continue

    def tombstoned_among(self, subjects: Iterable[str]) -> set[str]:
        """Which of `subjects` some tombstone names, in any segment this replica can open.

        Every write of content checks this first: a tombstoned id is never
        written again, whatever the path (a row stored as a tombstone counts even
        if its bytes are damaged, so doubt means "do not write"). Past ASK_DIRECTLY
        segments, only those that changed since the tombstone index last asked them
        are opened (storage/tombstone_index.py). A segment that cannot be opened is skipped, as
        in every writer's lookup (the reads report it); one that stays locked
        raises BusyError, as an append would.
        """
        return self._tombstoned_among(subjects, self.segment_paths(), _tombstone_subjects)

    def _tombstoned_among(self, subjects: Iterable[str], paths: list[str],
                          ask: Any) -> set[str]:
        wanted = set(subjects)
        if not wanted:
            return set()
        if len(paths) <= ASK_DIRECTLY:
            # A few segments are asked faster than the index is read and checked.
            found: set[str] = set()
            for path in paths:
                found |= ask(path, wanted) or set()
            return found
        from agent_journal.storage import tombstone_index

        return tombstone_index.tombstoned_among(self.root.path, self.name, paths, wanted, ask)

    def holds_subject(self, subject: str, types: tuple[str, ...]) -> bool:
        """Whether any readable segment has an event of one of `types` about `subject`."""
        for path in self.segment_paths():
            for t in types:
                if self._segment_has_subject(path, subject, t):
                    return True
        return False

    # -- reading ------------------------------------------------------------------------

    def read(self, *, lazy: bool = False, peek: Peek | None = None, cut: Cut | None = None,
             observations: bool = True) -> ReadResult:
        """Every event of the workspace, with what could not be trusted.

        `lazy=True` verifies every row's checksum and header but defers
        parsing observation bodies until they are used (see
        codec.decode_lazy); destructive commands read strictly. `peek`
        (implies lazy) has SQLite read a few fields of each observation.
        `cut` (not with `peek`) reads only the rows inside it (cut.py).
        `observations=False` verifies observation rows but keeps none.
        """
        # (segment_reader is loaded by the reads alone: the hook, which only writes, never.)
        from agent_journal.storage.segment_reader import PausedGC

        with PausedGC():
            return self._read(lazy, peek, cut, observations)

    def _read(self, lazy: bool, peek: Peek | None = None, cut: Cut | None = None,
              observations: bool = True) -> ReadResult:
        from agent_journal.storage.segment_reader import ReadResult, read_segment

        result = ReadResult()
        for path in self.segment_paths():
            rel = self.rel(path)
            result.segments.append(rel)
            scan = read_segment(path, lazy=lazy, peek=peek, cut=cut,
                                observations=observations)
            result.events.extend(result.take(rel, scan))
        return result

    def read_newest(self, rows: int) -> ReadResult:
        """Every event but the observations of every segment (so every tombstone, entry and
        invalidation), and the observations among the newest `rows` rows of the most
        recently written segments: what a digest of the newest work needs when the whole
        one cannot wait. Its cost is bounded by `rows`, whatever the journal's size."""
        from agent_journal.storage.segment_reader import (
            PausedGC,
            ReadResult,
            read_entries,
            read_segment,
            segment_extent,
        )

        paths = self.segment_paths()
        tails: dict[str, int] = {}  # segment -> the seq its newest rows start above
        left = rows
        for path in sorted(paths, key=_mtime, reverse=True):
            if left <= 0:
                break
            high, count = segment_extent(path)
            tails[path] = max(0, high - left)
            left -= min(count, left)
        result = ReadResult()
        with PausedGC():
            for path in paths:
                rel = self.rel(path)
                result.segments.append(rel)
                events = result.take(rel, read_entries(path))
                if path in tails:
                    tail = read_segment(path, lazy=True, marked=True, after=tails[path])
                    result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                            for seq, why in tail.malformed)
                    events = events + [e for e in tail.events if e.type == "observation"]
                result.events.extend(events)
        return result

    def structure_damage(self) -> list[dict[str, str]]:
        """{path, reason} of every segment SQLite's structural check fails on
        (segment_reader.structure_damage), in segment order."""
        from agent_journal.storage.segment_reader import structure_damage
        found = []
        for path in self.segment_paths():
            reason = structure_damage(path)
            if reason is not None:
                found.append({"path": self.rel(path), "reason": reason})
        return found

    def iter_segment(self, path: str, *, lazy: bool = False
                     ) -> Iterator[Event | tuple[str, int, str]]:
        """Yield events, then ("high", seq, ""); damage as ("malformed"|"unreadable", ...)."""
        from agent_journal.storage.segment_reader import read_segment

        scan = read_segment(path, lazy=lazy)
        yield from scan.events
        for seq, why in scan.malformed:
            yield ("malformed", seq, why)
        if scan.unreadable is not None:
            yield ("unreadable", 0, scan.unreadable)
        else:
            yield ("high", scan.high, "")


class Writer:
    """One writer's hold on this replica's current segment: one connection (opened when
    first needed, and only made into a segment by an append) serves the writer's tombstone
    look-ups there and its appends, so a hook opens the segment it appends to once, and,
    past ASK_DIRECTLY segments, the one small tombstone index for the others.

    Each append asks anew which segment is current, as every append does: when another
    writer rotated to a new one, or the file the connection holds is no longer the one at
    its path, the connection is opened afresh on the current one."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.paths = ws.segment_paths()
        self.current = ws.current_segment(self.paths)
        self.conn: sqlite3.Connection | None = None
        self.inode: tuple[int, int] | None = None  # (device, inode) of the file it holds
        # Its events table answered a look-up: init_segment made it and set user_version
        # in one transaction, so the segment is initialised.
        self.initialised = False

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        conn, self.conn = self.conn, None
        self.initialised = False
        if conn is not None:
            conn.close()

    def tombstoned_among(self, subjects: Iterable[str]) -> set[str]:
        """Workspace.tombstoned_among, the current segment asked through this hold."""
        return self.ws._tombstoned_among(subjects, self.paths, self._ask)

    def _ask(self, path: str, among: set[str] | None) -> set[str] | None:
        if path != self.current:
            return _tombstone_subjects(path, among)
        with writer_guard(self.ws.segments_dir):
            inode = _inode(path)
            if self.conn is not None and inode != self.inode:
                self.close()  # a compaction's copy took its place
            if self.conn is None:
                try:
                    self.conn = connect(path)
                except sqlite3.Error:
                    return None
                self.inode = inode
            found = _subjects_of_tombstones(self.conn, among)
        self.initialised = self.initialised or found is not None
        return found

    def append(self, events: list[Event], *, unique_subject: str | None = None,
               subject_type: str | None = None) -> int:
        """Workspace.append, through this hold.

        Each attempt runs under the swap guard (storage/swap_guard.py), which a
        compaction's copy of the segment waits for: the file the connection holds
        is the one under the segment's name from the attempt's check to its end.
        Should SQLite still refuse the write to a file no longer under the name
        (SQLITE_READONLY_DBMOVED, or a plain "readonly database" when the move is
        seen mid-write: a file system that cannot lock the folder), the append is
        made again, to the file now there (MOVED_RETRIES times)."""
        try:
            for attempt in range(MOVED_RETRIES):
                try:
                    with writer_guard(self.ws.segments_dir):
                        return self._append(events, unique_subject, subject_type)
                except sqlite3.OperationalError as exc:
                    if is_busy(exc) or attempt + 1 == MOVED_RETRIES or not (
                            _moved(exc) or (self.inode is not None
                                            and _inode(self.current) != self.inode)):
                        raise
                self.close()
            raise AssertionError("unreachable")  # the last attempt returns or raises
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                raise BusyError("the journal stayed locked by other writers; retry") from None
            self.close()  # a retry opens the segment afresh
            raise StorageError(f"cannot append to workspace {self.ws.name} "
                               f"({self.ws.segments_dir}): {describe_sqlite_error(exc)}"
                               ) from None
        except sqlite3.Error as exc:
            self.close()
            raise StorageError(f"cannot append to workspace {self.ws.name}: "
                               f"{describe_sqlite_error(exc)}") from None

    def open_current(self) -> sqlite3.Connection:
        """The connection to the current segment (as last asked), made and initialised
        if need be."""
        if self.conn is None:
            self.conn = self.ws.open_for_append(self.current)
            self.inode = _inode(self.current)
            self.initialised = True
        elif not self.initialised and \
                self.conn.execute("PRAGMA user_version").fetchone()[0] == 0:
            init_segment(self.conn, workspace=self.ws.name, replica=self.ws.root.replica_id)
            self.initialised = True
        return self.conn

    def _append(self, events: list[Event], unique_subject: str | None,
                subject_type: str | None) -> int:
        ws = self.ws
        current = ws.current_segment()
        if self.conn is not None and (current != self.current
                                      or _inode(current) != self.inode):
            self.close()
        self.current = current
        conn = self.open_current()
        if unique_subject is not None:
            current = os.path.basename(self.current)
            for path in ws.segment_paths():
                if os.path.basename(path) == current:
                    continue
                if ws._segment_has_subject(path, unique_subject, subject_type):
                    raise ConflictError(
                        f"{subject_type} {unique_subject} already exists in workspace "
                        f"{ws.name}")

        def work(c: sqlite3.Connection) -> int:
            if unique_subject is not None and has_subject(c, unique_subject, subject_type):
                raise ConflictError(
                    f"{subject_type} {unique_subject} already exists in workspace {ws.name}")
            return insert_events(c, events)

        return int(run_write(conn, work))


MOVED_RETRIES = 5  # appends made again after the segment was replaced under the writer


def _moved(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused a write because the file it had open is no longer there
    under its name (replaced by a compaction's copy)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code == 1032 or (code is not None and code & 0xFF == 8) or \
        "readonly database" in str(exc)


# Up to this many segments, a writer asks each one rather than the tombstone index.
ASK_DIRECTLY = 4


def _tombstone_subjects(path: str, among: set[str] | None = None) -> set[str] | None:
    """The subjects (of `among`, through the subject index; None: every one) that a row
    of the segment stored as a tombstone names (the type column alone decides: doubt
    means "do not write"); None when it cannot be opened or read. Raises BusyError when
    it stays locked."""
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error:
        return None
    try:
        return _subjects_of_tombstones(conn, among)
    finally:
        conn.close()


def _subjects_of_tombstones(conn: sqlite3.Connection, among: set[str] | None
                            ) -> set[str] | None:
    """_tombstone_subjects on an open connection to the segment."""
    try:
        if among is None:
            return {str(row[0]) for row in conn.execute(
                "SELECT subject FROM events WHERE type = 'tombstone'")}
        wanted = sorted(among)
        found: set[str] = set()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(str(row[0]) for row in conn.execute(
                "SELECT subject FROM events WHERE type = 'tombstone' "
                f"AND subject IN ({marks})", chunk))
        return found
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            # A locked segment is not an answer: the caller waits or gives up.
            raise BusyError("the journal stayed locked by other writers; retry") from None
        return None
    except sqlite3.Error:
        return None


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def observation_phases(ws: Workspace, ids: Iterable[str], *,
                       held: dict[str, sqlite3.Connection] | None = None
                       ) -> dict[str, tuple[set[Any], str]]:
    """For each observation id present in a readable segment: the statuses its events
    carry and the latest `ts` among them (`held`: see events_with_subjects).

    Used by import to recognise calls the live hook already captured. Rows that fail
    verification are skipped here; read commands report them.
    """
    found: dict[str, tuple[set[Any], str]] = {}
    for ev in ws.events_with_subjects(ids, "observation", held=held):
        subject = str(ev.id)
        statuses, latest = found.get(subject, (set(), ev.ts))
        statuses.add(ev.data.get("status"))
        found[subject] = (statuses, max(latest, ev.ts))
    return found


def latest_cwds(ws: Workspace, window: int) -> list[str]:
    """The distinct cwds (`data.cwd` of a hook's capture, `data.transcript.cwd` of an
    import's) named by each segment's `window` newest observations, the most recent
    first: a walk back from the newest row, never a read of the whole segment. A segment
    that cannot be read names none (read commands report it)."""
    seen: dict[str, str] = {}
    for segment in ws.segment_paths():
        try:
            conn = connect(segment, readonly=True)
        except (sqlite3.Error, OSError):
            continue
        try:
            rows = conn.execute(
                "SELECT cwd, ts FROM (SELECT ts, coalesce("
                "json_extract(CAST(body AS TEXT), '$.data.transcript.cwd'), "
                "json_extract(CAST(body AS TEXT), '$.data.cwd')) AS cwd FROM events "
                "WHERE type = 'observation' ORDER BY seq DESC LIMIT ?) "
                "WHERE typeof(cwd) = 'text' AND cwd != ''", (window,)).fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            conn.close()
        for cwd, ts in rows:
            if ts > seen.get(cwd, ""):
                seen[cwd] = ts
    return sorted(seen, key=lambda c: seen[c], reverse=True)
