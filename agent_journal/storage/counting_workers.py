"""Worker processes that share a first counting read (coverage, decay).

Invariant: a shared read gives exactly the serial read's parts, in segment
order: each segment is counted once, by whoever claims it from the shared
queue (compaction_workers._SegmentQueue), with the very code a serial read
runs (count_rows.count_segment), and its part comes back whole; a segment
whose part did not arrive whole (a worker that could not start, failed or
sent something cut short) is counted here instead. Workers keep nothing:
the caller alone writes the projection, under signatures it took before any
worker started.
"""

from __future__ import annotations

import os

from agent_journal.storage.compaction_workers import (
    _claims,
    _read_frame,
    _widen_pipe,
    _write_frame,
    file_sizes,
    shared_queue,
    start_worker,
    worker_count,
)
from agent_journal.storage.count_rows import CountPart, count_segment, packed, unpacked
from agent_journal.storage.segment_reader import PausedGC

# Counting is most of a first coverage or decay of a large journal, and
# segments are independent: past a size where starting an interpreter is a
# small part of the read, one worker process per further core shares them.
ENV_READ_WORKERS = "AGENT_JOURNAL_READ_WORKERS"
PARALLEL_COUNT_MIN_BYTES = 64 * 1024 * 1024
MAX_READ_WORKERS = 8


def read_workers(sizes: list[int]) -> int:
    """How many worker processes count segments of these sizes beside this one
    ($AGENT_JOURNAL_READ_WORKERS sets it; 0 counts here only)."""
    return worker_count(sizes, ENV_READ_WORKERS, PARALLEL_COUNT_MIN_BYTES, MAX_READ_WORKERS)


def count_segments(items: list[tuple[str, str]]) -> list[CountPart]:
    """The counting read's part of each (path, rel), in order, shared with
    worker processes when there is enough to count."""
    sizes = file_sizes([path for path, _ in items])
    workers = read_workers(sizes) if items else 0
    parts: list[CountPart | None] = [None] * len(items)
    queue = shared_queue(sizes) if workers else None
    started: list[_CountWorker] = []
    try:
        if queue is not None:
            started = [_CountWorker(items, queue.fd) for _ in range(workers)]
        for k in range(len(items)) if queue is None else _claims(queue.fd):
            parts[k] = count_segment(*items[k])
        for worker in started:
            worker.take(parts)
    finally:
        if queue is not None:
            queue.close()
        for worker in started:
            worker.stop()
    # What no worker sent whole is counted here.
    return [count_segment(*items[k]) if part is None else part
            for k, part in enumerate(parts)]


class _CountWorker:
    """A fresh interpreter (not fork: it shares no SQLite or lock state with
    this process) that claims segments from the queue and sends each part as
    it is counted; a thread here collects the frames, so the worker never
    waits on a full pipe while this process counts."""

    def __init__(self, items: list[tuple[str, str]], queue_fd: int) -> None:
        import subprocess
        import sys
        import threading

        self.proc: subprocess.Popen[bytes] | None = None
        self.frames: list[bytes] = []
        self.ended = threading.Event()
        try:
            self.proc = start_worker("agent_journal.storage.counting_workers", "count_worker",
                                     queue_fd)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            import marshal

            _write_frame(self.proc.stdin, marshal.dumps(
                (items, queue_fd, sys.getrecursionlimit(), sys.get_int_max_str_digits()), 2))
            self.proc.stdin.close()
            _widen_pipe(self.proc.stdout.fileno())
            threading.Thread(target=self._collect, daemon=True).start()
        except (OSError, ValueError, RuntimeError):
            self.stop()
            self.ended.set()

    def _collect(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while (frame := _read_frame(self.proc.stdout)) is not None:
                self.frames.append(frame)
        except (OSError, ValueError):
            pass
        finally:
            self.ended.set()

    def take(self, parts: list[CountPart | None]) -> None:
        """Put every part it sent in its place, once it has sent them all; a
        worker that did not end with "claimed all" sent nothing to trust."""
        import marshal

        self.ended.wait()
        try:
            messages = [marshal.loads(frame) for frame in self.frames]
        except (ValueError, EOFError, TypeError):
            return
        self.frames = []
        if not messages or messages[-1] != "claimed all":
            return
        for k, values in messages[:-1]:
            parts[k] = unpacked(values)

    def stop(self) -> None:
        """Reap it (a thread waits, so tearing down its memory keeps nobody
        waiting); end it first if it is still running."""
        import threading

        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if not self.ended.is_set():
            proc.kill()
        threading.Thread(target=proc.wait, daemon=True).start()


def count_worker() -> None:
    """A `_CountWorker` process. Frames (8 bytes of length, then a value
    marshalled in format 2). In: the (path, rel) of every segment to share,
    the queue's file descriptor and this caller's recursion and digit limits
    (they decide some verdicts of the exact decoder). Out: (number, part) of
    each segment it claims, as it is counted, then "claimed all"."""
    import marshal
    import sys

    frame = _read_frame(sys.stdin.buffer)
    if frame is None:
        raise SystemExit(2)
    items, queue_fd, recursion_limit, digit_limit = marshal.loads(frame)
    sys.setrecursionlimit(recursion_limit)
    sys.set_int_max_str_digits(digit_limit)
    out = sys.stdout.buffer
    with PausedGC():
        for k in _claims(queue_fd):
            _write_frame(out, marshal.dumps((k, packed(count_segment(*items[k]))), 2))
        _write_frame(out, marshal.dumps("claimed all", 2))
    os._exit(0)  # freeing what was counted would only keep the caller waiting
