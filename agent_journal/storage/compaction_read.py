"""The read a compaction plans from: every segment, every row verified.

Invariant: the read gives exactly the events, damage, high-water marks and
tombstone rewrites that a one-process read through the exact decoder gives
(`codec.decode_checked`, the verdict every reader gives), whichever rows a fast
path judged (compaction_rows.py), and however the segments were shared with
worker processes (compaction_workers.py). It only reads (as does `refs_in_rows_since`,
its last look at what was appended meanwhile); applying the plan is
`erasure.apply_to_segment`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agent_journal.core.errors import IntegrityError
from agent_journal.core.observation_ages import AgeFold, ids_of
from agent_journal.storage.compaction_rows import (
    FastPath,
    Rewrite,
    SegmentRead,
    read_segment_for_compaction,
    rows_about,
    tombstone_subjects,
)
from agent_journal.storage.compaction_workers import compaction_workers, read_shared
from agent_journal.storage.connection import connect
from agent_journal.storage.segment_reader import ReadResult
from agent_journal.storage.workspace import Workspace

# Segments a projected read reads whole at one go.
WHOLE_BATCH = 16


class CompactionRead(ReadResult):
    """A whole-workspace read made for planning a compaction.

    Damage is found exactly as `Workspace.read` finds it. Besides the events it
    keeps, per segment, the ids of the events read there and the stored
    checksum of every tombstone (so a rewrite can check the row is still the
    one read).
    Observation events carry only `data.artifact` of their data: nothing else
    of an observation's data takes part in a plan, and most of a journal is
    observations, so a body in canonical layout is judged without parsing it
    in Python (see `_fast_observation`); any other goes to the exact decoder.
    """

    def __init__(self) -> None:
        super().__init__()
        # segment -> the event ids of the events read from it
        self.located: dict[str, list[str]] = {}
        # segment -> tombstone event id -> checksum stored there
        self.tombstone_checksums: dict[str, dict[str, str]] = {}
        # segment -> tombstone event id -> body and checksum of the row's purged
        # rewrite (`Rewrite`), for each tombstone not yet purged: made during
        # the read, which worker processes share, instead of one by one as the
        # run applies.
        self.tombstone_rewrites: dict[str, dict[str, Rewrite]] = {}
        # segment -> the ids of observations read as their ages only
        # (`read_projected` with `ages`); their events are not in `events`
        self.plain: dict[str, list[str]] = {}
        # the segments whose every row this read judged (the others were
        # taken from the read projection)
        self.judged: set[str] = set()


def read_located(ws: Workspace, *, every_observation: bool = True) -> CompactionRead:
    """Read every segment for a compaction plan.

    Without `every_observation`, `events` holds only the observations a
    tombstone names or that hold an artifact (all a plan with no observation
    TTL looks at, and the blobs the run must account for); every row still
    counts for damage and `high_water`: making Events of the many
    observations nobody looks at is most of such a read. `located` names
    the segments of the events read: a plan only removes events it read.
    """
    result = CompactionRead()
    paths = ws.segment_paths()
    rels = [ws.rel(path) for path in paths]
    parts = read_shared(paths, rels, every_observation=every_observation)
    for part in parts:
        _add_part(result, part)
    return result


def read_projected(ws: Workspace, *, ages: AgeFold | None = None, keep: bool = True
                   ) -> CompactionRead:
    """`read_located`, from the read projection where it holds
    (storage/read_projection.py): only segments that changed are read whole,
    only rows above a segment's verified mark are read, and the projection
    is brought up to date.

    The events are those `read_located` gives without `every_observation`:
    of the observations holding no artifact only those a tombstone names.
    With `ages` (an observation TTL), the ages of all of those are folded
    into it instead, segment by segment (observation_ages.py), and `plain`
    names, per segment, the ids they are about. The same read as
    `read_located` otherwise (tests hold the two, and the plans made from
    them, equal); when the projection cannot be used, it is that read, of
    every observation when `ages` is given."""
    from agent_journal.storage import read_projection

    compaction_workers([])  # a bad worker count is refused before any file is touched
    if not ws.segment_paths():
        return read_located(ws, every_observation=ages is not None)
    with read_projection.open_projection(ws, keep=keep) as projection:
        if projection is None:
            return read_located(ws, every_observation=ages is not None)
        fast = FastPath()
        judged: set[str] = set()

        def whole(segments: list[tuple[str, str]]) -> Iterator[SegmentRead]:
            # A few segments at a time (shared with workers when large): each
            # part is kept and cut down as it comes, so the rows of every
            # segment are never all held at once.
            judged.update(rel for _, rel in segments)
            for at in range(0, len(segments), WHOLE_BATCH):
                batch = segments[at:at + WHOLE_BATCH]
                yield from read_shared([p for p, _ in batch], [r for _, r in batch],
                                       every_observation=True, made=False, split=True)

        seen = []
        plain: dict[str, list[str]] = {}
        for s in read_projection.projected(
                projection, ws, ages=ages is not None, read_whole=whole,
                read_tail=lambda path, rel, mark: read_segment_for_compaction(
                    path, rel, fast, mark.high, mark.fold)):
            if ages is not None and s.ages is not None:
                # Folded as they come: only the ids of a segment's plain
                # observations outlive its summary.
                ages.add(s.ages)
                plain[s.part.rel] = ids_of(s.ages)
                s.ages = None
            seen.append(s)
        # Only observations a tombstone names are read (and those holding an
        # artifact, which every part keeps): read from the segment by subject
        # (its index) only the few a tombstone names, of the rows the part
        # stands for.
        named = set().union(*(tombstone_subjects(s.part.rows) for s in seen))
        for s in seen:
            if named.isdisjoint(s.subjects) or s.part.high is None:
                continue
            about = rows_about(s.path, s.part.rel, fast,
                               sorted(named.intersection(s.subjects)), s.part.high)
            if about.unreadable is None and not about.malformed:
                s.part.rows.extend(r for r in about.rows if not r[8])  # not already kept
            else:  # the segment changed after all: read it whole
                s.part = read_segment_for_compaction(s.path, s.part.rel, fast)
        result = CompactionRead()
        result.plain = plain
        result.judged = judged
        for s in seen:
            _add_part(result, s.part.made_events(named))
        if result.damaged:
            projection.forget()  # the run is refused: it keeps nothing
    return result


def read_expired(ws: Workspace, read: CompactionRead, expired: set[str],
                 passes: Callable[[str], bool]) -> list[tuple[str, str]]:
    """(event id, id) of each event of the observations a plan expires
    that `read` has as ages only (`read.plain`), from the segments, before
    anything is deleted.

    They must agree with the ages the plan was made from: every such id is
    found in the segments the ages placed it in (at or below the seq the
    read reached), and every row found is itself old enough (`passes`, on
    its stamp). Rows of a segment the ages came from the read projection for
    are judged again exactly as a whole read judges them; of a segment this
    read judged whole, the columns are enough. Anything else (a segment
    damaged or rewritten since its ages were recorded) refuses the run with
    nothing changed, and drops the read projection. The events are also
    added to `read.located`.
    """
    from agent_journal.storage import read_projection
    from agent_journal.storage.compaction_rows import stamps_about

    fast = FastPath()
    found: list[tuple[str, str]] = []
    for rel, ids in read.plain.items():
        wanted = expired.intersection(ids)
        high = read.high_water.get(rel)
        if not wanted or high is None:
            continue
        path = os.path.join(ws.root.path, rel)
        why = None
        rows: list[tuple[Any, ...]] = []
        if rel in read.judged:
            got = stamps_about(path, sorted(wanted), high)
            if isinstance(got, str):
                why = got
            else:
                rows = [(e, "observation", None, subject, ts) for e, subject, ts in got]
        else:
            part = rows_about(path, rel, fast, sorted(wanted), high)
            rows = part.rows
            if part.unreadable is not None or part.malformed:
                why = part.unreadable or part.malformed[0]["reason"]
        if why is None and {r[3] for r in rows} != wanted:
            why = "observations it was read to hold are not there"
        elif why is None and not all(passes(r[4]) for r in rows):
            why = "observations it was read to hold are newer"
        if why is not None:
            read_projection.discard(ws)
            raise IntegrityError(
                f"refusing to compact: {rel} no longer holds what it was read to hold "
                f"({why}); nothing was changed. Re-run compact")
        read.located.setdefault(rel, []).extend(r[0] for r in rows)
        found += [(r[0], r[3]) for r in rows]
    return found


def refs_in_rows_since(ws: Workspace, high_water: dict[str, int], needles: Iterable[str]
                       ) -> set[str]:
    """Which needles occur in rows appended after `high_water` (or in new segments).

    Lets compaction keep an artifact blob that a writer referenced again while
    the run was working.
    """
    wanted = sorted(set(needles))
    found: set[str] = set()
    if not wanted:
        return found
    for path in ws.segment_paths():
        since = high_water.get(ws.rel(path), 0)
        try:
            conn = connect(path, readonly=True)
        except sqlite3.Error:
            return set(wanted)  # cannot tell: keep them all
        try:
            for needle in wanted:
                if needle in found:
                    continue
                row = conn.execute("SELECT 1 FROM events WHERE seq > ? AND instr(body, ?) > 0 "
                                   "LIMIT 1", (since, needle.encode())).fetchone()
                if row is not None:
                    found.add(needle)
        except sqlite3.Error:
            return set(wanted)
        finally:
            conn.close()
    return found


def _add_part(result: CompactionRead, part: SegmentRead) -> None:
    result.segments.append(part.rel)
    result.located[part.rel] = [ev.event_id for ev in part.events]
    result.events.extend(part.events)
    result.malformed.extend(part.malformed)
    if part.tombstones:
        result.tombstone_checksums[part.rel] = part.tombstones
    if part.rewrites:
        result.tombstone_rewrites[part.rel] = part.rewrites
    if part.unreadable is not None:
        result.unreadable.append({"path": part.rel, "reason": part.unreadable})
    if part.high is not None:
        result.high_water[part.rel] = part.high
