"""Each checkout's working tree as its latest `git status` listed it, while no git command
changed it.

Invariant: a listing is that of the latest successful call whose command ran `git status`
in a folder (its `git -C DIR`, a leading `cd DIR &&`, the call's own working folder, else
the session's) and whose output git_output.working_tree reads; it is shown only while no
later call ran, in that folder, a folder inside it or one it lies in, a git command that
changes what `git status` lists (a commit, rebase, merge, stash, reset, checkout, restore,
add, rm, mv, cherry-pick, am, apply, pull, switch, revert, clean), whether or not that
command printed so. Unrelated calls change nothing. The latest STANDING listings show, the
newest first, each naming its folder.
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.git_output import ran_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from agent_journal.core.recovery.calls import Call

_GIT_CHANGES = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?(?:commit|rebase|merge|stash|reset|checkout|"
                          r"restore|add|rm|mv|cherry-pick|am|apply|pull|switch|revert|clean)\b")
_GIT_DIR = re.compile(r"\bgit\s+-C\s+(\S+)")
_CD = re.compile(r"^\s*(?:cd|Set-Location)\s+(\S+)\s*(?:&&|;)")
STANDING = 2  # listings shown: the session's checkout and one more (a worktree)
KEPT = 8  # listings the fold keeps, the latest of each folder


def _folder(call: Call) -> str:
    """The folder a call's git command ran in, as an absolute path when it can tell."""
    import posixpath

    target = call.target or ""
    base = call.get("workdir") or call.get("cwd") or ""
    named = _GIT_DIR.search(target) or _CD.match(target)
    if named is None:
        return str(base)
    where = named.group(1).strip("'\"")
    if where.startswith("/") or not str(base).startswith("/"):
        return where
    return posixpath.normpath(posixpath.join(str(base), where))


def _related(a: str, b: str) -> bool:
    """Whether one folder is the other or lies in it (one repository, as far as a change
    in one can change what `git status` lists in the other)."""
    a, b = a.rstrip("/\\"), b.rstrip("/\\")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/") or not a or not b


class WorkingTreeFold:
    """folder -> [call id, ts, [[state, path]...], folder] of its latest listing, and the
    listings a later git command changed (dropped)."""

    __slots__ = ("listings",)

    def __init__(self) -> None:
        self.listings: dict[str, list[Any]] = {}

    def step(self, call: Call) -> None:
        target = call.target or ""
        if not call.is_tool_call or "git" not in target:
            return
        folder = _folder(call)
        if _GIT_CHANGES.search(target):
            for other in [k for k in self.listings if _related(k, folder)]:
                del self.listings[other]
        tree = call.get("tree")
        if call.succeeded and tree is not None and ran_status(target):
            self.listings.pop(folder, None)
            self.listings[folder] = [call.id, call.ts, tree, folder]
            if len(self.listings) > KEPT:
                del self.listings[next(iter(self.listings))]

    def standing(self) -> list[list[Any]]:
        """The listings no git command changed since, the newest first (at most STANDING)."""
        return list(reversed(list(self.listings.values())))[:STANDING]

    def packed(self) -> list[Any]:
        return [list(self.listings.values())]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> WorkingTreeFold:
        fold = cls()
        fold.listings = {listing[3]: listing for listing in packed[0]}
        return fold


def working_tree(calls: Iterable[Call]) -> list[list[Any]]:
    """The standing listings of `calls` (in (ts, id) order), the newest first."""
    fold = WorkingTreeFold()
    for call in calls:
        fold.step(call)
    return fold.standing()
