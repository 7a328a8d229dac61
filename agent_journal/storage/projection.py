"""One projection engine: a read's pure fold over each segment's rows, kept per segment.

A read that must stay fast on a large journal supplies a `Reader`: its `area` (the file
<root>/cache/<area>/<ws>.sqlite) and `layout` (bumped when its state changes), and a pure
fold, `start()`, `step(state, event)` for every verified row in seq order, `pack`/`unpack`
to plain values. `project(ws, reader)` gives every segment's state, folding only what is
new: the rows a segment gained above its kept mark, or a segment changed or never seen.

Invariants:
- A projection, never a source of truth: each state `project` gives is the one folding
  every row read now gives (tests hold the two equal), and deleting the file loses
  nothing.
- One trust rule: a kept state is used only once `verified_mark.check` vouches for its
  segment: SAME as kept, GROWN with the rows above its mark stepped in, CHANGED (or never
  seen) folded from `start()`. A row is verified as a lazy read verifies it (`codec`); a
  malformed one is counted in `Part.malformed` and never stepped. A segment that fails
  SQLite's structural check or cannot be read to the end is never kept (`Part.unreadable`).
- One storage and erasure rule: the records are read_projection's (each column under its
  digest, written at the end of a run under the projection's lock, never after a
  compaction that moved the erasure generation; `compact --apply` deletes cache/).
- `keep=False` (a read that promises no writes): what another run kept is used read-only
  and nothing under the root is created or changed.
"""

from __future__ import annotations

import sqlite3

from agent_journal.core import codec
from agent_journal.core.model import OBSERVATION
from agent_journal.storage.compaction_rows import READ_SLICE_ROWS
from agent_journal.storage.count_rows import fetch_rows
from agent_journal.storage.read_projection import Projection, open_projection, segment_names
from agent_journal.storage.segment_reader import read_checked
from agent_journal.storage.verified_mark import CHANGED, SAME, Before, Fold, check

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from agent_journal.storage.workspace import Workspace

    class Reader(Protocol):
        area: str
        layout: str

        def start(self) -> Any: ...
        def step(self, state: Any, event: Any) -> Any: ...
        def pack(self, state: Any) -> Any: ...
        def unpack(self, packed: Any) -> Any: ...


class Part:
    """One segment as a projection gives it: its state, how far it was read, its
    malformed rows, or why it could not be read (then `state` is the rows read before)."""

    __slots__ = ("rel", "state", "high", "malformed", "unreadable", "fold")

    def __init__(self, rel: str, state: Any, high: int = 0, fold: Fold | None = None) -> None:
        self.rel = rel
        self.state = state
        self.high = high
        self.malformed: list[tuple[int, str]] = []
        self.unreadable: str | None = None
        self.fold = Fold() if fold is None else Fold(fold.value, fold.chain)


def project(ws: Workspace, reader: Reader, *, keep: bool = True) -> list[Part]:
    """Every segment's state, in segment order, from what was kept where it holds."""
    parts: list[Part] = []
    with open_projection(ws, reader.area, keep=keep, layout=reader.layout) as store:
        segments = segment_names(ws)
        if store is not None:
            store.drop(*sorted(store.records.keys() - {name for _, _, name in segments}))
        for path, rel, name in segments:
            before = Before(path)
            part, same = _kept(store, reader, path, rel, name)
            if not same:
                part = fold_segment(path, rel, reader, part)
                _keep(store, reader, name, before, part)
            assert part is not None
            parts.append(part)
    return parts


def _kept(store: Projection | None, reader: Reader, path: str, rel: str, name: str
          ) -> tuple[Part | None, bool]:
    """(the kept part of a segment whose mark holds, else None; whether the segment is
    the same as when it was kept, so nothing needs reading)."""
    record = None if store is None else store.records.get(name)
    if store is None or record is None:
        return None, False
    verdict = check(path, record.mark, fetch_rows)
    got = None if verdict == CHANGED else store.load(record, "head")
    record.loaded.clear()
    if got is None:
        store.drop(name)
        return None, False
    state, malformed = got[0]
    part = Part(rel, reader.unpack(state), record.mark.high, record.mark.fold)
    part.malformed = [(int(seq), str(why)) for seq, why in malformed]
    return part, verdict == SAME


def _keep(store: Projection | None, reader: Reader, name: str, before: Before, part: Part
          ) -> None:
    if store is None:
        return
    mark = before.mark(part.high, part.fold) if part.unreadable is None else None
    if mark is None:
        store.drop(name)
        return
    store.put(name, mark, (reader.pack(part.state), part.malformed), [], [], None)


def fold_segment(path: str, rel: str, reader: Reader, kept: Part | None = None) -> Part:
    """The segment's rows above `kept`'s mark (every row without it) stepped into its
    state (or `start()`), their slices folded into its mark's Fold as fetched."""
    part = kept if kept is not None else Part(rel, reader.start())
    part.unreadable = read_checked(path, lambda conn: _step_rows(conn, reader, part))
    return part


def _step_rows(conn: sqlite3.Connection, reader: Reader, part: Part) -> None:
    decode_lazy, decode_checked, bad = codec.decode_lazy, codec.decode_checked, \
        codec.MalformedEvent
    step = reader.step
    start: float = part.high if part.high else float("-inf")
    while True:
        rows = fetch_rows(conn, start, READ_SLICE_ROWS)
        part.fold.add(start, rows)
        for seq, event_id, body, digest, type_, subject, ts in rows:
            decode = decode_lazy if type_ == OBSERVATION else decode_checked
            try:
                event = decode(body, digest, event_id, type_, subject, ts)
            except bad as exc:
                part.malformed.append((seq, str(exc)))
                continue
            part.state = step(part.state, event)
        if rows:
            part.high = rows[-1][0]
        if len(rows) < READ_SLICE_ROWS:
            break
        start = rows[-1][0]
