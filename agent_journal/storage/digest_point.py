"""The digest's fold of the calls, kept at a verified point of the digest's cache.

`FoldRead` holds the digest's cache (storage/digest_cache.py) brought up to date, locked,
while a digest folds its calls through it: every event but the observations, the damage,
one stream of spans in (first ts, observation id) order, and the fold kept at a verified
point.

Invariants:
- The fold is kept beside the spans at a verified point: every segment's high-water mark
  and a cursor in (ts, id) order. It is folded on only when no span at or before the
  cursor was written since and no tombstone arrived since; dropping any segment's rows
  drops it (digest_cache._drop); a kept fold that does not load is folded again from
  nothing.
- Only an accelerator: anything the cache cannot serve (an unreadable segment, a lock not
  had in time, a compaction that erased rows meanwhile, a damaged row) makes the caller
  read the segments; a fold is stored only while the erasure generation holds.
"""

from __future__ import annotations

import json
import marshal
import os
import sqlite3

from agent_journal.core.errors import JournalError
from agent_journal.core.model import TOMBSTONE
from agent_journal.core.observation_fold import merge_spans, span_order
from agent_journal.storage import digest_cache, erasure_generation
from agent_journal.storage.cache import cache_lock_path
from agent_journal.storage.connection import run_write
from agent_journal.storage.locks import FileLock
from agent_journal.storage.segment_reader import ReadResult
from agent_journal.storage.workspace import Workspace

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from agent_journal.core.observation_fold import Span
    from agent_journal.storage.digest_cache import Project

class Stale(Exception):
    """The fold kept cannot be continued: a span it folded changed, or an observation it
    folded gained a span in another segment."""


class Interleaved(Exception):
    """The cache cannot fold these calls: an observation's spans in two segments
    interleave (only its events can fold it), or the cache could not be read on."""


