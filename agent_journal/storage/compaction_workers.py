"""A large compaction read shared with worker processes: the task the pool runs.

Invariant: a read shared with workers gives exactly the serial read's parts,
in segment order: each segment is read once by whoever claims it, with the
very code a serial read runs (compaction_rows.py), and what the pool does not
receive whole is read here (storage/parallel.py). The messages are written
down in spec/COMPACTION-READ.md.

Reading is most of a large compaction's time, nearly all of it spent
verifying rows, and segments are independent: past a size where starting a
process is a small part of the read, this process and one worker process per
further core share the segments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_journal.storage.compaction_rows import (
    FastPath,
    KeptSoFar,
    SegmentRead,
    read_segment_for_compaction,
    tombstone_subjects,
)
from agent_journal.storage.parallel import Pool, Task, file_sizes, worker_count

ENV_COMPACT_WORKERS = "AGENT_JOURNAL_COMPACT_WORKERS"
PARALLEL_READ_MIN_BYTES = 64 * 1024 * 1024
MAX_COMPACT_WORKERS = 8


def compaction_workers(sizes: list[int]) -> int:
    """How many worker processes read segments of these sizes beside this one.

    $AGENT_JOURNAL_COMPACT_WORKERS sets the number (0: read here only);
    otherwise one per further available core, once there is enough to read.
    """
    return worker_count(sizes, ENV_COMPACT_WORKERS, PARALLEL_READ_MIN_BYTES,
                        MAX_COMPACT_WORKERS)


class Reader:
    """A worker's job: each segment it claims read exactly as this process
    would read it.

    Without `every_observation` a part comes with only the rows `kept_rows`
    keeps given the tombstones the worker has read so far (and the ids its
    own tombstones name): nine rows in ten of a journal are observations that
    no such plan reads, and unmarshalling them here was a tenth of the read.
    Once every tombstone is known, a second round (`answer`) brings the rows
    of the parts that a tombstone read elsewhere or later adds to; usually
    none. With `split` (only with `every_observation`), each part is split
    before it is sent (`SegmentRead.split_plain`).
    """

    def __init__(self, args: Any) -> None:
        self.paths, self.rels, self.every_observation, self.split = args
        self.fast = FastPath()
        self.so_far = KeptSoFar()
        self.sent: list[int] = []  # the items of so_far's parts, in its order

    def part(self, k: int) -> tuple[tuple[Any, ...], list[str]]:
        part = read_segment_for_compaction(self.paths[k], self.rels[k], self.fast)
        if self.every_observation:
            return (part.split_plain() if self.split else part).packed(), []
        kept, subjects = self.so_far.keep(part.rows)
        self.sent.append(k)
        return part.packed(kept), subjects

    def answer(self, named: list[str]) -> dict[int, list[tuple[Any, ...]]]:
        """Item -> the rows it keeps now, of each part that the ids every
        tombstone names add rows to."""
        grown = self.so_far.grown(set(named) - self.so_far.named)
        return {self.sent[n]: rows for n, rows in grown.items()}


def read_shared(paths: list[str], rels: list[str], *, every_observation: bool,
                made: bool = True, split: bool = False) -> list[SegmentRead]:
    """Every segment's part, in order, its Events made: of every row, or
    without `every_observation`, of the rows `kept_rows` keeps. Not `made`
    (only with `every_observation`): every row, left as event values, or
    with `split`, split where read (`SegmentRead.split_plain`)."""
    task = Task("agent_journal.storage.compaction_workers:Reader",
                (paths, rels, every_observation, split), ENV_COMPACT_WORKERS,
                PARALLEL_READ_MIN_BYTES, MAX_COMPACT_WORKERS, background=True,
                second_round=not every_observation)
    fast = FastPath()

    def read(k: int) -> SegmentRead:
        return read_segment_for_compaction(paths[k], rels[k], fast)

    if not every_observation:
        return _read_named(task, file_sizes(paths), read)

    def whole(part: SegmentRead) -> SegmentRead:
        return part.made_events() if made else part.split_plain() if split else part

    def unpack(value: Any) -> SegmentRead:
        part = SegmentRead.unpacked(value[0])
        return part.made_events() if made else part  # (a worker split it already)

    with Pool(task, file_sizes(paths), unpack) as pool:
        got = dict(pool.run(lambda k: whole(read(k))))
    return [got[k] for k in range(len(paths))]


def _read_named(task: Task, sizes: list[int], read: Callable[[int], SegmentRead]
                ) -> list[SegmentRead]:
    """`read_shared` without every observation: each part is cut down as it is
    read (here as in the workers), and the parts that tombstones read
    elsewhere or later add rows to are made again in a second round."""
    elsewhere: set[str] = set()  # the ids the workers' tombstones name

    def unpack(value: Any) -> SegmentRead:
        part = SegmentRead.unpacked(value[0]).made_events()
        elsewhere.update(value[1])
        return part

    def apply(parts: dict[int, SegmentRead], grown: dict[int, list[Any]]) -> None:
        for k, rows in grown.items():
            parts[k].rows = rows
            parts[k].made_events()

    so_far = KeptSoFar()
    kept_here: list[int] = []  # the items of so_far's parts
    parts: list[SegmentRead | None] = [None] * len(sizes)
    with Pool(task, sizes, unpack) as pool:
        for k in pool.claims():
            part = read(k)
            part.rows = so_far.keep(part.rows)[0]
            kept_here.append(k)
            parts[k] = part.made_events()
            pool.poll()  # what the workers sent meanwhile
        received = pool.received()
        # What no worker sent whole is read here, before the second round:
        # its tombstones may name observations of the others' parts.
        for k in range(len(parts)):
            if parts[k] is None and k not in received:
                parts[k] = read(k)
        named = set().union(so_far.named, elsewhere,
                            *(tombstone_subjects(p.rows) for p in parts if p is not None))
        pool.ask(sorted(named), apply)
        for n, rows in so_far.grown(named - so_far.named).items():  # while they look
            here = parts[kept_here[n]]
            assert here is not None
            here.rows = rows
            here.made_events()
        whole = pool.gather(parts, read)
    for part in whole:
        if part.rows:  # (read here after all)
            part.made_events(named)
    return whole
