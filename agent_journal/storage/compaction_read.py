"""The read a compaction plans from: every segment, every row verified.

Invariant: the read gives exactly the events, damage, high-water marks and
tombstone rewrites that a one-process read through the exact decoder gives
(`codec.decode_checked`, the verdict every reader gives), whichever rows a fast
path judged (compaction_rows.py), and however the segments were shared with
worker processes (compaction_workers.py). It only reads; applying the plan is
`erasure.apply_to_segment`.
"""

from __future__ import annotations

from collections.abc import Iterator

from agent_journal.storage.compaction_rows import (
    Rewrite,
    SegmentRead,
    _FastPath,
    _file_size,
    _KeptSoFar,
    _read_segment_for_compaction,
    rows_about,
    tombstone_subjects,
)
from agent_journal.storage.compaction_workers import (
    _claims,
    _ReadWorker,
    _SegmentQueue,
    compaction_workers,
)
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
    parts = _read_for_compaction(paths, rels, every_observation=every_observation)
    for part in parts:
        _add_part(result, part)
    return result


def read_projected(ws: Workspace, *, every_observation: bool = True) -> CompactionRead:
    """`read_located`, from the read projection where it holds
    (storage/read_projection.py): only segments that changed are read whole,
    only rows above a segment's verified mark are read, and the projection
    is brought up to date. The same read as `read_located` (tests hold the
    two equal); when the projection cannot be used, it is that read."""
    from agent_journal.storage import read_projection

    compaction_workers([])  # a bad worker count is refused before any file is touched
    if not ws.segment_paths():
        return read_located(ws, every_observation=every_observation)
    with read_projection.open_projection(ws) as projection:
        if projection is None:
            return read_located(ws, every_observation=every_observation)
        fast = _FastPath()

        def whole(segments: list[tuple[str, str]]) -> Iterator[SegmentRead]:
            # A few segments at a time (shared with workers when large): each
            # part is kept and cut down as it comes, so the rows of every
            # segment are never all held at once.
            for at in range(0, len(segments), WHOLE_BATCH):
                batch = segments[at:at + WHOLE_BATCH]
                yield from _read_for_compaction([p for p, _ in batch], [r for _, r in batch],
                                                every_observation=True, made=False)

        seen = list(read_projection.projected(
            projection, ws, plain=every_observation, read_whole=whole,
            read_tail=lambda path, rel, mark: _read_segment_for_compaction(
                path, rel, fast, mark.high, mark.fold)))
        named: set[str] | None = None
        if not every_observation:
            # Only observations a tombstone names are read (and those holding
            # an artifact, which every part keeps): a segment's plain ones are
            # loaded only when it holds one named.
            named = set().union(*(tombstone_subjects(s.part.rows) for s in seen))
            for s in seen:
                if named.isdisjoint(s.subjects):
                    continue
                rows = s.held
                if rows is None and s.part.high is not None:
                    # Left out of the part (the segment's mark has just held,
                    # or it was read whole just now): read from the segment by
                    # subject (its index) only the few a tombstone names, of
                    # the rows the part stands for.
                    about = rows_about(s.path, s.part.rel, fast,
                                       sorted(named.intersection(s.subjects)), s.part.high)
                    if about.unreadable is None and not about.malformed:
                        rows = [r for r in about.rows if not r[8]]  # not already kept
                if rows is None:  # the segment changed after all: read it whole
                    s.part = _read_segment_for_compaction(s.path, s.part.rel, fast)
                else:
                    s.part.rows.extend(rows)
    result = CompactionRead()
    for s in seen:
        _add_part(result, s.part.made_events(named))
    return result


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


def _read_for_compaction(paths: list[str], rels: list[str], *, every_observation: bool,
                         made: bool = True) -> list[SegmentRead]:
    """Every segment's part, in order, its Events made: of every row, or
    without `every_observation`, of the rows `kept_rows` keeps. Not `made`
    (only with `every_observation`): every row, left as event values."""
    sizes = [_file_size(path) for path in paths]
    workers = compaction_workers(sizes)
    parts: list[SegmentRead | None] = [None] * len(paths)
    started: list[_ReadWorker] = []
    queue = None
    if workers:
        try:
            queue = _SegmentQueue(sorted(range(len(paths)), key=lambda k: -sizes[k]))
        except OSError:
            queue = None  # no temporary file to share: read here alone
    if queue is not None:
        started = [_ReadWorker(paths, rels, queue.fd, every_observation)
                   for _ in range(workers)]
        for worker in started:
            worker.made = made
    # Without every_observation, parts read here are cut down and made Events
    # as they come too, like a worker's (see `_ReadWorker`).
    so_far = _KeptSoFar()
    kept_here: list[int] = []  # the segment numbers of so_far's parts
    try:
        fast = _FastPath()
        for k in range(len(paths)) if queue is None else _claims(queue.fd):
            part = _read_segment_for_compaction(paths[k], rels[k], fast)
            if not every_observation:
                part.rows = so_far.keep(part.rows)[0]
                kept_here.append(k)
            parts[k] = part.made_events() if made else part
            for worker in started:
                worker.take(parts, block=False)  # what the workers sent meanwhile
        for worker in started:
            worker.take(parts, block=True)
        whole = _read_missing(paths, rels, parts, started, every_observation, made)
        if not every_observation:
            # Each part holds the observations named by the tombstones its
            # reader had read; a part that others' tombstones add rows to is
            # made again. (Only parts read again after a worker failed still
            # hold rows.)
            named = set().union(so_far.named, *(worker.subjects for worker in started),
                                *(tombstone_subjects(part.rows) for part in whole))
            for worker in started:
                worker.ask_rows(named)
            for n, rows in so_far.grown(named - so_far.named).items():  # while they look
                here = parts[kept_here[n]]
                assert here is not None
                here.rows = rows
                here.made_events()
            for worker in started:
                worker.take_rows(parts)
            whole = _read_missing(paths, rels, parts, started, every_observation, made)
            for part in whole:
                if part.rows:
                    part.made_events(named)
        return whole
    finally:
        if queue is not None:
            queue.close()
        for worker in started:
            worker.abandon()  # a worker still waiting, if this read stopped early


def _read_missing(paths: list[str], rels: list[str], parts: list[SegmentRead | None],
                  workers: list[_ReadWorker], every_observation: bool, made: bool = True
                  ) -> list[SegmentRead]:
    """Every part: read here what no worker sent, and all that a failed
    worker sent."""
    for worker in workers:
        if worker.failed():
            for k in worker.claimed:
                parts[k] = None
            worker.claimed.clear()
    fast = _FastPath()
    whole = []
    for k, part in enumerate(parts):
        if part is None:
            part = _read_segment_for_compaction(paths[k], rels[k], fast)
            parts[k] = part = part.made_events() if every_observation and made else part
        whole.append(part)
    return whole
