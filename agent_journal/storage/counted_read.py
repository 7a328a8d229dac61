"""The counting read of coverage and decay: of an observation, only its id and kind.

A segment is read as `Workspace.read(lazy=True)` reads it (so the verdicts
are those every lazy read gives: `codec.decode_checked` for entries,
invalidations and tombstones, `codec.decode_lazy` for observations), but
counted while it streams: of each observation only its id and kind (the
kind its verified header reads, `codec.count_lazy`: no body is parsed and
no event built for it) are kept.
What a segment gave is kept between runs in the read projection at
<root>/cache/counts/<ws>.sqlite (storage/read_projection.py, the same record
layout and rules: `head` is (high-water, malformed rows, events by (type,
kind)), `others` the other events as `model.event_values`, `subjects` the
observation ids), under the segment's `verified_mark.Mark`.

Invariants:
- `read_counted` gives the counts, ids, events and damage a direct read
  gives, whichever segments the projection answered for (tests hold the two
  equal). Every segment the read passes has passed SQLite's structural check
  (`quick_check`) when it was read; one that fails it, or cannot be read to
  the end, is never kept: it is read directly every time (`Counted.loose`),
  and its verdict given in `Counted.structure`.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent_journal.core import codec
from agent_journal.core.model import OBSERVATION, event_values, events_from_values
from agent_journal.storage.compaction_rows import READ_SLICE_ROWS
from agent_journal.storage.connection import describe_sqlite_error
from agent_journal.storage.read_projection import COUNTS_AREA, Projection, open_projection
from agent_journal.storage.segment import never_initialised, open_segment_for_read
from agent_journal.storage.segment_reader import ReadResult, quick_check
from agent_journal.storage.verified_mark import CHANGED, SAME, Before, Fold, check
from agent_journal.storage.workspace import Workspace

# Rows above a seq, at most so many, in seq order: what the counting read
# fetches and folds, and what `verified_mark.check` fetches again.
_ROWS_SQL = ("SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
             "WHERE seq > ? ORDER BY seq LIMIT ?")


def fetch_rows(conn: sqlite3.Connection, after: Any, count: int) -> list[tuple[Any, ...]]:
    """`count` rows above `after` as the counting read fetches them."""
    return conn.execute(_ROWS_SQL, (after, count)).fetchall()


class CountPart:
    """What the counting read gave of one segment (or of its rows above a mark)."""

    __slots__ = ("rel", "high", "malformed", "counts", "subjects", "others", "fold",
                 "unreadable")

    def __init__(self, rel: str, high: int = 0, fold: Fold | None = None) -> None:
        self.rel = rel
        self.high = high
        self.malformed: list[tuple[int, str]] = []
        self.counts: Counter[tuple[str, str]] = Counter()
        self.subjects: list[str] = []
        self.others: list[tuple[Any, ...]] = []  # events but observations, as event values
        self.fold = Fold() if fold is None else Fold(fold.value, fold.chain)
        self.unreadable: str | None = None


def count_segment(path: str, rel: str, after: int = 0, fold: Fold | None = None) -> CountPart:
    """The counting read of a segment's rows above `after` (the whole file is
    still checked), their slices folded on from `fold`."""
    part = CountPart(rel, after, fold)
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        part.unreadable = describe_sqlite_error(exc)
        return part
    try:
        if never_initialised(conn):
            return part
        damage = quick_check(conn)
        if damage is not None:
            part.unreadable = damage
            return part
        _count_rows(conn, part, after)
    except sqlite3.Error as exc:
        part.unreadable = describe_sqlite_error(exc)
    finally:
        conn.close()
    return part


def _count_rows(conn: sqlite3.Connection, part: CountPart, after: int) -> None:
    count_lazy, decode_lazy, decode_checked = codec.count_lazy, codec.decode_lazy, \
        codec.decode_checked
    lazy_kind, bad = codec.lazy_kind, codec.MalformedEvent
    counts, subjects, others = part.counts, part.subjects, part.others
    kinds: dict[str, int] = {}  # observations by kind
    start: float = after if after else float("-inf")
    while True:
        rows = fetch_rows(conn, start, READ_SLICE_ROWS)
        part.fold.add(start, rows)
        if rows:
            part.high = rows[-1][0]
        # The verdict `Workspace.read(lazy=True)` gives each row: most
        # observations are counted with no event built for them; the rest is
        # decoded here, as that read decodes it.
        for seq, event_id, body, digest, type_, subject, ts in count_lazy(rows, kinds, subjects):
            try:
                if type_ != OBSERVATION:
                    ev = decode_checked(body, digest, event_id, type_, subject, ts)
                    others.append(event_values(ev))
                    counts[(ev.type, ev.kind)] += 1
                    continue
                kind = lazy_kind(decode_lazy(body, digest, event_id, type_, subject, ts))
            except bad as exc:
                part.malformed.append((seq, str(exc)))
                continue
            counts[(OBSERVATION, kind)] += 1
            subjects.append(subject)  # its verdict holds that it is the body's id
        if len(rows) < READ_SLICE_ROWS:
            break
        start = rows[-1][0]
    counts.update({(OBSERVATION, kind): n for kind, n in kinds.items()})


class Counted:
    """The counting read of a workspace: `result` holds every event but the
    observations, and the damage as a direct read reports it; `counts` the
    events by (type, kind), `observed` every observation id read. A segment
    that fails SQLite's check or cannot be read to the end is read as
    `Workspace.read` reads it: its events are in `loose` (uncounted), and
    the check's verdict on it in `structure`."""

    def __init__(self) -> None:
        self.result = ReadResult()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.observed: set[str] = set()
        self.loose: list[Any] = []
        self.structure: list[dict[str, str]] = []


