"""The working tree as the latest `git status` listed it, while no git command changed it.

Invariant: the listing is that of the latest successful call whose command ran `git
status` and whose output git_output.working_tree reads; it is shown only while no later
call ran a git command that changes what `git status` lists (a commit, rebase, merge,
stash, reset, checkout, restore, add, rm, mv, cherry-pick, am, apply, pull, switch,
revert, clean), whether or not that command printed so. Unrelated calls change nothing.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from agent_journal.core.recovery.calls import Call

_GIT_CHANGES = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?(?:commit|rebase|merge|stash|reset|checkout|"
                          r"restore|add|rm|mv|cherry-pick|am|apply|pull|switch|revert|clean)\b")


class WorkingTreeFold:
    """[call id, ts, [[state, path]...]] of the latest listing, and the time of the latest
    git command that changes it."""

    __slots__ = ("listing", "changed")

    def __init__(self) -> None:
        self.listing: list[Any] | None = None
        self.changed: str | None = None

    def step(self, call: Call) -> None:
        target = call.target or ""
        if not call.is_tool_call or "git" not in target:
            return
        if _GIT_CHANGES.search(target):
            self.changed = call.ts
        tree = call.get("tree")
        if call.succeeded and tree is not None and "git status" in target:
            self.listing = [call.id, call.ts, tree]

    def standing(self) -> list[Any] | None:
        """The latest listing, unless a git command changed the tree since."""
        listing = self.listing
        if listing is None or (self.changed is not None and self.changed >= listing[1]):
            return None
        return listing

    def packed(self) -> list[Any]:
        return [self.listing, self.changed]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> WorkingTreeFold:
        fold = cls()
        fold.listing, fold.changed = packed
        return fold


def working_tree(calls: Iterable[Call]) -> list[Any] | None:
    """The standing listing of `calls` (in (ts, id) order), or None."""
    fold = WorkingTreeFold()
    for call in calls:
        fold.step(call)
    return fold.standing()
