"""The counting read of coverage and decay: of an observation, only its id and kind.

Each segment is counted as storage/count_rows.py counts it (the verdicts a
lazy read gives, of an observation only its id and kind kept); the segments
counted whole are shared with worker processes when there is much to count
(storage/counting_workers.py). What a segment gave is kept between runs in the read projection at
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

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent_journal.core.model import events_from_values
from agent_journal.storage.count_rows import CountPart, count_segment, fetch_rows
from agent_journal.storage.read_projection import COUNTS_AREA, Projection, open_projection
from agent_journal.storage.segment_reader import ReadResult
from agent_journal.storage.verified_mark import CHANGED, GROWN, Before, Fold, check
from agent_journal.storage.workspace import Workspace


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


def read_counted(ws: Workspace, *, keep: bool = True) -> Counted:
    """Every segment counted, from the read projection where its marks hold;
    the segments it cannot answer for are counted whole, shared with worker
    processes when there is much to count (storage/counting_workers.py)."""
    import os

    from agent_journal.storage.counting_workers import count_segments, read_workers
    from agent_journal.storage.segment_reader import read_segment, structure_damage

    read_workers([])  # a bad worker count is refused before any file is touched
    got = Counted()
    result = got.result
    with _maybe_projection(ws, keep) as projection:
        segments = [(path, ws.rel(path), os.path.basename(path)) for path in ws.segment_paths()]
        # Every signature is taken, and every mark checked, before any row is read.
        plans = [_plan(projection, path, name) for path, _, name in segments]
        whole = iter(count_segments([(path, rel) for (path, rel, _), (_, kept, _) in
                                     zip(segments, plans, strict=True) if kept is None]))
        for (path, rel, name), (before, kept, grown) in zip(segments, plans, strict=True):
            result.segments.append(rel)
            part = kept
            if kept is None or grown:
                part = _counted(projection, name, before, kept, next(whole) if kept is None
                                else count_segment(path, rel, *_mark_of(projection, name)))
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


def _plan(projection: Projection | None, path: str, name: str
          ) -> tuple[Before, list[Any] | None, bool]:
    """(the signature before any read, the kept [head, others, subjects] when
    the projection's mark holds, whether the segment grew above it)."""
    before = Before(path)
    record = None if projection is None else projection.records.get(name)
    if projection is None or record is None:
        return before, None, False
    state = check(path, record.mark, fetch_rows)
    kept = None if state == CHANGED else projection.load(record, "head", "others", "subjects")
    if kept is None:
        projection.drop(name)
    return before, kept, state == GROWN


def _mark_of(projection: Projection | None, name: str) -> tuple[int, Fold]:
    assert projection is not None  # only a kept record grows
    mark = projection.records[name].mark
    return mark.high, mark.fold


def _counted(projection: Projection | None, name: str, before: Before, kept: list[Any] | None,
             part: CountPart) -> list[Any] | None:
    """[head, others, subjects] of a segment counted whole, or of its kept
    record with the rows above its mark (`part`), kept; None when damaged."""
    if part.unreadable is not None:
        if projection is not None:
            projection.drop(name)
        return None
    if kept is not None:
        (_high, malformed, counts), others, subjects = kept
        part.malformed[:0] = malformed
        part.counts.update(counts)
        part.subjects[:0] = subjects
        part.others[:0] = others
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
def _maybe_projection(ws: Workspace, keep: bool = True) -> Iterator[Projection | None]:
    """The projection, unless the workspace has no segment (nothing is then
    made under the root)."""
    if not ws.segment_paths():
        yield None
        return
    with open_projection(ws, COUNTS_AREA, keep=keep) as projection:
        yield projection

