"""A workspace's events in time order, read without holding the workspace.

Invariants:
- Events come out in (ts, eventId) order (forward) or its exact reverse
  (backward), across every segment, each verified (checksum, shape, lookup
  columns) before it is handed out; a row that fails is recorded in
  `malformed` and skipped, a segment that cannot be read in `unreadable`.
- Memory stays flat in the size of the journal: the order is settled by
  SQLite over the rows' lookup columns (`ts`, `event_id`, `seq`; never a
  body), and bodies are fetched in small batches for the rows about to be
  handed out (a forward batch is one join of a range of the sorted order
  with the rows it names). A backward read fetches only as many bodies as its
  consumer takes (`--last 20` reads twenty-odd bodies).
- No lock is held between batches: each batch is its own short read, so a
  consumer that stops to print (or a pager) never blocks writers. A row
  removed meanwhile (compaction) is simply not handed out; rows appended
  after the read began are not part of it.

This is the only place the timeline's SQL lives.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator
from typing import Any

from agent_journal.core import codec
from agent_journal.core.model import Event
from agent_journal.storage.connection import describe_sqlite_error
from agent_journal.storage.cut import Cut
from agent_journal.storage.observation_layout import Layouts, observation_event
from agent_journal.storage.segment import never_initialised, open_segment_for_read
from agent_journal.storage.workspace import Workspace

BATCH = 500
# Page cache of each open segment and of its temp store. Every segment stays open
# for the whole read, and SQLite's default (2 MiB each) came to several hundred
# MiB over a hundred segments; the reads here are sequential, which a small
# cache serves as well.
CACHE_KIB = 256
# Rows of the first backward page: enough for most `--last N` without a full sort.
FIRST_PAGE = 256


class _Segment:
    """One segment's rows in order: headers sorted by SQLite (a top-N pass for
    the newest rows, a private sorted temp table for the rest), bodies by seq."""

    def __init__(self, reader: TimeOrder, path: str, conn: sqlite3.Connection,
                 index: int) -> None:
        self.reader = reader
        # Breaks a tie between two copies of one event in two segments, so
        # ordering never falls through to comparing events.
        self.index = index
        self.path = path
        self.rel = reader.ws.rel(path)
        self.conn = conn
        self.sorted_rows = 0
        # `bound`: the rows this read takes (the cut, and with `pinned` the rows
        # there when the segment was opened); `where` adds the types asked for.
        self.bound, self.bound_params = (("1", ()) if reader.cut is None
                                         else reader.cut.sql(conn, path))
        if reader.pinned:
            high = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
            self.bound = f"({self.bound}) AND seq <= ?"
            self.bound_params = (*self.bound_params, high)
        self.where, self.params = self.bound, self.bound_params
        if reader.types is not None:
            self.where = f"({self.where}) AND type IN ({','.join('?' * len(reader.types))})"
            self.params = (*self.params, *reader.types)

    def _bodies(self, headers: list[tuple[str, str, int]]) -> Iterator[Event]:
        seqs = [h[2] for h in headers]
        marks = ",".join("?" * len(seqs))
        found = {row[0]: row for row in self.conn.execute(
            "SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
            f"WHERE seq IN ({marks})", seqs)}
        rows = (found[seq] for _, _, seq in headers if seq in found)  # else removed since
        return self._decoded(rows)

    def _decoded(self, rows: Iterator[tuple[Any, ...]] | list[tuple[Any, ...]]
                 ) -> Iterator[Event]:
        """Verified events of (seq, event_id, body, checksum, type, subject, ts) rows.

        A lazy order gives a lazy read's verdicts but parses at once: its one
        reader (show) uses every body. A sound row passes the strict decoder;
        one that fails it gets the lazy decoder's own verdict. An observation
        in codec's layout is the strict decoder's event without its checks
        (storage/observation_layout.py): only its data is parsed.
        """
        lazy = self.reader.lazy
        seen = self.reader.layouts
        decode_lazy = codec.decode_lazy
        decode_checked = codec.decode_checked
        bad = codec.MalformedEvent
        for seq, event_id, body, digest, type_, subject, ts in rows:
            try:
                ev = None if type_ != "observation" else observation_event(
                    seen, body, digest, event_id, subject, ts)
                if ev is None:
                    try:
                        ev = decode_checked(body, digest, event_id, type_, subject, ts)
                    except bad:
                        if not (lazy and type_ == "observation"):
                            raise
                        ev = decode_lazy(body, digest, event_id, type_, subject, ts)
                yield ev
            except bad as exc:
                self.reader.malformed.append({"segment": self.rel, "row": seq,
                                              "reason": str(exc)})

    def sort(self) -> tuple[tuple[str, str], tuple[str, str]] | None:
        """Put this segment's rows in order; ((ts, eventId) of the first, of the
        last), or None when it has none.

        The sort runs once, inside SQLite, over the lookup columns only; its
        result is a temp table (SQLite's temp store, not this process's heap)
        whose rowids, 1 to n, are the order.
        """
        c = self.conn
        c.execute("DROP TABLE IF EXISTS temp.timeline_order")
        c.execute("CREATE TEMP TABLE timeline_order AS SELECT seq, ts, event_id FROM main.events "
                  f"WHERE {self.where} ORDER BY ts, event_id", self.params)
        self.sorted_rows = c.execute("SELECT count(*) FROM temp.timeline_order").fetchone()[0]
        if not self.sorted_rows:
            return None
        ends = c.execute("SELECT ts, event_id FROM temp.timeline_order WHERE rowid IN (1, ?) "
                         "ORDER BY rowid", (self.sorted_rows,)).fetchall()
        return tuple(ends[0]), tuple(ends[-1])  # type: ignore[return-value]

    def forward(self) -> Iterator[tuple[str, str, int, Event]]:
        """The rows `sort` ordered: each batch one join of a range of that order
        with the rows it names, handed over in order."""
        c = self.conn
        end = self.sorted_rows
        index = self.index
        for first in range(0, end, BATCH):
            page = c.execute(
                "SELECT e.seq, e.event_id, e.body, e.checksum, e.type, e.subject, e.ts "
                "FROM temp.timeline_order AS o JOIN main.events AS e ON e.seq = o.seq "
                "WHERE o.rowid > ? AND o.rowid <= ? ORDER BY o.rowid",
                (first, first + BATCH)).fetchall()
            for ev in self._decoded(page):
                yield ev.ts, ev.event_id, index, ev

    def backward(self) -> Iterator[tuple[str, str, int, Event]]:
        # The newest rows come from one top-N pass of SQLite over the lookup
        # columns (all `--last 20` needs); a consumer that wants more gets the
        # rest of the order from a sorted temp table, as forward does.
        c = self.conn
        page = c.execute(f"SELECT ts, event_id, seq FROM events WHERE {self.where} "
                         "ORDER BY ts DESC, event_id DESC LIMIT ?",
                         (*self.params, FIRST_PAGE)).fetchall()
        yield from self._handed(page)
        if len(page) < FIRST_PAGE:
            return
        ts, event_id = page[-1][0], page[-1][1]
        c.execute("DROP TABLE IF EXISTS temp.timeline_back")
        c.execute("CREATE TEMP TABLE timeline_back AS SELECT seq, ts, event_id FROM main.events "
                  f"WHERE ({self.where}) AND (ts < ? OR (ts = ? AND event_id < ?)) "
                  "ORDER BY ts DESC, event_id DESC", (*self.params, ts, ts, event_id))
        last = 0
        while True:
            rest = c.execute("SELECT rowid, ts, event_id, seq FROM temp.timeline_back "
                             "WHERE rowid > ? ORDER BY rowid LIMIT ?", (last, BATCH)).fetchall()
            if not rest:
                break
            last = rest[-1][0]
            yield from self._handed([(t, e, q) for _, t, e, q in rest])

    def _handed(self, headers: list[tuple[str, str, int]]
                ) -> Iterator[tuple[str, str, int, Event]]:
        index = self.index
        for start in range(0, len(headers), BATCH):
            for ev in self._bodies(headers[start:start + BATCH]):
                yield ev.ts, ev.event_id, index, ev


class TimeOrder:
    """Every event of a workspace (inside `cut`, if given; of `types`, if given),
    in time order. `lazy` verifies observations as a lazy read does
    (codec.decode_lazy: their bodies are parsed when first used). `pinned`
    takes only the rows each segment held when it was opened, so every pass
    of one read (`others`, `subject_counts`, `forward`) sees the same rows."""

    def __init__(self, ws: Workspace, cut: Cut | None = None, *,
                 types: tuple[str, ...] | None = None, lazy: bool = False,
                 pinned: bool = False) -> None:
        self.ws = ws
        self.cut = cut
        self.types = types
        self.lazy = lazy
        self.pinned = pinned
        self.unreadable: list[dict[str, str]] = []
        self.malformed: list[dict[str, Any]] = []
        self.segments: list[str] = []
        self._open: list[_Segment] = []
        self.layouts = Layouts()

    def __enter__(self) -> TimeOrder:
        for path in self.ws.segment_paths():
            self.segments.append(self.ws.rel(path))
            try:
                conn = open_segment_for_read(path)
            except sqlite3.Error as exc:
                self._unreadable(path, exc)
                continue
            try:
                if never_initialised(conn):
                    conn.close()
                    continue
                conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
                conn.execute(f"PRAGMA temp.cache_size = -{CACHE_KIB}")
                self._open.append(_Segment(self, path, conn, len(self._open)))
            except sqlite3.Error as exc:
                conn.close()
                self._unreadable(path, exc)
        return self

    def __exit__(self, *exc: object) -> None:
        for seg in self._open:
            seg.conn.close()
        self._open = []

    def _unreadable(self, path: str, exc: sqlite3.Error) -> None:
        self.unreadable.append({"path": self.ws.rel(path), "reason": describe_sqlite_error(exc)})

    def _guarded(self, seg: _Segment, rows: Iterator[tuple[str, str, int, Event]]
                 ) -> Iterator[tuple[str, str, int, Event]]:
        try:
            yield from rows
        except sqlite3.Error as exc:
            self._unreadable(seg.path, exc)

    def forward(self) -> Iterator[Event]:
        # Segments whose spans of time do not overlap are read one after the
        # other (a replica's segments mostly follow each other in time), so the
        # merge compares only as many streams as there are overlapping spans.
        chains: list[list[Any]] = []  # [last (ts, eventId), segments in order]
        spans = []
        for seg in self._open:
            try:
                span = seg.sort()
            except sqlite3.Error as exc:
                self._unreadable(seg.path, exc)
                continue
            if span is not None:
                spans.append((span, seg.index, seg))
        for (first, last), _, seg in sorted(spans, key=lambda s: (s[0][0], s[1])):
            for chain in chains:
                if chain[0] < first:
                    chain[0] = last
                    chain[1].append(seg)
                    break
            else:
                chains.append([last, [seg]])
        streams = [self._chained(segs) for _, segs in chains]
        for *_, ev in heapq.merge(*streams):
            yield ev

    def _chained(self, segments: list[_Segment]) -> Iterator[tuple[str, str, int, Event]]:
        for seg in segments:
            yield from self._guarded(seg, seg.forward())

    def backward(self) -> Iterator[Event]:
        streams = [self._guarded(s, s.backward()) for s in self._open]
        for *_, ev in heapq.merge(*streams, reverse=True):
            yield ev

    def counts(self) -> dict[str, list[Any]]:
        """type -> [events, first ts, last ts], from the lookup columns alone."""
        out: dict[str, list[Any]] = {}
        for seg in self._open:
            try:
                rows = seg.conn.execute(
                    f"SELECT type, count(*), min(ts), max(ts) FROM events WHERE {seg.where} "
                    "GROUP BY type", seg.params).fetchall()
            except sqlite3.Error as exc:
                self._unreadable(seg.path, exc)
                continue
            for type_, n, first, last in rows:
                have = out.setdefault(str(type_), [0, first, last])
                have[0] += n
                have[1] = min(have[1], first)
                have[2] = max(have[2], last)
        return out

    def subject_counts(self, *, every_type: bool = False) -> Iterator[tuple[str, int]]:
        """(subject, rows about it) over every segment, in subject order, from the
        lookup columns alone: SQLite groups each segment's rows, this merges the
        groups, so memory holds one group per segment. `every_type` counts the
        rows of every type, which the subject index alone answers."""
        def grouped(seg: _Segment) -> Iterator[tuple[str, int]]:
            where, params = (seg.bound, seg.bound_params) if every_type else (seg.where,
                                                                              seg.params)
            try:
                yield from seg.conn.execute(
                    f"SELECT subject, count(*) FROM events WHERE ({where}) "
                    "AND subject IS NOT NULL GROUP BY subject ORDER BY subject", params)
            except sqlite3.Error as exc:
                self._unreadable(seg.path, exc)

        subject: str | None = None
        total = 0
        for found, n in heapq.merge(*(grouped(seg) for seg in self._open)):
            if found != subject:
                if subject is not None:
                    yield subject, total
                subject, total = found, 0
            total += n
        if subject is not None:
            yield subject, total

    def others(self, type_: str) -> list[Event]:
        """Every verified event not of `type_` (whatever `types` says), in segment
        and seq order as a whole read gives them; SQLite skips the rest."""
        found: list[Event] = []
        for seg in self._open:
            try:
                rows = seg.conn.execute(
                    "SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
                    f"WHERE type != ? AND ({seg.bound}) ORDER BY seq",
                    (type_, *seg.bound_params)).fetchall()
            except sqlite3.Error as exc:
                self._unreadable(seg.path, exc)
                continue
            found.extend(seg._decoded(rows))
        return found

    def damage_in_order(self) -> None:
        """Put `unreadable` (one per segment) and `malformed` in the order a whole
        read reports them: by segment, then by row."""
        place = {rel: n for n, rel in enumerate(self.segments)}
        first: dict[str, dict[str, str]] = {}
        for u in self.unreadable:
            first.setdefault(u["path"], u)
        self.unreadable[:] = sorted(first.values(), key=lambda u: place.get(u["path"], len(place)))
        self.malformed.sort(key=lambda m: (place.get(m["segment"], len(place)), m["row"]))

    def of_types(self, types: tuple[str, ...], *, whole: bool = False) -> list[Event]:
        """Every verified event of these types, in (ts, eventId) order; `whole`
        ignores the cut (tombstones hide their target in every view)."""
        marks = ",".join("?" * len(types))
        found: list[Event] = []
        for seg in self._open:
            where, params = ("1", ()) if whole else (seg.where, seg.params)
            try:
                rows = seg.conn.execute(
                    "SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
                    f"WHERE type IN ({marks}) AND ({where})", (*types, *params)).fetchall()
            except sqlite3.Error as exc:
                self._unreadable(seg.path, exc)
                continue
            for seq, event_id, body, digest, type_, subject, ts in rows:
                try:
                    found.append(codec.decode_checked(body, digest, event_id, type_, subject, ts))
                except codec.MalformedEvent as exc:
                    self.malformed.append({"segment": seg.rel, "row": seq, "reason": str(exc)})
        found.sort(key=lambda ev: ev.sort_key)
        return found

    def about(self, subject: str, type_: str) -> list[Event]:
        """Verified events of one type about one subject (indexed), inside the cut."""
        return self._lookup("subject", subject, type_)

    def with_event_id(self, event_id: str, type_: str) -> list[Event]:
        """The verified event of this id and type (indexed; a copy in each segment
        that holds it), inside the cut."""
        return self._lookup("event_id", event_id, type_)

    def _lookup(self, column: str, value: str, type_: str) -> list[Event]:
        found: list[Event] = []
        lazy = self.lazy and type_ == "observation"
        for seg in self._open:
            try:
                rows = seg.conn.execute(
                    "SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
                    f"WHERE {column} = ? AND type = ? AND ({seg.where}) ORDER BY seq",
                    (value, type_, *seg.params)).fetchall()
            except sqlite3.Error:
                continue  # reported by the stream (or the whole read) that met it
            for _seq, event_id, body, digest, t, s, ts in rows:
                try:
                    found.append((codec.decode_lazy if lazy else codec.decode_checked)(
                        body, digest, event_id, t, s, ts))
                except codec.MalformedEvent:
                    continue
        found.sort(key=lambda ev: ev.sort_key)
        return found
