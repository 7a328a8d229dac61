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

import os
from collections.abc import Container, Iterator
from typing import Any

from agent_journal.core import codec, merge_plan
from agent_journal.core.model import OBSERVATION, TOMBSTONE
from agent_journal.ops.replicas import verify_row
from agent_journal.storage.replica_source import SegmentRows, Unreadable

# A worker process costs a fresh interpreter (a few tenths of a second on a
# busy machine): worth it only past this many bytes still to check.
PARALLEL_CHECK_MIN_BYTES = 32 * 1024 * 1024
ENV_VERIFY_WORKERS = "AGENT_JOURNAL_VERIFY_WORKERS"
MAX_VERIFY_WORKERS = 8
ERASABLE = tuple(sorted(merge_plan.ERASABLE_TYPES))

Verdict = dict[str, Any]


class SnapshotUnreadable(Exception):
    """The snapshot at `index` of a `verdicts` call could not be read."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.reason = reason


def verdict(path: str, tombstoned: Container[str]) -> Verdict:
    """Check every row of one snapshot. Raises Unreadable.

    `withheld` and `fixes` are about the rows that travel given `tombstoned`;
    `clean`, `artifacts` (ref, bytes, checksum, subject) and `tombstones`
    (the ids its well-formed tombstones name) are about every row, whatever
    the tombstones, so that a clean verdict can be remembered and reused
    under other tombstones.
    """
    seg = SegmentRows(path, immutable=True)
    withheld: list[int] = []
    fixes: list[tuple[str, str | None, str, bytes, int]] = []
    malformed: list[tuple[int, str]] = []
    artifacts: list[tuple[str, int, str, str | None]] = []
    tombstones: list[str] = []
    agree = True
    for seq, event_id, col_type, col_subject, col_ts, body, checksum in seg.rows:
        try:
            obj = verify_row(body, checksum, event_id)
        except codec.MalformedEvent as exc:
            malformed.append((seq, str(exc)))
            continue
        type_, subject, ts = obj["type"], obj["id"], obj["ts"]
        # A receiver decides from these columns (the manifest seals them), so
        # they must say what the bytes say.
        same = type(body) is bytes and (col_type, col_subject, col_ts) == (type_, subject, ts)
        agree = agree and same
        art = merge_plan.artifact_record(type_, obj["data"])
        if art is not None:
            artifacts.append((art["ref"], art["bytes"], art["checksum"], subject))
        elif type_ == TOMBSTONE:
            tombstones.append(subject)
        if merge_plan.withheld(type_, subject, tombstoned):
            withheld.append(seq)
        elif not same:
            fixes.append((type_, subject, ts, codec.as_bytes(body), seq))
    return {"rows": len(seg.rows), "owner": seg.meta.get("replica"), "withheld": withheld,
            "fixes": fixes, "malformed": malformed, "artifacts": artifacts,
            "tombstones": sorted(set(tombstones)), "clean": agree and not malformed}


def travelling_artifacts(v: Verdict, tombstoned: Container[str]
                         ) -> Iterator[tuple[str, int, str, str | None]]:
    """The verdict's artifacts cited by observations that travel."""
    for art in v["artifacts"]:
        if not merge_plan.withheld(OBSERVATION, art[3], tombstoned):
            yield art


# -- sharing the checks -------------------------------------------------------------------

def verify_workers(sizes: list[int]) -> int:
    """How many worker processes check snapshots of these sizes beside this one.

    $AGENT_JOURNAL_VERIFY_WORKERS sets the number (0: check here only);
    otherwise one per further available core, once there is enough to check.
    """
    from agent_journal.storage.compaction_workers import worker_count

    return worker_count(sizes, ENV_VERIFY_WORKERS, PARALLEL_CHECK_MIN_BYTES, MAX_VERIFY_WORKERS)


