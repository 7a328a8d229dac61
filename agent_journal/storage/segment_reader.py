"""Reading a segment: every row checked against its checksum, damage reported, not raised.

Invariants:
- Reads never trust a row: each body is checked against its checksum, and a
  row that fails is reported as malformed with its seq and reason.
- A segment that cannot be read is reported as unreadable with a one-line
  reason; nothing here raises a driver error to its caller.
- A peeked read (SQLite extracts a few JSON fields) is used only where
  SQLite's JSON agrees with Python's (`json_check`), so it never changes what
  a read derives.
"""

from __future__ import annotations

import gc
import sqlite3
from collections.abc import Callable

from agent_journal.core import codec
from agent_journal.core.errors import BusyError
from agent_journal.core.model import Event
from agent_journal.storage.connection import describe_sqlite_error, is_busy
from agent_journal.storage.segment import never_initialised, open_segment_for_read

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.storage.cut import Cut


class ReadResult:
    """What a whole-workspace read saw, including what it could not trust."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.unreadable: list[dict[str, str]] = []
        self.malformed: list[dict[str, Any]] = []
        self.segments: list[str] = []
        # segment relative path -> highest seq read (compaction's "did it grow" check)
        self.high_water: dict[str, int] = {}
        # Segments whose rows at or below a projection's mark were taken on the census
        # rule alone (storage/cache.not_appended), not verified row by row: a read that
        # trusts less than a full verification names them, and says so to its reader.
        self.census: list[str] = []

    @property
    def damaged(self) -> bool:
        return bool(self.unreadable or self.malformed)

    def take(self, rel: str, scan: SegmentScan) -> list[Event]:
        """Note what the read of segment `rel` met (its damage, or how far it
        read); its events are given back for the caller to keep."""
        self.malformed.extend({"segment": rel, "row": seq, "reason": why}
                              for seq, why in scan.malformed)
        if scan.unreadable is not None:
            self.unreadable.append({"path": rel, "reason": scan.unreadable})
        else:
            self.high_water[rel] = scan.high
        return scan.events


class SegmentScan:
    """One segment's rows: events, malformed rows, or why it could not be read."""

    __slots__ = ("events", "malformed", "unreadable", "high", "seqs", "last")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.malformed: list[tuple[int, str]] = []
        self.unreadable: str | None = None
        self.high = 0
        # Peeked and marked reads only: the seq of each event (a cache keeps rows by seq).
        self.seqs: list[int] = []
        # Marked reads only: the event id and checksum columns of the row at `high`,
        # as stored, when a row was read (for cache.row_mark).
        self.last: tuple[Any, Any] | None = None


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
                probe.execute(f"SELECT {check}, json_extract(t, '$.a'), json_type(t, '$.a'), "
                              "t -> '$.a' "
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
    number and `true` from 1; an absent path reads as null), one path as
    well as several; `types` are paths whose `json_type` comes back (null
    when absent). An observation read this way is a
    codec.PeekedEvent whose `peek` is the values followed by the types.
    Only bodies SQLite finds valid JSON (by `strict_json_check`) are peeked;
    any other stays lazy, and so does every body on a SQLite whose JSON
    parser is looser than Python's.
    """

    def __init__(self, values: tuple[str, ...], types: tuple[str, ...] = ()) -> None:
        self.values = values
        self.types = types
        # json_extract gives a JSON array only for two or more paths; for one it
        # gives the bare SQL value (a string unquoted, a large number as a float).
        # `->` gives the JSON text of one path exactly, NULL when it is absent.
        outputs = ([f"json_extract(t{', ?' * len(values)})"] if len(values) != 1
                   else ["COALESCE(t -> ?, 'null')"])
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
                 after: int = 0, marked: bool = False, cut: Cut | None = None,
                 observations: bool = True, entries_only: bool = False) -> SegmentScan:
    """Read and verify every row of one segment; damage is recorded, never raised.

    Rows read before a mid-file error are kept (a floor), and the segment is
    reported unreadable. `peek` implies `lazy`. With `peek`, or with `lazy` and
    `marked`, only rows whose seq is above `after` are read; `marked` also gives
    `scan.last` (for a reader that checks a segment grew by appends only,
    cache.not_appended).
    `cut` (not with `peek`) reads only the rows inside it (storage/cut.py).
    `observations=False` (not with `peek`) verifies observation rows as a lazy
    read does but keeps none of them, so a damaged one is still reported.
    `entries_only` (not with `peek` or `cut`) reads no observation row at all.
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
        if never_initialised(conn):
            return scan
        if peek is not None:
            _read_peeked(conn, peek, after, scan)
            return scan
        if lazy and marked:
            _read_marked(conn, after, scan)
            return scan
        where, params = ("", ()) if cut is None else cut.sql(conn, path)
        if entries_only:  # (not with `cut`)
            where = "type != 'observation'"
        rows = conn.execute("SELECT seq, event_id, body, checksum, type, subject, ts "
                            f"FROM events {'WHERE ' + where if where else ''} ORDER BY seq",
                            params)
        seq = 0
        for seq, event_id, body, digest, type_, subject, ts in rows:
            try:
                if type_ == "observation" and not observations:
                    decode_lazy(body, digest, event_id, type_, subject, ts)
                elif lazy and type_ == "observation":
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


