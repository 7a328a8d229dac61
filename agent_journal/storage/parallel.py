"""One pool of worker processes sharing work over files: its queue, frames, start-up and fallback.

Invariant: a run shared with workers gives exactly the serial run's parts.
Each item (a file, by its number) is done once, by whoever claims it from the
shared queue, with the very code a serial run runs (the task's job: `part`
in a worker, the caller's `here` in this process); a part not received whole
is done here, in this process, after the workers. A worker's parts are taken
once its stream has ended as the protocol says ("claimed all", then the
answer to a second round where the task has one), or, for a task that takes
parts as they come (`Task.streamed`), each as soon as its frame arrived
complete. A worker that cannot start, dies, or sends anything out of order is
stopped, and every item it claimed that was not taken is done here. Workers
only read: the caller alone writes.

Used by the compaction read (storage/compaction_workers.py), a projection's first fill
(storage/projection.py, `Folder`: coverage, decay, stats) and the export checks
(ops/export_check.py); the frames and messages are written down in spec/COMPACTION-READ.md.

Workers are fresh interpreters (not fork, not multiprocessing): they share no
SQLite, lock or thread state with this process and never import the caller's
main script. They run under this process's recursion and integer-digit limits,
which decide some verdicts of the exact decoder. Frames both ways are 8 bytes
of length, then a value marshalled in format 2: the parts are plain lists,
tuples, dicts, strings and numbers, and without the shared-object bookkeeping
of pickle (or of later marshal formats) they go over several times faster.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, NamedTuple, TypeVar

from agent_journal.core.errors import UsageError

T = TypeVar("T")

CLAIM = 4  # bytes per item number in the queue
CLAIMED_ALL = "claimed all"


class Task(NamedTuple):
    """Work a pool shares. In a worker, `job` ("module:function") is called
    with `args` and gives an object whose `part(k)` is item k's part (a plain
    value), and, with `second_round`, whose `answer(question)` answers the
    one question the caller sends once every worker has claimed all."""

    job: str
    args: Any
    env: str  # the environment variable that sets the number of workers
    min_bytes: int  # less than this to share: no worker is worth its start-up
    most: int = 8
    background: bool = False  # workers lower their priority (niceness + 10)
    second_round: bool = False
    streamed: bool = False  # parts are taken as they come, each alone

    def workers(self, sizes: list[int]) -> int:
        """How many worker processes share items of these sizes beside this one."""
        return worker_count(sizes, self.env, self.min_bytes, self.most)


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


# -- the queue ----------------------------------------------------------------------------

class Queue:
    """Item numbers in an unlinked temporary file that this process and its
    workers read through one shared file offset, largest file first (a fixed
    split by size left one side idle for a second or more whenever the
    machine's other load fell on the other side). A read of one number is
    one claim: POSIX makes a read and its update of a shared offset atomic,
    and should two readers ever see the same number, the part is done twice
    and one kept; one never read is done here at the end."""

    def __init__(self, order: list[int]) -> None:
        import tempfile

        self.file = tempfile.TemporaryFile()
        try:
            self.file.write(b"".join(k.to_bytes(CLAIM, "big") for k in order))
            self.file.flush()
            self.file.seek(0)
        except OSError:
            self.file.close()
            raise
        self.fd = self.file.fileno()

    def close(self) -> None:
        self.file.close()


def claims(fd: int) -> Iterator[int]:
    """The item numbers this reader claims from a queue, until it is empty."""
    while len(got := os.read(fd, CLAIM)) == CLAIM:
        yield int.from_bytes(got, "big")


# -- frames -------------------------------------------------------------------------------

def write_frame(stream: Any, frame: bytes) -> None:
    stream.write(len(frame).to_bytes(8, "big"))
    stream.write(frame)
    stream.flush()


def read_frame(stream: Any) -> bytes | None:
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


def start_worker(queue_fd: int, *, background: bool = False) -> subprocess.Popen[bytes]:
    """A worker process running `serve` with pipes on stdin and stdout and the
    queue's descriptor, importing this very package (its parent folder first
    on PYTHONPATH, so a checkout that is not installed works too). Raises
    OSError when it cannot start."""
    import sys

    if not sys.executable:
        raise OSError("no interpreter to start")
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    code = f"from agent_journal.storage.parallel import serve; serve(background={background})"
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            pass_fds=(queue_fd,))


# -- this process's side ------------------------------------------------------------------

class Worker(Generic[T]):
    """One worker process, seen from here. A thread collects its frames as they
    come, so it never waits on a full pipe while this process works; they are
    unpacked here (`poll`), as this process finds the time. `parts` holds
    what it sent, unpacked, by item; `failed` says they cannot be trusted to
    be whole."""

    def __init__(self, task: Task, queue_fd: int, unpack: Callable[[Any], T]) -> None:
        import sys

        self.unpack = unpack
        self.second_round = task.second_round
        self.proc: subprocess.Popen[bytes] | None = None
        self.frames: list[bytes | None] = []  # as the collecting thread reads them
        self.arrived = threading.Condition()
        self.taken = 0  # frames unpacked so far
        self.parts: dict[int, T] = {}
        self.arrivals: list[int] = []  # the items of `parts`, as they came
        self.handed = 0  # how many of them were handed on (Pool.run)
        self.claimed_all = False
        self.apply: Callable[[dict[int, T], Any], None] | None = None  # the second round's
        self.done = False  # every message arrived (it is then left to exit)
        self.failed = False
        try:
            self.proc = start_worker(queue_fd, background=task.background)
            assert self.proc.stdout is not None
            self._send((task.job, task.args, queue_fd, sys.getrecursionlimit(),
                        sys.get_int_max_str_digits(), task.second_round),
                       last=not task.second_round)
            _widen_pipe(self.proc.stdout.fileno())
            threading.Thread(target=self._collect, daemon=True).start()
        except (OSError, ValueError, RuntimeError):
            self._fail()

    def _send(self, message: Any, *, last: bool) -> None:
        import marshal

        assert self.proc is not None and self.proc.stdin is not None
        write_frame(self.proc.stdin, marshal.dumps(message, 2))
        if last:
            self.proc.stdin.close()

    def _collect(self) -> None:
        """Read frames until the pipe ends; None marks the end."""
        assert self.proc is not None and self.proc.stdout is not None
        stream = self.proc.stdout
        try:
            while (frame := read_frame(stream)) is not None:
                with self.arrived:
                    self.frames.append(frame)
                    self.arrived.notify()
        except (OSError, ValueError):
            pass
        finally:
            with self.arrived:
                self.frames.append(None)
                self.arrived.notify()

    def _next(self, *, block: bool) -> Any:
        """The next message; raises EOFError once the stream has ended, and
        LookupError when none has come yet (without `block`)."""
        import marshal

        with self.arrived:
            while block and len(self.frames) <= self.taken:
                self.arrived.wait()
            if len(self.frames) <= self.taken:
                raise LookupError("nothing yet")
            frame = self.frames[self.taken]
            self.frames[self.taken] = b""
        self.taken += 1
        if frame is None:
            raise EOFError("the worker stopped early")
        return marshal.loads(frame)

    def poll(self, *, block: bool = False) -> None:
        """Unpack the parts that have arrived, and the answer to a second round
        once asked (with `block`, up to "claimed all", or to the answer)."""
        try:
            while not self.done and not self.failed:
                if self.claimed_all:
                    if self.apply is None:
                        return  # the question is still to come
                    self.apply(self.parts, self._next(block=block))
                    self._finish()
                    return
                got = self._next(block=block)
                if got == CLAIMED_ALL:
                    self.claimed_all = True
                    if not self.second_round:
                        self._finish()
                    continue
                k, value = got
                if value is not None:  # None: it could not do item k (done here)
                    self.parts[k] = self.unpack(value)
                    self.arrivals.append(k)
        except LookupError:
            return  # nothing more yet
        except Exception:
            self._fail()

    def ask(self, question: Any, apply: Callable[[dict[int, T], Any], None]) -> None:
        """The second round, once it claimed all: send `question`; `apply` puts
        the answer into the parts (by item) as `poll` takes it."""
        self.poll(block=True)
        if self.failed or self.done:
            return
        try:
            self._send(question, last=True)
            self.apply = apply
        except Exception:
            self._fail()

    def _finish(self) -> None:
        """Its last message has arrived: the worker is done. It is left to end on
        its own (a thread reaps it): tearing down a process that read a large
        journal takes the kernel a while, and nothing waits on it."""
        self.done = True
        proc, self.proc = self.proc, None
        if proc is not None:
            threading.Thread(target=proc.wait, daemon=True).start()

    def _fail(self) -> None:
        self.failed = True
        self.stop()

    def stop(self) -> None:
        """End the worker if it is not done, and reap it."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _identity(value: Any) -> Any:
    return value


