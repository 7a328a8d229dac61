"""A push that finds another root writing under its replica id forks this root.

spec/SYNC.md, "A root copied or restored". Invariants:
- The fork happens before the push writes anything to the remote, and only when
  the own manifest in place was written by another root (sync_push.AnotherRoot).
- It loses and strands nothing: the root's segments stay as they are and stay its
  own to push (storage/replica_fork.py), so the push that forked goes on under the
  new id with every event this root holds, those written after the roots parted
  included; the old id's prefix is left to the other root, and from now on this
  root pulls it like any other replica's.
- A root that forked pushes only while it holds every tombstone the manifests of the
  ids it forked from name (PullFirst otherwise, checked at each push, one read per
  such id): what the other root erased is not published again under the new id; a
  pull brings the tombstones.
"""

from __future__ import annotations

from typing import Any

from agent_journal.core.errors import ConflictError
from agent_journal.storage.replica_fork import fork as fork_root
from agent_journal.storage.workspace import Workspace


class PullFirst(ConflictError):
    """A root that forked must pull the tombstones the manifest of an id it forked from
    names before it pushes (`forked`: the fork this very push made, if it made one)."""

    def __init__(self, old: str, count: int, forked: dict[str, Any] | None = None) -> None:
        super().__init__(
            (f"{forked['reason']}. " if forked is not None else "")
            + f"Nothing was pushed: the manifest of replica {old}, which this root forked "
            f"from, names {count} tombstone(s) this root does not hold (the other root "
            "erased what this root still holds): pull first (it brings them), then push; "
            "`sync` does both")
        self.old, self.count, self.forked = old, count, forked


def fork(ws: Workspace, url: str, why: str) -> dict[str, Any]:
    """Fork the root of `ws` away from its current id; the report's `forked` object."""
    old = ws.root.replica_id
    new = fork_root(ws.root, old)
    return {"from": old, "to": new, "why": why,
            "reason": (f"replica {old}'s manifest in {url} was written by another root with "
                       f"this replica id ({why}): a copy of this root, or this root restored "
                       f"from a backup. This root is now replica {new}; its events, those "
                       f"written since the roots parted included, are pushed under {new}, "
                       f"and {old}'s are pulled like any other replica's")}

