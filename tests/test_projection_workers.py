"""A projection's first fill shared with worker processes is the serial one (coverage and
decay, through storage/projection.py).

A worker process folds the segments it claims with the very code the
serial read runs, damage included; a worker that cannot start, or that ends
before saying it claimed all, has every segment counted here instead; a bad
worker count is a usage error before anything is read or written.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_read_projection import (
    _append,
    _direct_coverage,
    _direct_decay,
    _event,
    _segment,
    _ws,
)

from agent_journal.core.errors import UsageError
from agent_journal.ops import context
from agent_journal.ops.coverage import coverage
from agent_journal.ops.decay import decay
from agent_journal.storage import parallel, projection

READER = "agent_journal.core.counts:CountFold"


def _journal(root: Path) -> list[tuple[str, str]]:
    """Four segments: one with a row whose body no longer matches its
    checksum, one that is not a database at all."""
    n = 0
    for k in range(4):
        specs = [("observation", f"o{i % 6}", i % 5 == 0) for i in range(6)] + [
            ("entry", f"e{k}", 1), ("tombstone", "o3", 0), ("invalidation", "e1", 0)]
        _append(root, k, [_event(n + i, spec) for i, spec in enumerate(specs)])
        n += len(specs)
    with sqlite3.connect(_segment(root, 1)) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE seq = 2")
    conn.close()
    Path(_segment(root, 3)).write_bytes(b"not a database" * 300)
    ws = _ws(root)
    return [(p, ws.rel(p)) for p in ws.segment_paths()]


def test_a_worker_counts_what_a_serial_read_counts(tmp_path: Path) -> None:
    items = _journal(tmp_path / "journal")
    folder = projection.Folder((READER, items))
    serial = [folder.part(k) for k in range(len(items))]
    queue = parallel.Queue(list(range(len(items))))
    task = parallel.Task("agent_journal.storage.projection:Folder", (READER, items), "", 0)
    worker = parallel.Worker(task, queue.fd, lambda packed: packed)
    try:
        worker.poll(block=True)  # this process claims nothing: the worker counts every one
    finally:
        queue.close()
        worker.stop()
    assert worker.done and not worker.failed
    parts = [worker.parts[k] for k in range(len(items))]
    assert parts == serial
    assert parts[1][4] and parts[3][5]  # malformed rows; unreadable


# A worker that claims every segment, sends the first one's part, and ends
# without saying it claimed all: nothing it sent may be used.
_CLAIMS_AND_DIES = """#!/bin/sh
exec {python} -c '
import marshal, sys
from agent_journal.storage.parallel import claims, read_frame, write_frame
from agent_journal.storage.projection import Folder
args, fd = marshal.loads(read_frame(sys.stdin.buffer))[1:3]
claimed = list(claims(fd))
part = Folder(args).part(claimed[0])
part[4].append((1, "made up"))
write_frame(sys.stdout.buffer, marshal.dumps((claimed[0], part), 2))
'
"""


@pytest.mark.parametrize("how", ["no interpreter", "ends at once", "claims and dies",
                                 "shared"])
def test_coverage_and_decay_with_workers_are_the_direct_read(tmp_path: Path, monkeypatch: Any,
                                                             how: str) -> None:
    root = tmp_path / "journal"
    _journal(root)
    monkeypatch.setenv(projection.ENV_READ_WORKERS, "3")
    if how == "no interpreter":
        monkeypatch.setattr(sys, "executable", str(tmp_path / "missing-python"))
    elif how == "ends at once":  # it starts, sends nothing and exits
        monkeypatch.setattr(sys, "executable", "/bin/true")
    elif how == "claims and dies":
        fake = tmp_path / "fake-python"
        fake.write_text(_CLAIMS_AND_DIES.format(python=sys.executable))
        fake.chmod(0o700)
        monkeypatch.setattr(sys, "executable", str(fake))
    if how in ("claims and dies", "shared"):
        # This process waits, in its first count, until the workers have
        # claimed every other segment (a worker may take seconds to start).
        real, calls = projection.fold_segment, []
        queues: list[Any] = []

        class Recorded(parallel.Queue):
            def __init__(self, order: list[int]) -> None:
                super().__init__(order)
                self.size = len(order) * parallel.CLAIM
                queues.append(self)

        def slow_here(path: str, rel: str, *rest: Any) -> projection.Part:
            calls.append(rel)
            deadline = time.monotonic() + 120
            while len(calls) == 1 and queues and \
                    os.lseek(queues[-1].fd, 0, os.SEEK_CUR) < queues[-1].size:
                assert time.monotonic() < deadline, "no worker claimed the rest"
                time.sleep(0.01)
            return real(path, rel, *rest)

        monkeypatch.setattr(parallel, "Queue", Recorded)
        monkeypatch.setattr(projection, "fold_segment", slow_here)
    ctx = context.Context(str(root), "ws")
    assert coverage(ctx)[0] == _direct_coverage(root)  # counted, nothing kept
    assert not (root / "cache" / "counts").exists()
    assert decay(ctx)[0] == _direct_decay(root)  # counted again, and kept
    assert coverage(ctx)[0] == _direct_coverage(root)  # from what was kept


def test_a_bad_worker_count_is_refused_before_anything_is_read(tmp_path: Path,
                                                               monkeypatch: Any) -> None:
    root = tmp_path / "journal"
    _journal(root)
    monkeypatch.setenv(projection.ENV_READ_WORKERS, "two")
    with pytest.raises(UsageError, match="AGENT_JOURNAL_READ_WORKERS"):
        coverage(context.Context(str(root), "ws"))
    assert not (root / "cache" / "counts").exists()
