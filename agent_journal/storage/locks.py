"""Locks between processes: one folder lock per workspace operation that must run alone.

Invariants:
- A lock is an flock on a private file; the kernel drops it when its process
  dies, so a killed holder never leaves the workspace locked.
- One `compact --apply` and one merge at a time per workspace; a second waits
  a bounded time, then refuses.
- A lock file that cannot be opened (a read-only root) is a StorageError naming it.
"""

from __future__ import annotations

import os
import time

from agent_journal.core.errors import StorageError
from agent_journal.storage.files import (
    FILE_MODE,
    check_confined,
    make_private_dirs,
    unlink_quietly,
)
from agent_journal.storage.segment import IMPORT_TEMP_PREFIX

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.storage.workspace import Workspace


def _open_lock_file(path: str) -> int:
    try:
        return os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        raise StorageError(f"cannot open the lock file {path}: {exc.strerror or exc}"
                           ) from None


class FileLock:
    """An exclusive advisory lock (flock): a projection being brought up to
    date (a lock file, created), or a workspace being compacted (its existing
    folder: taking it writes nothing).

    With `wait_s`, entering gives up after that long with BlockingIOError
    instead of waiting for whoever holds it.
    """

    def __init__(self, path: str, *, wait_s: float | None = None, folder: bool = False) -> None:
        self.path = path
        self.wait_s = wait_s
        self.folder = folder
        self.fd = -1

    def __enter__(self) -> FileLock:
        import fcntl

        check_confined(self.path)
        if self.folder:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        else:
            make_private_dirs(os.path.dirname(self.path))
            self.fd = _open_lock_file(self.path)
        try:
            if self.wait_s is None:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + self.wait_s
                while True:
                    try:
                        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise
                        time.sleep(0.05)
        except BlockingIOError:
            os.close(self.fd)
            raise
        except OSError:
            if not self.folder:
                os.close(self.fd)
                raise
            # A filesystem that cannot lock a folder (some network mounts
            # emulate flock with locks that need a writable descriptor): go
            # on unlocked, as every run did before this lock existed.
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the descriptor releases the flock
        self.fd = -1


# A second `compact --apply` waits this long for the first, then refuses.
COMPACT_LOCK_WAIT_S = 5.0


def compaction_lock(ws: Workspace) -> Any:
    """Held for the whole of an applied compaction: two at once would each
    overwrite the other's intent file, and a blob only the lost one named
    could outlive both. The lock is the workspace folder itself, so a
    refused run still writes nothing; a workspace with no folder has nothing
    to compact and needs none."""
    if not os.path.isdir(ws.path):
        from contextlib import nullcontext

        return nullcontext()
    return FileLock(ws.path, wait_s=COMPACT_LOCK_WAIT_S, folder=True)


MERGE_LOCK_NAME = ".merge.lock"


class MergeLock:
    """One merge at a time per workspace, so two merges never import the same event twice."""

    def __init__(self, ws: Workspace) -> None:
        self.path = os.path.join(ws.path, MERGE_LOCK_NAME)
        self.segments_dir = ws.segments_dir
        self.fd = -1

    def __enter__(self) -> MergeLock:
        import fcntl

        make_private_dirs(self.segments_dir)
        check_confined(self.path)
        self.fd = _open_lock_file(self.path)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        # Under the lock no other merge is running: any temp import is a leftover.
        for name in os.listdir(self.segments_dir):
            if name.startswith(IMPORT_TEMP_PREFIX):
                unlink_quietly(os.path.join(self.segments_dir, name))
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def remove_import_leftovers(ws: Workspace) -> bool:
    """Delete the temporary imports killed merges left beside the segments (they hold
    what those merges had copied), when no merge is running; False, leaving everything,
    when one is (its temporary import is live, and the merge publishes or drops it)."""
    import fcntl

    path = os.path.join(ws.path, MERGE_LOCK_NAME)
    if not os.path.isdir(ws.segments_dir):
        return True
    check_confined(path)
    fd = _open_lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            for name in os.listdir(ws.segments_dir):
                if name.startswith(IMPORT_TEMP_PREFIX):
                    unlink_quietly(os.path.join(ws.segments_dir, name))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs here (one this user may not signal counts as
    running): what a claim or a staging folder named after its process is judged by."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def warm_lock(ws: Workspace) -> int | None:
    """The lock a detached digest of `ws` holds for as long as it runs (the caller hands
    the descriptor to that process and closes its own): a file descriptor with the lock
    taken, or None when another such process holds it (or the lock cannot be made)."""
    import fcntl

    from agent_journal.storage.cache import cache_lock_path

    path = cache_lock_path(ws.root, "digest", ws.name + ".warm")
    try:
        check_confined(path)
        make_private_dirs(os.path.dirname(path))
        fd = _open_lock_file(path)
    except (OSError, StorageError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
