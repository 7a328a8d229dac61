"""A root's fork to a new replica id, and the ids whose own segments it still owns.

A root copied to another machine (or restored from a backup) keeps its replica id;
when a push finds that another root wrote under that id, this root takes a new id
(spec/SYNC.md, "A root copied or restored"). Invariants:
- The root's segments keep their names and bytes: nothing is renamed or rewritten,
  so a writer that read the old id just before the fork appends to a file this root
  still owns. New own segments are named after the new id.
- The old id is added to `replica-ancestors` (one id per line, 0600) before the new
  id replaces `replica-id`: a root killed between the two writes has both ids
  owning the old segments, never neither. The segments named after any id listed
  there stay this root's own to push (under its current id), so an event written
  under the old id after the roots parted is never stranded.
- One fork at a time per root (a lock file), and a fork of an id that is no longer
  the root's current one does nothing: two pushes that both found the copy make
  one new id.
"""

from __future__ import annotations

import os

from agent_journal.core.model import validate_id
from agent_journal.storage.files import check_confined, read_text, write_file_atomic
from agent_journal.storage.locks import FileLock
from agent_journal.storage.root import Root, read_replica_id

ANCESTORS = "replica-ancestors"
_LOCK = ".replica-fork.lock"


def ancestors(root_path: str) -> tuple[str, ...]:
    """The ids this root wrote under before its current one, oldest first."""
    path = os.path.join(root_path, ANCESTORS)
    try:
        text = read_text(path)
    except FileNotFoundError:
        return ()
    return tuple(validate_id(line.strip(), "replica id")
                 for line in text.splitlines() if line.strip())


def own_replicas(root: Root) -> frozenset[str]:
    """Every id whose `<id>-NNNNNN.sqlite` segments are this root's own."""
    return frozenset((root.replica_id, *ancestors(root.path)))


def fork(root: Root, old: str) -> str:
    """Give the root a new replica id in place of `old` (unless another process did
    already); the root's id after it, which `root` now answers too."""
    for name in (ANCESTORS, "replica-id", _LOCK):
        check_confined(os.path.join(root.path, name))
    with FileLock(os.path.join(root.path, _LOCK)):
        current = read_replica_id(root.path)
        if current is None or current != old:
            new = validate_id(current or "", "replica id")
        else:
            new = "r" + os.urandom(8).hex()[:15]
            kept = [r for r in ancestors(root.path) if r != old] + [old]
            write_file_atomic(os.path.join(root.path, ANCESTORS),
                              "".join(f"{r}\n" for r in kept).encode())
            write_file_atomic(os.path.join(root.path, "replica-id"), f"{new}\n".encode())
    root._replica_id = new  # the Root caches its id; from now on it is this one
    return new