class FoldRead:
    """`with FoldRead(ws, project) as source:` the digest's cache brought up to date and
    held (locked) while a digest folds its calls through it; `source` is None when the
    cache cannot serve (an unreadable segment, a lock not had in time, a compaction that
    erased rows meanwhile): the caller reads the segments.

    `source.result` holds every event that is not an observation, and the damage; `state`
    is the fold kept at a verified point, (cursor, value), when it can be continued, else
    None; `spans(cursor)` yields the calls after the cursor (all of them for None) in
    (first ts, observation id) order, one merged span per observation; `keep(cursor,
    value)` stores the fold folded up to the cursor. Invariants: the state is kept with
    the high-water mark of every segment it was folded from, and is used only when no span
    at or before its cursor was written since and no tombstone arrived since; dropping or
    re-reading any segment's rows drops it (_drop).
    """

    def __init__(self, ws: Workspace, project: Project, *, strict: bool = True) -> None:
        self.ws = ws
        self.project = project
        self.strict = strict
        self.lock: FileLock | None = None
        self.conn: sqlite3.Connection | None = None
        self.result = ReadResult()
        self.highs: dict[int, int] = {}  # cache segment id -> its high-water mark
        self.new_tombstone = False
        self.kept: Any = None
        self.generation = ""

    def __enter__(self) -> FoldRead | None:
        try:
            lock = FileLock(cache_lock_path(self.ws.root, digest_cache.AREA, self.ws.name),
                            wait_s=digest_cache.LOCK_WAIT_S)
            lock.__enter__()
            self.lock = lock
            self.generation = erasure_generation.noted(self.ws)  # before anything is read
            self.conn = digest_cache.open_cache(self.ws)
            paths = self.ws.segment_paths()
            taken = digest_cache.follow_all(self.conn, self.ws, paths, self.project,
                                            self.generation, self.strict)
            if taken is None or any(seg.cache_id is None for seg in taken.values()):
                self.__exit__()
                return None
            self._load(paths, taken)
            return self
        except digest_cache.Damaged:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            digest_cache.discard(self.ws)
            self.__exit__()
            return None
        except (OSError, sqlite3.Error, JournalError, ValueError, TypeError, EOFError):
            self.__exit__()
            return None

    def __exit__(self, *exc: object) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.lock is not None:
            self.lock.__exit__(None, None, None)
            self.lock = None

    def _load(self, paths: list[str], taken: dict[str, digest_cache.Segment]) -> None:
        conn = self.conn
        assert conn is not None
        row = conn.execute("SELECT value FROM state WHERE key = 'digest'").fetchone()
        kept = marshal.loads(row[0]) if row is not None else None
        before: dict[int, int] = {int(k): v for k, v in kept[2]} if kept else {}
        result = self.result
        for path in paths:
            seg = taken[os.path.basename(path)]
            rel = self.ws.rel(path)
            result.segments.append(rel)
            assert seg.cache_id is not None
            key = (seg.cache_id,)
            since = before.get(seg.cache_id, 0)
            rows = conn.execute("SELECT seq, payload, digest FROM others WHERE segment = ? "
                                "ORDER BY seq", key).fetchall()
            events = digest_cache.unpacked([(blob, digest) for _, blob, digest in rows])
            result.events.extend(events)
            if any(row[0] > since and ev.type == TOMBSTONE
                   for row, ev in zip(rows, events, strict=True)):
                self.new_tombstone = True
            result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                    for seq, why in conn.execute(
                                        "SELECT seq, reason FROM malformed WHERE segment = ? "
                                        "ORDER BY seq", key))
            result.high_water[rel] = seg.high
            if seg.census:
                result.census.append(rel)
            self.highs[seg.cache_id] = seg.high
        if kept is not None and not self.new_tombstone and self._continues(kept, before):
            self.kept = ((kept[0], kept[1]), kept[3])

    def _continues(self, kept: list[Any], before: dict[int, int]) -> bool:
        """Whether no span at or before the kept cursor was written since it was kept."""
        assert self.conn is not None
        ts, obs = kept[0], kept[1]
        for segment in self.highs:
            if self.conn.execute(
                    "SELECT 1 FROM calls WHERE segment = ? AND written > ? AND "
                    "(first_ts, obs) <= (?, ?) LIMIT 1",
                    (segment, before.get(segment, 0), ts, obs)).fetchone():
                return False
        return True

    @property
    def state(self) -> tuple[tuple[str, str], Any] | None:
        return self.kept  # type: ignore[no-any-return]

    def held(self, obs_id: str) -> bool:
        """Whether some segment holds an observation with this id."""
        assert self.conn is not None
        try:
            return self.conn.execute("SELECT 1 FROM calls WHERE obs = ? LIMIT 1",
                                     (obs_id,)).fetchone() is not None
        except sqlite3.Error as exc:
            raise Interleaved(str(exc)) from None

    def spans(self, cursor: tuple[str, str] | None) -> Iterator[tuple[str, Span]]:
        """(observation id, span) of every observation whose first event sorts after
        `cursor` (by first ts, then id), in that order; raises Stale when such an
        observation also has a span at or before the cursor, Interleaved when its spans
        in two segments interleave or the cache cannot be read."""
        try:
            yield from self._spans(cursor)
        except sqlite3.Error as exc:
            raise Interleaved(str(exc)) from None

    def _spans(self, cursor: tuple[str, str] | None) -> Iterator[tuple[str, Span]]:
        conn = self.conn
        assert conn is not None
        loads = json.loads
        columns = "obs, first_ts, first_id, last_ts, last_id, head"
        args: tuple[str, ...] = ()
        if cursor is None:
            where = ""
        else:
            where = "WHERE (first_ts, obs) > (?, ?)"  # a range of the calls_order index
            args = (cursor[0], cursor[1])
        # Observations with a span in several segments are merged when the stream reaches
        # them (there are few; most observations live in one segment). Read whole, they
        # are found in one pass; after a cursor, the few rows there are asked one by one.
        several = None if cursor is not None else {obs for (obs,) in conn.execute(
            "SELECT obs FROM calls GROUP BY obs HAVING COUNT(*) > 1")}
        count = "SELECT COUNT(*) FROM calls WHERE obs = ?"
        done: set[str] = set()
        for row in conn.execute(f"SELECT {columns} FROM calls {where} "
                                "ORDER BY first_ts, obs", args):
            obs = row[0]
            if obs in done:
                continue
            if (obs in several) if several is not None else (
                    conn.execute(count, (obs,)).fetchone()[0] > 1):
                done.add(obs)
                parts = [(*r[1:5], *loads(r[5])) for r in conn.execute(
                    f"SELECT {columns} FROM calls WHERE obs = ?", (obs,))]
                parts.sort(key=span_order)
                if cursor is not None and (parts[0][0], obs) <= cursor:
                    raise Stale(obs)
                merged = merge_spans(parts)
                if merged is None:
                    raise Interleaved(obs)
                yield obs, merged
                continue
            yield obs, (*row[1:5], *loads(row[5]))

    def keep(self, cursor: tuple[str, str], value: Any) -> None:
        """Store `value`, the fold of every call up to `cursor`, at this verified point."""
        conn = self.conn
        assert conn is not None
        blob = marshal.dumps([cursor[0], cursor[1], sorted(self.highs.items()), value], 2)
        try:
            with erasure_generation.Storing(self.ws, self.generation) as unchanged:
                if unchanged:
                    run_write(conn, lambda c: c.execute(
                        "INSERT OR REPLACE INTO state(key, value) VALUES ('digest', ?)",
                        (blob,)))
        except (OSError, sqlite3.Error, JournalError):
            pass  # the cache is only an accelerator