class Pool(Generic[T]):
    """This process and `task.workers(sizes)` worker processes sharing items
    0..n-1 (files of these sizes) through one queue. Use as a context manager:
    leaving it stops every worker not done and closes the queue.

    `run(here)` is the whole of a one-round task; a task with a second round
    goes step by step: `claims` (and `poll` between them), `received`,
    `ask`, `gather`.
    """

    def __init__(self, task: Task, sizes: list[int],
                 unpack: Callable[[Any], T] = _identity) -> None:
        self.task = task
        self.order = sorted(range(len(sizes)), key=lambda k: -sizes[k])
        count = task.workers(sizes)  # (a bad number is refused even with nothing to share)
        self.queue: Queue | None = None
        if count:
            try:
                self.queue = Queue(self.order)
            except OSError:  # no temporary file to share: this process works alone
                self.queue = None
        self.workers: list[Worker[T]] = []
        if self.queue is not None:
            self.workers = [Worker(task, self.queue.fd, unpack) for _ in range(count)]

    def __enter__(self) -> Pool[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        for worker in self.workers:
            worker.stop()  # a worker still working or waiting, if the caller stopped early
        if self.queue is not None:
            self.queue.close()

    def claims(self) -> Iterator[int]:
        """The items this process does: claimed from the queue it shares, or
        every item, largest first, when it works alone."""
        return iter(self.order) if self.queue is None else claims(self.queue.fd)

    def poll(self) -> None:
        """Unpack what the workers sent meanwhile, without waiting."""
        for worker in self.workers:
            worker.poll()

    def run(self, here: Callable[[int], T]) -> Iterator[tuple[int, T]]:
        """(k, part) of every item once, in the order they are ready: this
        process's claims done by `here`; the workers' parts as they come
        (`Task.streamed`) or once each stream ended whole; last, every item
        not received so, done by `here`."""
        done: set[int] = set()
        for k in self.claims():
            done.add(k)
            yield k, here(k)
            yield from self._fresh(done, block=False)
        yield from self._fresh(done, block=True)
        for k in self.order:
            if k not in done:
                done.add(k)
                yield k, here(k)

    def _fresh(self, done: set[int], *, block: bool) -> Iterator[tuple[int, T]]:
        """The parts received whole that were not handed on yet."""
        for worker in self.workers:
            worker.poll(block=block)
            if worker.failed or not (self.task.streamed or worker.done):
                continue
            while worker.handed < len(worker.arrivals):
                k = worker.arrivals[worker.handed]
                worker.handed += 1
                if k not in done:
                    done.add(k)
                    yield k, worker.parts[k]

    def received(self) -> dict[int, T]:
        """Wait for every worker to have claimed all; the parts of those that
        did (with a second round still to come, they may yet be withdrawn)."""
        for worker in self.workers:
            worker.poll(block=True)
        return {k: part for worker in self.workers if not worker.failed
                for k, part in worker.parts.items()}

    def ask(self, question: Any, apply: Callable[[dict[int, T], Any], None]) -> None:
        """The second round: every worker still in it is sent `question`, and
        `apply` puts its answer into its parts (`gather` waits for them)."""
        for worker in self.workers:
            worker.ask(question, apply)

    def gather(self, parts: list[T | None], here: Callable[[int], T]) -> list[T]:
        """Every item's part: those in `parts` (done here), else one received
        whole from a worker, else done here by `here` now."""
        for worker in self.workers:
            worker.poll(block=True)
            if worker.done and not worker.failed:
                for k, part in worker.parts.items():
                    if parts[k] is None:
                        parts[k] = part
        return [here(k) if part is None else part for k, part in enumerate(parts)]


# -- the worker's side --------------------------------------------------------------------

def serve(background: bool = False) -> None:
    """A worker process (`Worker`). In: the request, (job, args, queue fd,
    recursion limit, integer-digit limit, second round); with a second round,
    later, the question. Out: (k, part) for each item it claims, as soon as it
    is done; "claimed all"; with a second round, the answer."""
    import importlib
    import marshal
    import sys

    from agent_journal.storage.segment_reader import PausedGC

    # Background work (a compaction) yields the cores to the agents' hooks when
    # they compete (the parent keeps its priority, so the work still finishes
    # with a core to itself when one is free).
    if background:
        try:
            os.nice(10)
        except OSError:
            pass
    inp, out = sys.stdin.buffer, sys.stdout.buffer

    def request() -> Any:
        frame = read_frame(inp)
        if frame is None:
            raise SystemExit(2)
        return marshal.loads(frame)

    job_name, args, queue_fd, recursion_limit, digit_limit, second_round = request()
    sys.setrecursionlimit(recursion_limit)
    sys.set_int_max_str_digits(digit_limit)
    module, _, function = job_name.partition(":")
    job = getattr(importlib.import_module(module), function)(args)
    with PausedGC():
        for k in claims(queue_fd):
            write_frame(out, marshal.dumps((k, job.part(k)), 2))
        write_frame(out, marshal.dumps(CLAIMED_ALL, 2))
        if second_round:
            write_frame(out, marshal.dumps(job.answer(request()), 2))
    # Everything is sent: freeing what was read would only keep the caller
    # waiting for this process to end.
    os._exit(0)
