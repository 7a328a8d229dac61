"""One segment read for a compaction: the exact decoder and its fast path, side by side.

Invariant: `read_segment_for_compaction` gives, for any segment, exactly the
part a read through the exact decoder alone gives (`codec.decode_checked`, the
verdict every reader gives): the same rows (as `model.event_values` tuples,
observation data cut to its `artifact`), malformed rows, high-water mark,
tombstone checksums and purged rewrites. The fast paths only decide which rows
may skip the exact decoder; tests/test_compaction_rows.py holds both paths to
one suite of rows. A part travels between processes as `SegmentRead.packed()`.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

from agent_journal.core import codec
from agent_journal.core.model import Event, event_values, events_from_values
from agent_journal.core.observation_ages import Summary, summarize
from agent_journal.storage.connection import describe_sqlite_error
from agent_journal.storage.observation_layout import ESCAPED_LETTER, layout
from agent_journal.storage.observation_layout import PLAIN as _PLAIN
from agent_journal.storage.observation_layout import Layouts as FastPath
from agent_journal.storage.segment import never_initialised, open_segment_for_read
from agent_journal.storage.segment_edit import text_is_utf8
from agent_journal.storage.segment_reader import json_check, quick_check, strict_json_check
from agent_journal.storage.verified_mark import Fold

# Observation rows are most of a journal, and parsing each body in Python cost
# more than all the rest of a compaction. A row SQLite finds to be JSON by a
# test no looser than Python's json (`strict_json_check`) and laid out the way
# `codec` writes it (storage/observation_layout.py shows which) is instead
# read without the exact decoder; anything unusual gets
# `codec.decode_checked`, the verdict every reader gives. Observation data is
# not parsed at all unless it may hold an `artifact` key, the one part a plan
# reads: a text with `"artifact"` anywhere has that stretch parsed (which
# fails unless it is one value), and a text without has data `{}` (unless an
# escape could spell a key's letter: then the exact decoder reads it).

def compaction_rows_sql(version: tuple[int, int, int], *, about: bool = False) -> str:
    """The rows of a segment past a seq (first parameter) in seq order, at most
    the second parameter of them; the last column is 1 for an observation
    body that passed the JSON check (NULL for every other row, and for every
    row where there is no check). `about`: instead, the observations whose
    subject is in the JSON array given as the first parameter, up to the
    seq given as the second, in seq order."""
    check = strict_json_check(version)
    checked = ("NULL" if check is None else
               f"CASE WHEN type = 'observation' AND {check} THEN 1 END")
    where = ("type = 'observation' AND subject IN (SELECT value FROM json_each(?)) "
             "AND seq <= ? ORDER BY seq") if about else "seq > ? ORDER BY seq LIMIT ?"
    return (f"SELECT seq, event_id, type, body, checksum, subject, ts, {checked} "
            "FROM (SELECT seq, event_id, type, body, checksum, subject, ts, "
            f"CAST(body AS TEXT) AS t FROM events WHERE {where}) "
            "ORDER BY seq")


# Rows fetched per read statement. A segment is read in slices, each fetched
# whole before Python looks at it, so the read lock (a rollback journal's
# shared lock keeps every writer of the segment from committing) is held
# while SQLite copies a slice out, never while Python decodes it: a hook
# appending to the segment waits for one slice, not the segment's read.
# Rows are only ever appended above the highest seq (deletions come from
# the applied run that holds the workspace lock), so slices read one after
# another see what one read at the end would, rows appended meanwhile
# included; the high-water mark is the last row read.
READ_SLICE_ROWS = 2000


_COMPACTION_ROWS = compaction_rows_sql(sqlite3.sqlite_version_info)


_EXACT_ROWS = compaction_rows_sql((0, 0, 0))


_checksum = codec.checksum


def _checked_text(body: Any, digest: Any) -> str | None:
    """A blob body whose checksum is right, as strict UTF-8 text; else None."""
    if type(body) is not bytes or digest != _checksum(body):
        return None
    try:
        return body.decode()
    except UnicodeDecodeError:
        return None


def _fast_observation(fast: FastPath, body: Any, digest: Any, event_id: Any, subject: Any,
                      ts: Any) -> tuple[Any, ...] | None:
    """The observation row as the exact decoder reads it (data reduced to its
    artifact), as `model.event_values`; None when only the exact decoder may
    judge it. Only for a body that passed `strict_json_check`."""
    found = layout(fast, body, digest, event_id, subject, ts)
    if found is None:
        return None
    text, start, end, author, (kind, replica, schema, session) = found
    data: dict[str, Any] = {}
    # The fields around data are plain strings: `"artifact"` found outside data
    # (as a whole value) only costs a parse, and they hold no backslash.
    if '"artifact"' in text:
        try:
            parsed = codec.parse_json_text(text[start:end])
        except codec.MalformedEvent:
            return None
        artifact = parsed.get("artifact")
        if artifact is not None:
            data = {"artifact": artifact}
    elif "\\u00" in text and ESCAPED_LETTER.search(text, start, end):
        return None  # a key may be spelt with escapes; the exact decoder reads it
    return (event_id, "observation", kind, subject, ts, author, session, replica, data,
            schema)


# A tombstone exactly as codec writes one whose data is a reason and the
# purged flag: every field a plain string (the text is the value), the
# schema a small integer, nothing else anywhere. The whole body is matched,
# so it is exactly the JSON the exact decoder parses to these values.
_TOMBSTONE = re.compile(
    rf'\{{"author":"({_PLAIN})","data":\{{"purged":(false|true),"reason":"({_PLAIN})"\}},'
    rf'"eventId":"({_PLAIN})","id":"({_PLAIN})","kind":"({_PLAIN})","replica":"({_PLAIN})",'
    rf'"schema":(-?(?:0|[1-9][0-9]{{0,17}})),"session":(?:null|"([^"\\\x00-\x1f]*)"),'
    rf'"ts":"({_PLAIN})","type":"tombstone"\}}')


_UNPURGED = b'"data":{"purged":false,'


_PURGED = b'"data":{"purged":true,'


# A tombstone's purged rewrite: the new body and its checksum. The body is
# None when the row read matched `_TOMBSTONE` in a UTF-8 segment: there the
# flag's text occurs once, so SQLite's replace() of it in the stored body is
# exactly the new body, and only the checksum is sent (the row is updated
# only while its checksum is still the one read), rather than each body as
# JSON text built under the GIL.
Rewrite = tuple[bytes | None, str]


def _fast_tombstone(body: Any, digest: Any, event_id: Any, subject: Any, ts: Any,
                    in_place: bool) -> tuple[tuple[Any, ...], Rewrite | None] | None:
    """The tombstone row as the exact decoder reads it (`model.event_values`),
    with its purged rewrite when it is not purged yet; None when only the
    exact decoder may judge it. A matched body is in canonical layout, so its
    rewrite is the same bytes with the flag turned; `in_place`, the rewrite
    leaves that to SQLite (see `Rewrite`)."""
    text = _checked_text(body, digest)
    if text is None:
        return None
    m = _TOMBSTONE.fullmatch(text)
    if m is None:
        return None
    author, purged, reason, body_id, body_subject, kind, replica, schema, session, body_ts \
        = m.groups()
    if body_id != event_id or body_subject != subject or body_ts != ts or not reason.strip():
        return None
    rewrite = None
    if purged == "false":
        new = body.replace(_UNPURGED, _PURGED, 1)
        rewrite = (None if in_place else new, _checksum(new))
    return ((event_id, "tombstone", kind, subject, ts, author, session, replica,
             {"purged": purged == "true", "reason": reason}, int(schema)), rewrite)


class SegmentRead:
    """One segment's share of a CompactionRead. Its events are read as tuples
    of field values (`model.event_values`), and made Events in the process
    that plans."""

    __slots__ = ("rel", "rows", "events", "tombstones", "rewrites", "high", "malformed",
                 "unreadable", "fold", "split")

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.rows: list[tuple[Any, ...]] = []
        self.events: list[Event] = []  # `rows` made Events, once `made_events`
        self.tombstones: dict[str, str] = {}  # tombstone event id -> stored checksum
        # tombstone event id -> its purged rewrite (see read_located)
        self.rewrites: dict[str, Rewrite] = {}
        self.high: int | None = 0  # None: the segment could not be read to the end
        self.malformed: list[dict[str, Any]] = []
        self.unreadable: str | None = None
        # The rows as fetched, folded (verified_mark.Fold), for the read projection.
        self.fold = Fold()
        # Once `split_plain`: (the ids of every observation read, events by
        # (type, kind), the ages of the plain observations, which `rows` no
        # longer holds)
        self.split: tuple[list[str], dict[tuple[str, str], int], Summary] | None = None

    def packed(self, rows: list[Any] | None = None) -> tuple[Any, ...]:
        """The share as plain values, cheap to send from a worker process;
        `rows` in place of its rows, if given."""
        return (self.rel, self.rows if rows is None else rows, self.tombstones,
                self.rewrites, self.high, self.malformed, self.unreadable, self.fold.value,
                self.fold.chain, self.split)

    @classmethod
    def unpacked(cls, packed: tuple[Any, ...]) -> SegmentRead:
        part = cls(packed[0])
        (_, part.rows, part.tombstones, part.rewrites, part.high, part.malformed,
         part.unreadable, value, chain, part.split) = packed
        part.fold = Fold(value, chain)
        return part

    def split_plain(self) -> SegmentRead:
        """Leave in `rows` every row but the plain observations (those holding
        no artifact: nine rows in ten of a journal), which `split` then
        stands for. Done where the rows were read (a worker process sends
        the split part), so they never cross a pipe or are all held at once."""
        if self.split is None:
            rows = self.rows
            observation = "observation"
            plain = [r for r in rows if r[1] == observation and not r[8]]
            self.split = ([r[3] for r in rows if r[1] == observation],
                          dict(Counter(map(itemgetter(1, 2), rows))),
                          summarize([r[3] for r in plain], [r[4] for r in plain]))
            self.rows = [r for r in rows if r[1] != observation or r[8]]
        return self

    def made_events(self, named: set[str] | None = None) -> SegmentRead:
        """Make Events of the rows: all of them, or, given the ids tombstones
        name, only those `kept_rows` keeps."""
        self.events = events_from_values(self.rows if named is None
                                         else kept_rows(self.rows, named))
        self.rows = []
        return self


def tombstone_subjects(rows: list[tuple[Any, ...]]) -> list[str]:
    """The ids the tombstones among these rows (as `event_values`) name."""
    return [row[3] for row in rows if row[1] == "tombstone"]


def kept_rows(rows: list[tuple[Any, ...]], named: set[str]) -> list[tuple[Any, ...]]:
    """What a plan without an observation TTL reads of these rows: all but the
    observations no tombstone names and that hold no artifact."""
    return [row for row in rows if row[1] != "observation" or row[3] in named or row[8]]


class KeptSoFar:
    """Parts cut down by `kept_rows` as they are read, with the ids named by
    the tombstones read so far. A tombstone read later (here or elsewhere)
    may name an observation of an earlier part: `grown` finds the parts that
    then keep more rows. Their rows are held until then."""

    def __init__(self) -> None:
        self.named: set[str] = set()
        self.held: list[tuple[list[tuple[Any, ...]], list[str]]] = []  # rows, their ids named

    def keep(self, rows: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], list[str]]:
        """The rows a part keeps so far, and the ids its own tombstones name."""
        subjects = tombstone_subjects(rows)
        self.named.update(subjects)
        self.held.append((rows, subjects))
        return kept_rows(rows, self.named), subjects

    def grown(self, elsewhere: set[str]) -> dict[int, list[tuple[Any, ...]]]:
        """Part number (in the order kept) -> the rows it keeps now, for each
        part that may keep more, given the ids tombstones elsewhere name.

        Named since a part was kept: by tombstones of later parts, or
        elsewhere. A part whose rows meet none of those ids is complete (a set
        test in C, rather than refiltering every row in Python).
        """
        import operator

        later = set(elsewhere)
        everything = self.named | later
        grown = {}
        row_subject = operator.itemgetter(3)
        for n in range(len(self.held) - 1, -1, -1):
            rows, subjects = self.held[n]
            if not later.isdisjoint(map(row_subject, rows)):
                grown[n] = kept_rows(rows, everything)
            later.update(subjects)
        return grown


def read_segment_for_compaction(path: str, rel: str, fast: FastPath, after: int = 0,
                                fold: Fold | None = None) -> SegmentRead:
    """The segment's part; with `after`, of its rows above that seq only (the
    whole file is still checked), their slices folded on from `fold`."""
    part = SegmentRead(rel)
    part.high = after
    if fold is not None:
        part.fold = Fold(fold.value, fold.chain)
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        part.high = None
        part.unreadable = describe_sqlite_error(exc)
        return part
    try:
        if never_initialised(conn):
            return part
        # A plan that rewrites the file must not start from one SQLite finds
        # corrupt where no row read goes (an index page, the meta table).
        damage = quick_check(conn)
        if damage is not None:
            part.high = None
            part.unreadable = damage
            return part
        utf8 = text_is_utf8(conn)
        _read_rows(conn, part, fast, _rows_sql(utf8), in_place=utf8, after=after)
    except sqlite3.Error as exc:
        part.high = None
        part.unreadable = describe_sqlite_error(exc)
    finally:
        conn.close()
    return part


def _rows_sql(utf8: bool) -> str:
    return _COMPACTION_ROWS if json_check() and utf8 else _EXACT_ROWS


def fetch_rows(conn: sqlite3.Connection, after: Any, count: int) -> list[tuple[Any, ...]]:
    """`count` rows above `after` exactly as a compaction read fetches them
    (the query `verified_mark.check` runs again)."""
    return conn.execute(_rows_sql(text_is_utf8(conn)), (after, count)).fetchall()


def _slices(conn: sqlite3.Connection, sql: str, after: float = float("-inf"),
            fold: Fold | None = None) -> Iterator[tuple[Any, ...]]:
    """Every row of `sql` (see `compaction_rows_sql`) above `after` (by default
    below every integer seq, the lowest included), fetched a slice at a time,
    each slice folded into `fold`."""
    while True:
        rows = conn.execute(sql, (after, READ_SLICE_ROWS)).fetchall()
        if fold is not None:
            fold.add(after, rows)
        yield from rows
        if len(rows) < READ_SLICE_ROWS:
            return
        after = rows[-1][0]


def stamps_about(path: str, subjects: list[str], upto: int) -> list[tuple[Any, ...]] | str:
    """(event id, subject, ts) of the segment's observations about these ids, up
    to seq `upto`, as its columns hold them (for a segment whose rows this
    run has just judged whole); or why the segment cannot be read."""
    import json

    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        return describe_sqlite_error(exc)
    try:
        return conn.execute(
            "SELECT event_id, subject, ts FROM events WHERE type = 'observation' AND subject "
            "IN (SELECT value FROM json_each(?)) AND seq <= ? ORDER BY seq",
            (json.dumps(subjects), upto)).fetchall()
    except sqlite3.Error as exc:
        return describe_sqlite_error(exc)
    finally:
        conn.close()


def rows_about(path: str, rel: str, fast: FastPath, subjects: list[str], upto: int
               ) -> SegmentRead:
    """The part of a segment's observations about these ids only, up to seq
    `upto`, each judged exactly as a whole read judges it (no fold, no
    structural check: for a segment just read, or whose mark the read
    projection has just seen hold)."""
    import json

    part = SegmentRead(rel)
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        part.unreadable = describe_sqlite_error(exc)
        return part
    try:
        utf8 = text_is_utf8(conn)
        version = sqlite3.sqlite_version_info if json_check() and utf8 else (0, 0, 0)
        rows = conn.execute(compaction_rows_sql(version, about=True),
                            (json.dumps(subjects), upto)).fetchall()
        _judge_rows(rows, part, fast, in_place=utf8)
    except sqlite3.Error as exc:
        part.unreadable = describe_sqlite_error(exc)
    finally:
        conn.close()
    return part


def _read_rows(conn: sqlite3.Connection, part: SegmentRead, fast: FastPath, sql: str, *,
               in_place: bool, after: int = 0) -> None:
    _judge_rows(_slices(conn, sql, after if after else float("-inf"), part.fold), part, fast,
                in_place=in_place)


def _judge_rows(rows: Iterable[tuple[Any, ...]], part: SegmentRead, fast: FastPath, *,
                in_place: bool) -> None:
    """Each row's verdict into the part, in order; `high` becomes the last seq."""
    append_event = part.rows.append
    malformed = part.malformed
    rel = part.rel
    seq = part.high
    for seq, event_id, type_, body, digest, subject, ts, json_ok in rows:
        values = None
        if json_ok is not None:
            values = _fast_observation(fast, body, digest, event_id, subject, ts)
        elif type_ == "tombstone":
            found = _fast_tombstone(body, digest, event_id, subject, ts, in_place)
            if found is not None:
                values, rewrite = found
                part.tombstones[event_id] = digest
                if rewrite is not None:
                    part.rewrites[event_id] = rewrite
        if values is None:
            # The same strict verdict every other read gives (codec.decode_checked).
            try:
                ev = codec.decode_checked(body, digest, event_id, type_, subject, ts)
            except codec.MalformedEvent as exc:
                malformed.append({"segment": rel, "row": seq, "reason": str(exc)})
                continue
            if ev.type == "tombstone":
                part.tombstones[event_id] = digest
                if ev.data.get("purged") is False:
                    part.rewrites[event_id] = codec.encode(ev.purged())
            values = event_values(ev)
            if ev.type == "observation":
                artifact = ev.data.get("artifact")
                values = (*values[:8], {} if artifact is None else {"artifact": artifact},
                          values[9])
        append_event(values)
    part.high = seq  # the last row's: rows come in seq order
