"""The journal root: where it is, whether it is safe, and its replica id.

Invariants:
- A root that is group- or world-writable is refused, and so is creating one
  whose nearest existing ancestor is (like /tmp itself).
- The replica id is made once per root, on first write, and every later
  process reads the same one back (a race between two first writers is won by
  exactly one of them).
"""

from __future__ import annotations

import os
import stat

from agent_journal.core.errors import JournalError, UnsafeRootError, UsageError
from agent_journal.core.model import validate_id
from agent_journal.storage.files import (
    FILE_MODE,
    check_confined,
    confine_to,
    make_private_dirs,
    read_text,
)
from agent_journal.storage.workspace import Workspace

ENV_ROOT = "AGENT_JOURNAL_ROOT"


def default_root() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "share")
    return os.path.join(base, "agent-journal")


def resolve_root(root: str | os.PathLike[str] | None) -> str:
    """--root, else $AGENT_JOURNAL_ROOT, else the XDG data folder; always absolute.

    Paths are plain strings throughout this module: pathlib costs the hook
    path ~8 ms of imports per process.
    """
    if root is not None and str(root) != "":
        chosen = os.fspath(root)
    else:
        chosen = os.environ.get(ENV_ROOT) or default_root()
    path = os.path.abspath(os.path.expanduser(chosen))
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        # SQLite reports its file names as text; a path that is not UTF-8 cannot be read
        # back, so it is refused before anything is created under it.
        raise UsageError(f"journal root {path!r} is not valid UTF-8") from None
    return path


def refuse_inside_root(path: str, root: str | os.PathLike[str] | None, what: str) -> None:
    """UsageError when `path` (existing or not, links resolved) is the journal root or lies
    inside it: compaction erases only the files it knows, so a copy of the journal
    written there by request (an export, a page, a shared folder) would outlive every
    `compact --apply`."""
    base = os.path.realpath(resolve_root(root))
    real = os.path.realpath(path)
    if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
        raise UsageError(f"{what} {path} is inside the journal root {base}, where compact "
                         "--apply would never erase what it holds; choose a place outside it")


def _shared_writable(mode: int) -> bool:
    return bool(mode & (stat.S_IWGRP | stat.S_IWOTH))


def check_root(path: str, *, create: bool) -> bool:
    """Refuse shared-writable roots. Returns True when the root exists.

    A root others can write to lets them plant or swap segments, so an
    existing group/world-writable root is refused, and so is creating one
    inside a folder that others can write (such as /tmp itself). From here on nothing
    under the root is followed out of it (files.confine_to).
    """
    confine_to(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise JournalError(f"cannot use journal root {path}: {exc.strerror}") from None
    if st is None:
        ancestor = _nearest_existing(path)
        if _shared_writable(os.stat(ancestor).st_mode):
            raise UnsafeRootError(
                f"refusing to create journal root {path}: {ancestor} is group- or "
                "world-writable")
        if create:
            make_private_dirs(path)
            return True
        return False
    if not stat.S_ISDIR(st.st_mode):
        raise JournalError(f"journal root {path} is not a folder")
    if _shared_writable(st.st_mode):
        raise UnsafeRootError(f"refusing journal root {path}: it is group- or world-writable")
    return True


# What every command may touch directly under a root. Checked up front, so a planted link
# is refused before a command starts, whichever helper it would have reached first.
_LAYOUT = ("workspaces", "logs", "logs/hook.log", "cache", "config.json", "thesaurus.json",
           "replica-id")


def check_layout(path: str) -> None:
    """Refuse a root whose own folders (or the projections under cache/) are symbolic
    links or shared-writable folders (UnsafeRootError naming the first one)."""
    for name in _LAYOUT:
        check_confined(os.path.join(path, name))
    cache = os.path.join(path, "cache")
    try:
        areas = os.listdir(cache)
    except OSError:
        return
    for area in areas:
        check_confined(os.path.join(cache, area))


def _nearest_existing(path: str) -> str:
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    return ancestor


class Root:
    """One journal root: a replica id and a folder per workspace."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._replica_id: str | None = None

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, *, create: bool) -> Root:
        path = resolve_root(root)
        if check_root(path, create=create):
            check_layout(path)
        return cls(path)

    @property
    def exists(self) -> bool:
        return os.path.isdir(self.path)

    @property
    def replica_id(self) -> str:
        """Made once per root, on first write; every later process reads it back."""
        if self._replica_id is None:
            self._replica_id = self._load_or_make_replica_id()
        return self._replica_id

    def _load_or_make_replica_id(self) -> str:
        path = os.path.join(self.path, "replica-id")
        try:
            return validate_id(read_text(path).strip(), "replica id")
        except FileNotFoundError:
            pass
        make_private_dirs(self.path)
        candidate = "r" + os.urandom(8).hex()[:15]
        tmp = os.path.join(self.path, f".replica-id.{os.getpid()}.{candidate}")
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
        try:
            os.write(fd, candidate.encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # link() fails if another process won the race; its id then stands.
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return validate_id(read_text(path).strip(), "replica id")

    def workspace(self, name: str) -> Workspace:
        ws = Workspace(self, validate_id(name, "workspace"))
        for path in (ws.segments_dir, os.path.join(ws.path, "artifacts")):
            check_confined(path)
        return ws

    def workspaces(self) -> list[str]:
        folder = os.path.join(self.path, "workspaces")
        if not os.path.isdir(folder):
            return []
        return sorted(n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n)))


def read_replica_id(root_path: str) -> str | None:
    """Another root's replica id, read without creating one."""
    try:
        return read_text(os.path.join(root_path, "replica-id")).strip() or None
    except (OSError, UnicodeDecodeError):
        return None