def segment_extent(path: str, *, count: bool = True) -> tuple[int, int]:
    """(the highest seq, how many rows) of a segment; (0, 0) when it cannot be read (its
    damage is reported by the read that follows). Without `count` the rows are not
    counted (0): the highest seq alone is an index look-up."""
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error:
        return 0, 0
    try:
        if never_initialised(conn):
            return 0, 0
        if not count:
            return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events"
                                    ).fetchone()[0]), 0
        high, rows = conn.execute("SELECT coalesce(max(seq), 0), count(*) FROM events"
                                  ).fetchone()
        return int(high), int(rows)
    except sqlite3.Error:
        return 0, 0
    finally:
        conn.close()


def read_entries(path: str) -> SegmentScan:
    """Every row of one segment but its observations (entries, invalidations,
    tombstones, checkpoints), each verified; SQLite skips the observation rows
    without handing them to Python. Damage is recorded, never raised."""
    return read_segment(path, entries_only=True)


def _read_peeked(conn: sqlite3.Connection, peek: Peek, after: int, scan: SegmentScan
                 ) -> None:
    decode_lazy = codec.decode_lazy
    decode_peeked = codec.decode_peeked
    decode_checked = codec.decode_checked
    parse = codec.parse_json_text
    bad = codec.MalformedEvent
    events, seqs, malformed = scan.events, scan.seqs, scan.malformed
    one_value = len(peek.values) == 1  # then `values` is that one value's JSON
    scan.high = after
    for seq, event_id, body, digest, type_, subject, ts, values, *types in conn.execute(
            peek.sql, (*peek.params, after)):
        scan.high = seq
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


def _read_marked(conn: sqlite3.Connection, after: int, scan: SegmentScan) -> None:
    """The rows above `after`, observations lazily, and the mark of the last (for a
    reader that parses every body it keeps, so a peek would be read for nothing)."""
    decode_lazy = codec.decode_lazy
    decode_checked = codec.decode_checked
    bad = codec.MalformedEvent
    events, seqs, malformed = scan.events, scan.seqs, scan.malformed
    scan.high = after
    event_id = digest = None
    for seq, event_id, body, digest, type_, subject, ts in conn.execute(
            "SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
            "WHERE seq > ? ORDER BY seq", (after,)):
        scan.high = seq
        try:
            decode = decode_lazy if type_ == "observation" else decode_checked
            events.append(decode(body, digest, event_id, type_, subject, ts))
        except bad as exc:
            malformed.append((seq, str(exc)))
            continue
        seqs.append(seq)
    if scan.high > after:
        scan.last = (event_id, digest)


def structure_damage(path: str) -> str | None:
    """Why SQLite's own structural check fails on a segment, or None when it passes.

    Reads skip pages no query of theirs visits: a zeroed index page or the
    meta table's root page leaves every row readable while the file is
    corrupt, and a command that rewrites or copies the file would carry the
    damage on (or fail half-way). `PRAGMA quick_check` walks every b-tree
    page, the free list and the records' formats; unlike integrity_check
    it does not compare each index with its table, which costs about three
    times as much for damage the structural walk nearly always shows too.
    A file never given a schema (its writer died first) is an empty segment.
    """
    conn = None
    try:
        conn = open_segment_for_read(path)
        if never_initialised(conn):
            return None
        return quick_check(conn)
    except sqlite3.Error as exc:
        if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
            # Writers holding the lock past the busy timeout say nothing of the
            # bytes: calling that damage would send the user to repair a sound file.
            raise BusyError(f"{path} stayed locked by its writers; retry the command") from None
        return describe_sqlite_error(exc)
    finally:
        if conn is not None:
            conn.close()


def quick_check(conn: sqlite3.Connection) -> str | None:
    """structure_damage on an open segment; raises sqlite3.Error as reads do."""
    found = conn.execute("PRAGMA quick_check(1)").fetchone()
    verdict = "" if found is None else str(found[0])
    if verdict == "ok":
        return None
    return "quick_check: " + " ".join(verdict.replace("*** in database main ***", "").split())


def read_checked(path: str, read: Callable[[sqlite3.Connection], None]) -> str | None:
    """Open a segment read-only and, once it passes SQLite's structural check
    (`quick_check`), run `read` on it: why it could not be read, or None when it was
    (a segment never initialised is read as empty)."""
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        return describe_sqlite_error(exc)
    try:
        if never_initialised(conn):
            return None
        damage = quick_check(conn)
        if damage is not None:
            return damage
        read(conn)
    except sqlite3.Error as exc:
        return describe_sqlite_error(exc)
    finally:
        conn.close()
    return None


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


def malformed_through(path: str, high: int) -> set[int]:
    """The seqs of the rows at or below `high` that fail verification (checksum over
    the canonical bytes, the stored columns against the body), bodies left unparsed
    where a lazy read leaves them: what a reader that took those rows on the census
    rule (cache.not_appended) checks when it must answer for them strictly.
    Raises sqlite3.Error when the segment cannot be read."""
    decode_lazy = codec.decode_lazy
    decode_checked = codec.decode_checked
    bad = codec.MalformedEvent
    found: set[int] = set()
    conn = open_segment_for_read(path)
    try:
        if never_initialised(conn):
            return found
        for seq, event_id, body, digest, type_, subject, ts in conn.execute(
                "SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
                "WHERE seq <= ? ORDER BY seq", (high,)):
            try:
                decode = decode_lazy if type_ == "observation" else decode_checked
                decode(body, digest, event_id, type_, subject, ts)
            except bad:
                found.add(seq)
    finally:
        conn.close()
    return found
