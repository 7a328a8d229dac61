"""One projection engine: a read's pure fold over each segment's rows, kept per segment.

A read that must stay fast on a large journal supplies a `Reader`: its `area` (the file
<root>/cache/<area>/<ws>.sqlite) and `layout` (bumped when its state changes), and a pure
fold, `start()`, `step(state, event)` for every verified row in seq order, optionally
`pack`/`unpack` to and from plain values (a state of plain values needs neither: marshal
gives it back fresh), and optionally `sift(state, rows)`: the rows it can take as stored,
without an event built, given the verdict `step` would give them (the rest handed back, in
order, for `step`). `project(ws, reader)` gives every segment's state, folding only what is
new: the rows a segment gained above its kept mark, or a segment changed or never seen.

Invariants:
- A projection, never a source of truth: each state `project` gives is the one folding
  every row read now gives (tests hold the two equal), and deleting the file loses
  nothing.
- One trust rule: a kept state is used only once `verified_mark.check` vouches for its
  segment: SAME as kept, GROWN with the rows above its mark stepped in, CHANGED (or never
  seen) folded from `start()`. Every signature is taken before any row is read. A row is
  verified as a lazy read verifies it (`codec`); a malformed one is counted in
  `Part.malformed` and never stepped. A segment that fails SQLite's structural check or
  cannot be read to the end is never kept (`Part.unreadable`).
- One storage and erasure rule: the records are read_projection's (each column under its
  digest, written at the end of a run under the projection's lock, never after a
  compaction that moved the erasure generation; `compact --apply` deletes cache/).
- One shared first fill: the segments folded whole are shared with worker processes
  (storage/parallel.py, `Folder`) when there is much to read; a worker folds with the very
  code this process runs, and keeps nothing: the caller alone writes, under signatures it
  took before any worker started.
- `keep=False` (a read that promises no writes): what another run kept is used read-only
  and nothing under the root is created or changed.
"""

from __future__ import annotations

import sqlite3

from agent_journal.core import codec
from agent_journal.core.model import OBSERVATION
from agent_journal.storage.compaction_rows import READ_SLICE_ROWS
from agent_journal.storage.parallel import Pool, Task, file_sizes, worker_count
from agent_journal.storage.read_projection import Projection, Record, marked, open_projection
from agent_journal.storage.segment_reader import read_checked
from agent_journal.storage.verified_mark import CHANGED, SAME, Before, Fold

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from agent_journal.storage.workspace import Workspace

    class Reader(Protocol):
        area: str
        layout: str

        def start(self) -> Any: ...
        def step(self, state: Any, event: Any) -> Any: ...

# The worker processes of a first fill: how many ($AGENT_JOURNAL_READ_WORKERS; 0 folds here
# only), past how many bytes to fold a worker is worth its start-up, and at most.
ENV_READ_WORKERS = "AGENT_JOURNAL_READ_WORKERS"
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
MAX_READ_WORKERS = 8

# Rows above a seq, at most so many, in seq order: what a fold fetches and folds into its
# mark, and what `verified_mark.check` fetches again.
_ROWS_SQL = ("SELECT seq, event_id, body, checksum, type, subject, ts FROM events "
             "WHERE seq > ? ORDER BY seq LIMIT ?")


def fetch_rows(conn: sqlite3.Connection, after: Any, count: int) -> list[tuple[Any, ...]]:
    """`count` rows above `after` as a fold fetches them."""
    return conn.execute(_ROWS_SQL, (after, count)).fetchall()


class Part:
    """One segment as a projection gives it: its state, how far it was read, its
    malformed rows, or why it could not be read (then `state` is the rows read before)."""

    __slots__ = ("path", "rel", "state", "high", "malformed", "unreadable", "fold")

    def __init__(self, path: str, rel: str, state: Any, high: int = 0,
                 fold: Fold | None = None) -> None:
        self.path = path
        self.rel = rel
        self.state = state
        self.high = high
        self.malformed: list[tuple[int, str]] = []
        self.unreadable: str | None = None
        self.fold = Fold() if fold is None else Fold(fold.value, fold.chain)