def read_counted(ws: Workspace) -> Counted:
    """Every segment counted, from the read projection where its marks hold."""
    import os

    from agent_journal.storage.segment_reader import read_segment, structure_damage

    got = Counted()
    result = got.result
    with _maybe_projection(ws) as projection:
        for path in ws.segment_paths():
            rel, name = ws.rel(path), os.path.basename(path)
            result.segments.append(rel)
            part = _counted_segment(projection, path, rel, name)
            if part is None:  # damaged: read directly, as every time
                got.loose.extend(result.take(rel, read_segment(path, lazy=True)))
                reason = structure_damage(path)
                if reason is not None:
                    got.structure.append({"path": rel, "reason": reason})
                continue
            high, malformed, counts = part[0]
            got.counts.update(counts)
            got.observed.update(part[2])
            result.events.extend(events_from_values(part[1]))
            result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                    for seq, why in malformed)
            result.high_water[rel] = high
    return got


def _counted_segment(projection: Projection | None, path: str, rel: str, name: str
                     ) -> list[Any] | None:
    """[head, others, subjects] of a segment, from the projection where its mark
    holds (brought up to date); None when the segment is damaged."""
    before = Before(path)
    record = None if projection is None else projection.records.get(name)
    state = CHANGED if record is None else check(path, record.mark, fetch_rows)
    if projection is not None and record is not None:
        got = projection.load(record, "head", "others", "subjects")
        if got is not None and state == SAME:
            return got
        if got is not None and state != CHANGED:  # GROWN: read what is above the mark
            part = count_segment(path, rel, record.mark.high, record.mark.fold)
            if part.unreadable is not None:
                projection.drop(name)
                return None
            (_high, malformed, counts), others, subjects = got
            part.malformed[:0] = malformed
            part.counts.update(counts)
            part.subjects[:0] = subjects
            part.others[:0] = others
            return _kept(projection, name, before, part)
        projection.drop(name)
    part = count_segment(path, rel)
    if part.unreadable is not None:
        return None
    return _kept(projection, name, before, part)


def _kept(projection: Projection | None, name: str, before: Before, part: CountPart
          ) -> list[Any]:
    head = (part.high, part.malformed, dict(part.counts))
    if projection is not None:
        mark = before.mark(part.high, part.fold)
        if mark is not None:
            projection.put(name, mark, head, part.others, part.subjects, None)
    return [head, part.others, part.subjects]


@contextmanager
def _maybe_projection(ws: Workspace) -> Iterator[Projection | None]:
    """The projection, unless the workspace has no segment (nothing is then
    made under the root)."""
    if not ws.segment_paths():
        yield None
        return
    with open_projection(ws, COUNTS_AREA) as projection:
        yield projection

