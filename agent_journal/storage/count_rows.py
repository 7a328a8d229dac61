"""One segment's counting read: its rows verified as a lazy read verifies them, and counted.

Of each observation only its id and kind are kept (the kind its verified
header reads, `codec.count_lazy`: no body is parsed and no event built for
it); the other events are kept whole, as `model.event_values`.

Invariants:
- A row's verdict is the one `Workspace.read(lazy=True)` gives it
  (`codec.decode_checked` for entries, invalidations and tombstones,
  `codec.decode_lazy` for observations); a malformed row is noted with its
  seq and reason, never counted.
- A segment is counted only once it passes SQLite's structural check
  (`quick_check`); one that fails it or cannot be read to the end says so in
  `CountPart.unreadable`.
- The rows are fetched in slices, and folded as fetched (`verified_mark.Fold`),
  so a mark taken of them vouches for exactly the rows counted.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any

from agent_journal.core import codec
from agent_journal.core.model import OBSERVATION, event_values
from agent_journal.storage.compaction_rows import READ_SLICE_ROWS
from agent_journal.storage.segment_reader import read_checked
from agent_journal.storage.verified_mark import Fold

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
    part.unreadable = read_checked(path, lambda conn: _count_rows(conn, part, after))
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


def packed(part: CountPart) -> tuple[Any, ...]:
    """A part as plain values (for marshal)."""
    return (part.rel, part.high, part.malformed, dict(part.counts), part.subjects,
            part.others, part.fold.value, part.fold.chain, part.unreadable)


def unpacked(values: Any) -> CountPart:
    rel, high, malformed, counts, subjects, others, value, chain, unreadable = values
    part = CountPart(rel, high, Fold(value, [tuple(c) for c in chain]))
    part.malformed = malformed
    part.counts.update(counts)
    part.subjects = subjects
    part.others = others
    part.unreadable = unreadable
    return part
