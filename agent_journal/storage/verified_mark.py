"""A verified mark: "this segment, up to row N, verified, fingerprint F".

A projection that keeps what it derived from a segment's rows keeps beside it
the `Mark` of those rows, taken when they were read, and asks `check` before
using it again. The answer is one of:

- SAME: the file's signature (storage.cache.segment_signature, and the
  inode's change time, which no write and no `utime` leaves as it was) is
  the one taken before the rows were read, and was not taken within RACY_NS
  of the file's newest write (a write in the same clock tick would not move
  it): nothing has written to the file since.
- GROWN: the file changed, but every row at or below the mark is still the
  row read, byte for byte: the reader's own query, run again slice by slice
  as it was read (`Fold.chain`), gives values that fold (xxh3-128 over their
  marshalled form, body bytes included) to the `fold` kept. Only rows above
  `high` are new, and only those need reading.
- CHANGED: anything else (a row rewritten, deleted or damaged, a file
  truncated or put in place of another, a segment that cannot be read): what
  was derived from it is dropped and the segment is read again.

Invariant: a projection consulted through `check` never answers for bytes
other than the ones it was derived from (up to collisions of xxh3-128). The
fold is taken of the very values the reader fetched and derived its result
from (`Fold.add` on each slice), never by a second query, so a write landing
during the read cannot come between the two; the signature is the one taken
before the read, so such a write shows as a changed file next time.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import time
from collections.abc import Callable

from xxhash import xxh3_128_hexdigest

from agent_journal.storage.cache import segment_signature
from agent_journal.storage.segment import never_initialised, open_segment_for_read

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    # (connection, after seq, how many rows) -> the reader's rows, as it fetched them
    Fetch = Callable[[sqlite3.Connection, Any, int], list[tuple[Any, ...]]]

SAME, GROWN, CHANGED = "same", "grown", "changed"

# A signature taken this close to the file's newest mtime could miss a write
# landing in the same clock tick, so the file is checked row by row next time.
RACY_NS = 2_000_000_000


class Fold:
    """A running fold over the slices of rows a reader fetched, in seq order:
    `chain` is each slice's (after, rows), enough to fetch it again."""

    __slots__ = ("value", "chain")

    def __init__(self, value: str = "", chain: list[tuple[Any, int]] | None = None) -> None:
        self.value = value
        self.chain: list[tuple[Any, int]] = list(chain or [])

    def add(self, after: Any, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        self.value = xxh3_128_hexdigest(self.value.encode() + marshal.dumps(rows, 2))
        self.chain.append((after, len(rows)))


class Mark:
    """What a projection knows of one segment: the rows up to `high`, fetched
    as `fold.chain` says, fold to `fold.value`; they were read from the file
    whose signature was `signature`. `trusted`: the signature alone vouches
    for the file."""

    __slots__ = ("signature", "trusted", "high", "fold")

    def __init__(self, signature: str, trusted: bool, high: int, fold: Fold) -> None:
        self.signature = signature
        self.trusted = trusted
        self.high = high
        self.fold = fold

    def packed(self) -> tuple[Any, ...]:
        return (self.signature, self.trusted, self.high, self.fold.value, self.fold.chain)

    @classmethod
    def unpacked(cls, packed: Any) -> Mark:
        signature, trusted, high, value, chain = packed
        if not (isinstance(signature, str) and isinstance(high, int)
                and isinstance(value, str) and isinstance(chain, list)):
            raise ValueError("not a mark")
        return cls(signature, bool(trusted), high,
                   Fold(value, [(after, int(n)) for after, n in chain]))


def vouches(sig: tuple[str, int] | None, taken_ns: int) -> bool:
    """The one rule by which a file's signature, taken at `taken_ns`, vouches for the file
    alone (every projection keeping a segment by its signature asks it): it was taken at
    least RACY_NS after the file's newest write, which a write in the same tick would not
    move. (`sig`: a segment_signature or `signature`, (fingerprint, newest mtime).)"""
    return sig is not None and taken_ns - sig[1] >= RACY_NS


def signature(path: str, st: os.stat_result | None = None) -> tuple[str, int] | None:
    """segment_signature with the inode's change time: (fingerprint, newest mtime).
    `st`: the file's stat, when the caller has just taken it (one stat serves both)."""
    try:
        if st is None:
            st = os.stat(path)
    except OSError:
        return None
    sig = segment_signature(path, st)
    changed = st.st_ctime_ns
    return None if sig is None else (f"{sig[0]}:{changed}", max(sig[1], changed))


class Before:
    """The signature taken before a read."""

    __slots__ = ("signature", "taken_ns")

    def __init__(self, path: str) -> None:
        self.taken_ns = time.time_ns()
        self.signature = signature(path)

    def mark(self, high: int, fold: Fold) -> Mark | None:
        """The mark of rows up to `high` read since, folded to `fold`; None
        when the file could not be examined."""
        if self.signature is None:
            return None
        return Mark(self.signature[0], vouches(self.signature, self.taken_ns), high, fold)


def check(path: str, mark: Mark, fetch: Fetch) -> str:
    """SAME, GROWN or CHANGED (see the module's docstring); `fetch` is the
    reader's own query."""
    sig = signature(path)
    if sig is None:
        return CHANGED
    if mark.trusted and sig[0] == mark.signature:
        return SAME
    try:
        conn = open_segment_for_read(path)
        try:
            conn.execute("BEGIN")
            try:
                if never_initialised(conn):
                    return SAME if not mark.fold.chain else CHANGED
                again = Fold()
                for after, count in mark.fold.chain:
                    rows = fetch(conn, after, count)
                    if len(rows) != count:
                        return CHANGED
                    again.add(after, rows)
                if again.value != mark.fold.value:
                    return CHANGED
            finally:
                conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error:
        return CHANGED
    return GROWN
