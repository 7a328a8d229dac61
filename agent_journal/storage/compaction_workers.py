"""Worker processes that share a large compaction read, and their wire protocol.

Invariant: a read shared with workers gives exactly the serial read's parts,
in segment order: each segment is read once by whoever claims it from the
shared queue, with the very code a serial read runs (compaction_rows.py); what
a worker that cannot start or fails claimed is read again in the parent. The
frames, messages and their order are written down in spec/COMPACTION-READ.md.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

from agent_journal.core.errors import UsageError
from agent_journal.storage.compaction_rows import (
    SegmentRead,
    _FastPath,
    _KeptSoFar,
    _read_segment_for_compaction,
)
from agent_journal.storage.segment_reader import PausedGC

# Reading is most of a large compaction's time, nearly all of it spent
# verifying rows, and segments are independent: past a size where starting a
# process is a small part of the read, this process and one worker process per
# further core share the segments (see `_SegmentQueue`). Each segment is read
# exactly as a serial read would read it, and the parts are put back in
# segment order, so the result is the serial read's. What a worker that cannot
# start or fails claimed is read here instead.
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


def worker_count(sizes: list[int], env: str, min_bytes: int, most: int) -> int:
    """Worker processes beside this one for files of these sizes: `$env` when set
    (a whole number; anything else is a usage error), else one per further core
    once there are `min_bytes` to share (a fresh interpreter costs tenths of a
    second), never more than `most` nor more than the files beyond the first."""
    chosen = os.environ.get(env, "").strip()
    if chosen:
        if not chosen.isdigit():
            raise UsageError(f"{env} must be a whole number of worker "
                             f"processes (0 or more), not {chosen!r}")
        wanted = int(chosen)
    elif sum(sizes) < min_bytes:
        return 0
    else:
        wanted = available_cores() - 1
    return max(0, min(wanted, most, len(sizes) - 1))


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def start_worker(module: str, function: str, queue_fd: int) -> subprocess.Popen[bytes]:
    """A worker process running `module.function()` with pipes on stdin and stdout
    and the shared queue's descriptor, importing this very package (its parent
    folder first on PYTHONPATH, so a checkout that is not installed works too).
    Raises OSError when it cannot start."""
    import sys

    if not sys.executable:
        raise OSError("no interpreter to start")
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-c", f"from {module} import {function} as w; w()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, pass_fds=(queue_fd,))


# Segments are handed out one at a time from a queue that this process and
# the workers all draw on, largest first: a fixed split by size left one side
# idle for a second or more whenever the machine's other load fell on the
# other side.
_CLAIM = 4  # bytes per segment number in the queue


class _SegmentQueue:
    """Segment numbers in an unlinked temporary file that this process and its
    workers read through one shared file offset. A read of one number is one
    claim: POSIX makes a read and its update of a shared offset atomic, and
    should two readers ever see the same number, the part is read twice and
    one kept; one never read is read here at the end."""

    def __init__(self, order: list[int]) -> None:
        import tempfile

        self.file = tempfile.TemporaryFile()
        try:
            self.file.write(b"".join(k.to_bytes(_CLAIM, "big") for k in order))
            self.file.flush()
            self.file.seek(0)
        except OSError:
            self.file.close()
            raise
        self.fd = self.file.fileno()

    def close(self) -> None:
        self.file.close()


def file_sizes(paths: list[str]) -> list[int]:
    """Each file's size in bytes, 0 for one that is gone: what decides whether
    workers are worth starting, and the order the queue hands files out."""
    sizes = []
    for path in paths:
        try:
            sizes.append(os.path.getsize(path))
        except OSError:
            sizes.append(0)
    return sizes


def shared_queue(sizes: list[int]) -> _SegmentQueue | None:
    """The files' numbers, largest first, in a queue to share with workers;
    None when its temporary file cannot be made (the caller then reads alone)."""
    try:
        return _SegmentQueue(sorted(range(len(sizes)), key=lambda k: -sizes[k]))
    except OSError:
        return None


def _claims(fd: int) -> Iterator[int]:
    """The segment numbers this reader claims, until the queue is empty."""
    while len(got := os.read(fd, _CLAIM)) == _CLAIM:
        yield int.from_bytes(got, "big")


class _ReadWorker:
    """A worker process sharing a compaction read: it claims segments from the
    queue and reads each exactly as this process would.

    A fresh interpreter (not fork, not multiprocessing): it shares no SQLite,
    lock or thread state with this process, and never re-imports the caller's
    main script. It reads under this process's recursion and integer-digit
    limits, which decide some verdicts of the exact decoder. It sends each
    segment's part as soon as it is read, and a thread here collects them, so
    this process can unmarshal parts while the worker reads on. A worker that
    cannot start or fails has every segment it claimed read here instead.

    Without `every_observation` a part comes with only the rows `kept_rows`
    keeps given the tombstones the worker has read so far (and with the ids
    its own tombstones name, `subjects`): nine rows in ten of a journal are
    observations that no such plan reads, and unmarshalling them here was a
    tenth of the read. Once every tombstone is known, a second round
    (`ask_rows`, `take_rows`) brings the parts that a tombstone read
    elsewhere or later adds rows to; usually none.
    """

    def __init__(self, paths: list[str], rels: list[str], queue_fd: int,
                 every_observation: bool, split: bool = False) -> None:
        import sys
        import threading

        self.every_observation = every_observation
        self.made = True  # make Events of the parts' rows (else they stay values)
        self.proc: subprocess.Popen[bytes] | None = None
        self.frames: list[bytes | None] = []  # as the collecting thread reads them
        self.arrived = threading.Condition()
        self.taken = 0  # frames unmarshalled so far
        self.claimed: list[int] = []  # segment numbers it sent parts of, in its order
        self.subjects: set[str] = set()
        self.ended = False  # the stream ended
        self.claimed_all = False  # every part it read has arrived
        self.done = False  # every part and answer arrived (it is then left to exit)
        try:
            self.proc = start_worker("agent_journal.storage.compaction_workers",
                                     "compaction_read_worker", queue_fd)
            assert self.proc.stdout is not None
            self._send((paths, rels, queue_fd, sys.getrecursionlimit(),
                        sys.get_int_max_str_digits(), every_observation, split),
                       last=every_observation)
            _widen_pipe(self.proc.stdout.fileno())
            threading.Thread(target=self._collect, daemon=True).start()
        except (OSError, ValueError, RuntimeError):
            self._stop()

    def _send(self, message: Any, *, last: bool) -> None:
        import marshal

        assert self.proc is not None and self.proc.stdin is not None
        _write_frame(self.proc.stdin, marshal.dumps(message, 2))
        if last:
            self.proc.stdin.close()

    def _collect(self) -> None:
        """Read frames until the pipe ends; None marks the end."""
        assert self.proc is not None and self.proc.stdout is not None
        stream = self.proc.stdout
        try:
            while (frame := _read_frame(stream)) is not None:
                with self.arrived:
                    self.frames.append(frame)
                    self.arrived.notify()
        finally:
            with self.arrived:
                self.frames.append(None)
                self.arrived.notify()

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _next(self, *, block: bool) -> Any:
        """The next message; None when none has come yet (or, once `ended`,
        ever)."""
        import marshal

        if self.ended or self.proc is None:
            return None
        with self.arrived:
            while block and len(self.frames) <= self.taken:
                self.arrived.wait()
            if len(self.frames) <= self.taken:
                return None
            frame = self.frames[self.taken]
            self.frames[self.taken] = b""
        self.taken += 1
        if frame is None:
            self.ended = True
            return None
        return marshal.loads(frame)

    def take(self, parts: list[SegmentRead | None], *, block: bool) -> None:
        """Put the parts that have arrived in their places (with `block`, every
        part, up to the worker's message that the queue is empty)."""
        try:
            while not self.claimed_all and (got := self._next(block=block)) is not None:
                if got == "claimed all":
                    self.claimed_all = True
                    if self.every_observation:
                        self._finish()
                    return
                k, packed, subjects = got
                part = SegmentRead.unpacked(packed)
                # Without every_observation these are the rows the worker kept
                # given the tombstones it had read: a later tombstone may add to
                # them (`take_rows`), never take away.
                parts[k] = part.made_events() if self.made else part
                self.claimed.append(k)
                self.subjects.update(subjects)
            if block and not self.claimed_all:
                raise ValueError("the worker stopped early")
        except Exception:
            self._stop()

    def ask_rows(self, named: set[str]) -> None:
        """The second round: send the ids every tombstone names; `take_rows`
        takes the kept rows of every part the worker could not tell in the
        first."""
        if self.proc is None:
            return  # failed, or (with every_observation) done
        try:
            self._send(list(named - self.subjects), last=True)
        except Exception:
            self._stop()

    def take_rows(self, parts: list[SegmentRead | None]) -> None:
        if self.proc is None:
            return
        try:
            redone = self._next(block=True)
            if not isinstance(redone, dict):
                raise ValueError("the worker stopped early")
            for n, rows in redone.items():
                part = parts[self.claimed[n]]
                assert part is not None
                part.rows = rows
                part.made_events()
            self._finish()
        except Exception:
            self._stop()

    def _finish(self) -> None:
        """Its last message has arrived: the worker is done. It is left to end
        on its own (a thread reaps it): tearing down a process that read a
        large journal takes the kernel a while, and nothing waits on it."""
        import threading

        threading.Thread(target=self.proc.wait, daemon=True).start()  # type: ignore[union-attr]
        self.proc = None
        self.done = True

    def abandon(self) -> None:
        """End the worker if it is not done (a worker done or failed has ended)."""
        if self.proc is not None and not self.done:
            self._stop()

    def failed(self) -> bool:
        """It could not start, or stopped before its work was done; what it
        sent cannot be trusted to be whole."""
        return self.proc is None and not self.done


def _write_frame(stream: Any, frame: bytes) -> None:
    stream.write(len(frame).to_bytes(8, "big"))
    stream.write(frame)
    stream.flush()


def _read_frame(stream: Any) -> bytes | None:
    """One length-prefixed frame; None at the end of the stream (or a cut one)."""
    header = stream.read(8)
    if len(header) < 8:
        return None
    size = int.from_bytes(header, "big")
    frame = stream.read(size)
    return frame if len(frame) == size else None


def _widen_pipe(fd: int) -> None:
    """Let a pipe hold a megabyte (Linux): a worker blocked on a full 64 KiB
    pipe waits each time for the collecting thread to get the GIL back."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ImportError):
        pass


def compaction_read_worker() -> None:
    """A `_ReadWorker` process. Frames both ways: 8 bytes of length, then a
    value marshalled in format 2. In: the request (with the number of the
    queue's file descriptor); and, unless it asks for every observation,
    later, the ids tombstones the worker did not read name. Out: the part of
    each segment it claims, as it is read; "claimed all"; and, in the second
    round, the kept rows of the parts that gained some, by the order sent.

    marshal, not pickle: the parts are plain lists, tuples, dicts, strings and
    numbers, and without the shared-object bookkeeping of pickle (or of later
    marshal formats) they go over several times faster.
    """
    import marshal
    import sys

    # A compaction is background work and the agents' hooks are not: when they
    # compete for the cores, the hooks go first (the parent keeps its priority,
    # so the read still finishes with a core to itself when one is free).
    try:
        os.nice(10)
    except OSError:
        pass
    inp, out = sys.stdin.buffer, sys.stdout.buffer

    def request() -> Any:
        frame = _read_frame(inp)
        if frame is None:
            raise SystemExit(2)
        return marshal.loads(frame)

    paths, rels, queue_fd, recursion_limit, digit_limit, every_observation, split = request()
    sys.setrecursionlimit(recursion_limit)
    sys.set_int_max_str_digits(digit_limit)
    fast = _FastPath()
    so_far = _KeptSoFar()
    with PausedGC():
        for k in _claims(queue_fd):
            part = _read_segment_for_compaction(paths[k], rels[k], fast)
            message: tuple[int, tuple[Any, ...], list[str]]
            if every_observation:
                message = (k, (part.split_plain() if split else part).packed(), [])
            else:
                kept, subjects = so_far.keep(part.rows)
                message = (k, part.packed(kept), subjects)
            _write_frame(out, marshal.dumps(message, 2))
        _write_frame(out, marshal.dumps("claimed all", 2))
        if not every_observation:
            _write_frame(out, marshal.dumps(so_far.grown(set(request())), 2))
    # Everything is sent: freeing what was read would only keep the caller
    # waiting for this process to end.
    os._exit(0)