def verdicts(paths: list[str], tombstoned: set[str]) -> Iterator[tuple[int, Verdict]]:
    """(index, verdict) of every snapshot in `paths`, in the order they are ready.

    Raises SnapshotUnreadable (from the check here) for a snapshot SQLite
    cannot read.
    Snapshots are claimed largest first from one queue that this process and
    the workers share (storage/compaction_workers.py's `shared_queue`): a
    fixed split would leave one side idle whenever other load fell on the
    other.
    """
    from agent_journal.storage.compaction_workers import _claims, file_sizes, shared_queue

    sizes = file_sizes(paths)
    order = sorted(range(len(paths)), key=lambda k: -sizes[k])
    count = verify_workers(sizes)
    queue = shared_queue(sizes) if count else None
    if queue is None:  # (no workers, or no temporary file to share)
        for k in order:
            yield k, _checked(paths, k, tombstoned)
        return
    workers: list[_CheckWorker] = []
    done: set[int] = set()
    try:
        workers = [_CheckWorker(paths, tombstoned, queue.fd) for _ in range(count)]
        for k in _claims(queue.fd):
            done.add(k)
            yield k, _checked(paths, k, tombstoned)
            for w in workers:
                yield from _fresh(w.arrived(block=False), done)
        for w in workers:
            yield from _fresh(w.arrived(block=True), done)
        # Whatever a failed worker claimed and did not report.
        for k in order:
            if k not in done:
                done.add(k)
                yield k, _checked(paths, k, tombstoned)
    finally:
        for w in workers:
            w.stop()
        queue.close()


def _checked(paths: list[str], k: int, tombstoned: set[str]) -> Verdict:
    try:
        return verdict(paths[k], tombstoned)
    except Unreadable as exc:
        raise SnapshotUnreadable(k, str(exc)) from None


def _fresh(got: list[tuple[int, Verdict | None]], done: set[int]
           ) -> Iterator[tuple[int, Verdict]]:
    for k, v in got:
        if v is not None and k not in done:  # None: unreadable there, judged here
            done.add(k)
            yield k, v


class _CheckWorker:
    """A worker process checking snapshots it claims from the shared queue.

    A fresh interpreter, as in storage/compaction_workers.py (not fork, not
    multiprocessing: it shares no SQLite or lock state with this process and
    never re-imports the caller's script), running under this process's
    recursion and integer-digit limits, which decide some verdicts of the
    exact decoder. Frames are marshalled; a thread collects them as they come.
    """

    def __init__(self, paths: list[str], tombstoned: set[str], queue_fd: int) -> None:
        import marshal
        import subprocess
        import sys
        import threading

        from agent_journal.storage.compaction_workers import _widen_pipe, _write_frame, start_worker

        self.proc: subprocess.Popen[bytes] | None = None
        self.got: list[tuple[int, Verdict | None]] = []
        self.ended = False
        self.lock = threading.Condition()
        try:
            self.proc = start_worker("agent_journal.ops.export_check", "check_worker", queue_fd)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            _write_frame(self.proc.stdin, marshal.dumps(
                (paths, sorted(tombstoned), queue_fd, sys.getrecursionlimit(),
                 sys.get_int_max_str_digits()), 2))
            self.proc.stdin.close()
            _widen_pipe(self.proc.stdout.fileno())
            threading.Thread(target=self._collect, daemon=True).start()
        except (OSError, ValueError, RuntimeError):
            self.stop()
            self.ended = True

    def _collect(self) -> None:
        import marshal

        from agent_journal.storage.compaction_workers import _read_frame

        assert self.proc is not None and self.proc.stdout is not None
        try:
            while (frame := _read_frame(self.proc.stdout)) is not None:
                k, v = marshal.loads(frame)
                with self.lock:
                    self.got.append((k, v))
        except Exception:
            pass  # a broken stream: what it did not deliver is checked in the parent
        finally:
            with self.lock:
                self.ended = True
                self.lock.notify_all()

    def arrived(self, *, block: bool) -> list[tuple[int, Verdict | None]]:
        """The verdicts that came since the last call (with `block`, all of them,
        up to the end of the worker's stream)."""
        with self.lock:
            while block and not self.ended:
                self.lock.wait()
            got, self.got = self.got, []
        return got

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


def check_worker() -> None:
    """A `_CheckWorker` process. In: one frame (paths, tombstoned ids, the queue's
    file descriptor, recursion limit, integer-digit limit). Out: one frame
    (index, verdict) per snapshot it claimed, (index, None) for one it could
    not read; then the stream ends."""
    import marshal
    import sys

    from agent_journal.storage.compaction_workers import _claims, _read_frame, _write_frame
    from agent_journal.storage.segment_reader import PausedGC

    frame = _read_frame(sys.stdin.buffer)
    if frame is None:
        raise SystemExit(2)
    paths, tombstoned, queue_fd, recursion_limit, digit_limit = marshal.loads(frame)
    sys.setrecursionlimit(recursion_limit)
    sys.set_int_max_str_digits(digit_limit)
    named = set(tombstoned)
    out = sys.stdout.buffer
    with PausedGC():
        for k in _claims(queue_fd):
            try:
                v: Verdict | None = verdict(paths[k], named)
            except Unreadable:
                v = None
            _write_frame(out, marshal.dumps((k, v), 2))
    out.flush()
    os._exit(0)