def project(ws: Workspace, reader: Reader, *, keep: bool = True) -> list[Part]:
    """Every segment's state, in segment order, from what was kept where it holds."""
    read_workers([])  # a bad worker count is refused before any file is touched
    with open_projection(ws, reader.area, keep=keep, layout=reader.layout) as store:
        # Every signature is taken, and every mark checked, before any row is read.
        plans = [(path, rel, name, before, *_kept(store, reader, path, rel, verdict, record))
                 for path, rel, name, before, verdict, record in marked(store, ws, fetch_rows)]
        whole = iter(fold_segments(reader, [(path, rel) for path, rel, *_, kept, _ in plans
                                            if kept is None]))
        parts: list[Part] = []
        for path, rel, name, before, part, same in plans:
            if not same:
                part = next(whole) if part is None else fold_segment(path, rel, reader, part)
                _keep(store, reader, name, before, part)
            assert part is not None
            parts.append(part)
    return parts


def _kept(store: Projection | None, reader: Reader, path: str, rel: str, verdict: str,
          record: Record | None) -> tuple[Part | None, bool]:
    """(the kept part of a segment whose mark holds, else None; whether the segment is
    the same as when it was kept, so nothing needs reading)."""
    if store is None or record is None:
        return None, False
    got = None if verdict == CHANGED else store.load(record, "head")
    record.loaded.clear()
    if got is None:
        store.drop(record.name)
        return None, False
    state, malformed = got[0]
    part = Part(path, rel, _unpack(reader, state), record.mark.high, record.mark.fold)
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
    store.put(name, mark, (_pack(reader, part.state), part.malformed), [], [], None)


def fold_segment(path: str, rel: str, reader: Reader, kept: Part | None = None) -> Part:
    """The segment's rows above `kept`'s mark (every row without it) stepped into its
    state (or `start()`), their slices folded into its mark's Fold as fetched."""
    part = kept if kept is not None else Part(path, rel, reader.start())
    part.unreadable = read_checked(path, lambda conn: _step_rows(conn, reader, part))
    return part


def _step_rows(conn: sqlite3.Connection, reader: Reader, part: Part) -> None:
    decode_lazy, decode_checked, bad = codec.decode_lazy, codec.decode_checked, \
        codec.MalformedEvent
    step = reader.step
    sift = getattr(reader, "sift", None)
    start: float = part.high if part.high else float("-inf")
    while True:
        rows = fetch_rows(conn, start, READ_SLICE_ROWS)
        part.fold.add(start, rows)
        for seq, event_id, body, digest, type_, subject, ts in (
                rows if sift is None else sift(part.state, rows)):
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


# -- a first fill shared with worker processes ---------------------------------------------

def fold_segments(reader: Reader, items: list[tuple[str, str]]) -> list[Part]:
    """Each (path, rel) folded whole, in order, shared with worker processes when there
    is much to read (storage/parallel.py: a part not received whole is folded here)."""
    if not items:
        return []
    kind = type(reader)
    task = Task(f"{__name__}:Folder", (f"{kind.__module__}:{kind.__qualname__}", items),
                ENV_READ_WORKERS, PARALLEL_MIN_BYTES, MAX_READ_WORKERS)
    with Pool(task, file_sizes([path for path, _ in items]),
              lambda packed: _unpacked(reader, packed)) as pool:
        got = dict(pool.run(lambda k: fold_segment(*items[k], reader)))
    return [got[k] for k in range(len(items))]


def read_workers(sizes: list[int]) -> int:
    """How many worker processes fold segments of these sizes beside this one."""
    return worker_count(sizes, ENV_READ_WORKERS, PARALLEL_MIN_BYTES, MAX_READ_WORKERS)


class Folder:
    """A worker's job: the packed part of each (path, rel) it claims, folded by the reader
    named "module:Class" (made with no arguments)."""

    def __init__(self, args: Any) -> None:
        import importlib

        name, self.items = args
        module, _, kind = name.partition(":")
        self.reader = getattr(importlib.import_module(module), kind)()

    def part(self, k: int) -> tuple[Any, ...]:
        path, rel = self.items[k]
        part = fold_segment(path, rel, self.reader)
        return (path, rel, _pack(self.reader, part.state), part.high, part.malformed,
                part.unreadable, part.fold.value, part.fold.chain)


def _pack(reader: Reader, state: Any) -> Any:
    pack = getattr(reader, "pack", None)
    return state if pack is None else pack(state)


def _unpack(reader: Reader, packed: Any) -> Any:
    unpack = getattr(reader, "unpack", None)
    return packed if unpack is None else unpack(packed)


def _unpacked(reader: Reader, packed: Any) -> Part:
    path, rel, state, high, malformed, unreadable, value, chain = packed
    part = Part(path, rel, _unpack(reader, state), high, Fold(value, [tuple(c) for c in chain]))
    part.malformed = [(int(seq), str(why)) for seq, why in malformed]
    part.unreadable = unreadable
    return part
