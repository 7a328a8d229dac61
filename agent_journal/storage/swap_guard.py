"""The swap guard: a lock on a workspace's segments folder that keeps a
compaction's rename of a copy over a segment (segment_copy.py) apart from
every writer's use of the file under that name.

Why it exists: SQLite finds a rollback journal by the database file's name but
locks the file itself (its inode). A connection still open on a segment that a
copy has replaced (the old inode, no longer named) takes the journal a writer
of the new file is committing with for a crashed writer's ("hot"): it plays it
back into the old file and deletes it. The writer of the new file then fails
its commit (disk I/O error), and a crash before its commit ended would have no
journal to recover from.

Invariants:
- A writer holds the guard shared from the moment it checks that its
  connection holds the file now under the segment's name until its statement
  ends (workspace.Writer): no copy is renamed over the segment meanwhile, so a
  writer never starts a statement on a replaced file.
- A compaction holds it exclusive from before it takes the old file's lock
  until the copy has been renamed over it, and never waits for it while
  holding an SQLite lock (a writer holding the guard may be waiting for one).
  It waits a bounded time; when writers keep the guard busy it gives up, and
  the segment is changed in place.
- Taking the guard writes nothing (the folder itself is locked). A folder that
  does not exist yet holds no segment to replace; a file system that cannot
  lock a folder (some network mounts) is used unguarded, as before.
"""

from __future__ import annotations

import os
import time

from agent_journal.core.errors import BusyError

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

# How long a compaction waits for writers to leave the guard before it changes
# the segment in place instead.
COMPACTION_WAIT_S = 2.0


class SwapGuard:
    """`with SwapGuard(segments_dir, shared=True, wait_s=...)`: held while inside.
    Entering raises BusyError (shared) or TimeoutError (exclusive) after `wait_s`."""

    def __init__(self, folder: str, *, shared: bool, wait_s: float) -> None:
        self.folder = folder
        self.shared = shared
        self.wait_s = wait_s
        self.fd = -1

    def __enter__(self) -> SwapGuard:
        try:
            self.fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return self
        try:
            self._take()
        except BaseException:
            os.close(self.fd)
            self.fd = -1
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor releases the lock
            self.fd = -1

    def _take(self) -> None:
        import fcntl

        mode = (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        deadline = time.monotonic() + self.wait_s
        pause = 0.001
        while True:
            try:
                fcntl.flock(self.fd, mode)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise self._gave_up() from None
            except OSError:
                return  # a folder this file system cannot lock: unguarded
            time.sleep(pause)  # the holder's work is short: a statement or a rename
            pause = min(pause * 2, 0.02)

    def _gave_up(self) -> Exception:
        if self.shared:
            return BusyError("the journal stayed locked by a compaction; retry")
        return TimeoutError(f"writers kept {self.folder} busy")


def writer_guard(segments_dir: str) -> Any:
    """Held by a writer around each statement on its current segment."""
    from agent_journal.storage import connection

    return SwapGuard(segments_dir, shared=True, wait_s=connection.BUSY_TIMEOUT_S)


def swap_guard(segments_dir: str) -> SwapGuard:
    """Held by a compaction around the rename of a copy over a segment."""
    return SwapGuard(segments_dir, shared=False, wait_s=COMPACTION_WAIT_S)
