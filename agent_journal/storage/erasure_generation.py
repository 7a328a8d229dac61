"""The erasure generation: what keeps a projection read before a compaction from
being stored after it.

Invariant: once `compact --apply` has returned, nothing under <root>/cache holds
a row it erased. A compaction bumps the workspace's generation (a fresh random
token in `cache/erasure/locks/<ws>.generation`, under an exclusive flock on
that file; the sweep leaves `locks/` folders alone)
after its deletions and before it clears the projections. Every projection
writer notes the generation before it reads the segments, and stores (renames
into place, commits) only while holding the same file locked shared with the
generation unchanged. So a store either lands before the bump, and the clearing
that follows deletes it, or sees the bump and is dropped: the writer's command
still answers from what it read, only the cache is not kept.

A token rather than a counter: a file removed by hand and bumped again can
never show a reader the value it noted. A missing file is generation "".
"""

from __future__ import annotations

import os

from agent_journal.storage.files import FILE_MODE, check_confined, make_private_dirs

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from agent_journal.storage.workspace import Workspace


def _path(ws: Workspace) -> str:
    # Under cache/, so a read-only command (a dry run) changes nothing beside the
    # segments; a folder named `locks`, which no sweep of projections removes.
    return os.path.join(ws.root.path, "cache", "erasure", "locks", ws.name + ".generation")


def _read(fd: int) -> str:
    return os.pread(fd, 64, 0).decode("ascii", "replace")


def noted(ws: Workspace) -> str:
    """The generation now: taken by a projection writer before it reads."""
    import fcntl

    try:
        fd = os.open(_path(ws), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return ""
    except OSError:
        return "?"  # never equal to a token: the store is dropped
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _read(fd)
    finally:
        os.close(fd)


class Storing:
    """`with Storing(ws, noted) as unchanged:` store only when `unchanged`;
    the generation cannot move until the block is left."""

    def __init__(self, ws: Workspace, generation: str) -> None:
        self.path = _path(ws)
        self.generation = generation
        self.fd = -1

    def __enter__(self) -> bool:
        import fcntl

        try:
            make_private_dirs(os.path.dirname(self.path))
            check_confined(self.path)
            self.fd = os.open(self.path, os.O_CREAT | os.O_RDONLY | os.O_NOFOLLOW, FILE_MODE)
            fcntl.flock(self.fd, fcntl.LOCK_SH)
            return _read(self.fd) == self.generation
        except OSError:
            return False

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the flock
            self.fd = -1


def bump(ws: Workspace) -> None:
    """Move the generation on (compaction, after its deletions, before clearing the
    projections): every store noted before now is dropped from here on. Waits for
    stores in progress, which hold the lock only while they store."""
    import fcntl

    path = _path(ws)
    make_private_dirs(os.path.dirname(path))
    check_confined(path)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        token = os.urandom(16).hex().encode("ascii")
        os.ftruncate(fd, 0)
        os.pwrite(fd, token, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
