"""Checking the rows of export snapshots: in parallel, and once per snapshot's bytes.

An export (and so a push) vouches for every row it ships: a receiver decides
from the lookup columns of a sealed export and never parses its bodies. That
check is most of an export's time. Segments are independent, and a sealed
segment's bytes do not change, so each snapshot is checked once and the
checks are shared between this process and worker processes.

Invariants:
- A snapshot's verdict (its malformed rows, the rows a tombstone withholds,
  the rows whose lookup columns must be rewritten to agree with their bytes,
  the artifacts its observations cite, the ids its tombstones name) is what
  `verdict` computes from its rows, whoever computes it: this process, a
  worker process, or, for bytes checked before, the verified-points
  projection plus one indexed query.
- The projection (<root>/cache/verified/<ws>.json, `VerifiedPoints`)
  remembers only clean snapshots (every row well-formed, every row's columns
  agreeing with its bytes), under the segment's name and the snapshot's exact
  size and checksum. A snapshot whose bytes differ in any way is checked
  again, whatever the projection says; a lost or damaged projection costs a
  check, never a row. It holds event counts, subject ids and artifact refs,
  no content, and `compact --apply` deletes it with every other projection.
- Worker processes only read. A worker that cannot start or fails has every
  snapshot it did not report checked here instead, so the verdicts are the
  serial ones either way.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import Any

from agent_journal.core.export_plan import Verdict, judge
from agent_journal.storage.parallel import Pool, Task, file_sizes
from agent_journal.storage.replica_source import SegmentRows, Unreadable

# A worker process costs a fresh interpreter (a few tenths of a second on a
# busy machine): worth it only past this many bytes still to check.
PARALLEL_CHECK_MIN_BYTES = 32 * 1024 * 1024
ENV_VERIFY_WORKERS = "AGENT_JOURNAL_VERIFY_WORKERS"
MAX_VERIFY_WORKERS = 8


class SnapshotUnreadable(Exception):
    """The snapshot at `index` of a `verdicts` call could not be read."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.reason = reason


def verdict(path: str, tombstoned: Container[str]) -> Verdict:
    """Check every row of one snapshot (export_plan.judge). Raises Unreadable."""
    seg = SegmentRows(path, immutable=True)
    return judge(seg.rows, seg.meta.get("replica"), tombstoned)


# -- sharing the checks -------------------------------------------------------------------

class Checker:
    """A worker's job: the verdict of each snapshot it claims; None for one it
    cannot read (judged again here, where the refusal is raised)."""

    def __init__(self, args: tuple[list[str], list[str]]) -> None:
        self.paths, tombstoned = args
        self.tombstoned = set(tombstoned)

    def part(self, k: int) -> tuple[Any, ...] | None:
        try:
            return tuple(verdict(self.paths[k], self.tombstoned))
        except Unreadable:
            return None


def verdicts(paths: list[str], tombstoned: set[str]) -> Iterator[tuple[int, Verdict]]:
    """(index, verdict) of every snapshot in `paths`, in the order they are ready,
    shared with worker processes (storage/parallel.py), each verdict taken as it
    comes. Raises SnapshotUnreadable (from the check here) for a snapshot
    SQLite cannot read."""
    task = Task("agent_journal.ops.export_check:Checker", (paths, sorted(tombstoned)),
                ENV_VERIFY_WORKERS, PARALLEL_CHECK_MIN_BYTES, MAX_VERIFY_WORKERS, streamed=True)

    def checked(k: int) -> Verdict:
        try:
            return verdict(paths[k], tombstoned)
        except Unreadable as exc:
            raise SnapshotUnreadable(k, str(exc)) from None

    with Pool(task, file_sizes(paths), Verdict._make) as pool:
        yield from pool.run(checked)
