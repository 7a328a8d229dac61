"""A first counting read (coverage, decay) shared with worker processes: the task the pool runs.

Invariant: a shared read gives exactly the serial read's parts, in segment
order: each segment is counted once, by whoever claims it, with the very code
a serial read runs (count_rows.count_segment), and a part the pool does not
receive whole (storage/parallel.py) is counted here instead. Workers keep
nothing: the caller alone writes the projection, under signatures it took
before any worker started.

Counting is most of a first coverage or decay of a large journal, and
segments are independent: past a size where starting an interpreter is a
small part of the read, one worker process per further core shares them.
"""

from __future__ import annotations

from typing import Any

from agent_journal.storage.count_rows import CountPart, count_segment, packed, unpacked
from agent_journal.storage.parallel import Pool, Task, file_sizes, worker_count

ENV_READ_WORKERS = "AGENT_JOURNAL_READ_WORKERS"
PARALLEL_COUNT_MIN_BYTES = 64 * 1024 * 1024
MAX_READ_WORKERS = 8


def read_workers(sizes: list[int]) -> int:
    """How many worker processes count segments of these sizes beside this one
    ($AGENT_JOURNAL_READ_WORKERS sets it; 0 counts here only)."""
    return worker_count(sizes, ENV_READ_WORKERS, PARALLEL_COUNT_MIN_BYTES, MAX_READ_WORKERS)


class Counter:
    """A worker's job: the counting read's part of each (path, rel) it claims."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self.items = items

    def part(self, k: int) -> tuple[Any, ...]:
        return packed(count_segment(*self.items[k]))


def count_segments(items: list[tuple[str, str]]) -> list[CountPart]:
    """The counting read's part of each (path, rel), in order, shared with
    worker processes when there is much to count."""
    task = Task("agent_journal.storage.counting_workers:Counter", items, ENV_READ_WORKERS,
                PARALLEL_COUNT_MIN_BYTES, MAX_READ_WORKERS)
    with Pool(task, file_sizes([path for path, _ in items]), unpacked) as pool:
        got = dict(pool.run(lambda k: count_segment(*items[k])))
    return [got[k] for k in range(len(items))]
