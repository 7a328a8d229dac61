"""What the agent did after a failure: its first few actions, each in a few words.

Invariants: an action is a tool call that succeeded, changed something (not quiet in
test_runs' sense, not a lookup in failures' sense) and is not a run of a command that is
being watched itself (a re-run is the check, not the remedy); a failure keeps its first
ACTIONS distinct actions after it, in order, and stops watching once it has them. The
state is bounded: only the failures the caller still shows are watched (`forget`).
"""

from __future__ import annotations

import os

from agent_journal.core import tools
from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.failures import is_lookup
from agent_journal.core.recovery.test_runs import command_key, core, quiet
from agent_journal.core.recovery.text import clip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ACTIONS = 3  # kept per failure
ACTION_CHARS = 72  # of a command, as an action shows it
_EDITS = frozenset({tools.EDIT, tools.NOTEBOOK_EDIT, tools.WRITE})  # kinds (core/tools.py)
_SHELLS = frozenset({tools.SHELL, tools.OTHER_SHELL})


def action_of(call: Call) -> str | None:
    """The call as an action taken after a failure (`edited a.ts`, `ran `bun install``),
    or None when it is no action: a failed, unfinished, quiet or lookup call."""
    if not call.is_tool_call or not call.succeeded or quiet(call):
        return None
    run = call.check
    if run is not None and not run.ok:
        return None  # a run that still fails: a check, not a remedy
    tool, target = call.tool, call.target
    if is_lookup(tool, target):
        return None
    kind = tools.kind_of(tool)
    if kind in _EDITS and target:
        return f"edited {_base(target)}"
    ops = call.get("fileOps")
    if ops and kind not in _SHELLS:
        return "changed " + ", ".join(dict.fromkeys(_base(op[-1]) for op in ops[:3]))
    if kind in _SHELLS and target:
        command = " ".join(core(command_key(target)).split())
        return f"ran `{clip(command, ACTION_CHARS)}`"
    return None


def _base(path: str) -> str:
    return os.path.basename(path.replace("\\", "/").rstrip("/")) or path


class RemediesFold:
    """remedies as a step-and-state fold over calls in (ts, id) order: failure id ->
    its first actions, the ones still watched apart from those complete."""

    __slots__ = ("watched", "done")

    def __init__(self) -> None:
        self.watched: dict[str, list[str]] = {}  # failure id -> its actions so far
        self.done: dict[str, list[str]] = {}

    def watch(self, failure_id: str) -> None:
        """Start keeping what is done after failure `failure_id` (a later failure of the
        same call id starts again)."""
        self.done.pop(failure_id, None)
        self.watched[failure_id] = []

    def settle(self, failure_id: str) -> None:
        """Failure `failure_id` is resolved: what was done after it is complete."""
        actions = self.watched.pop(failure_id, None)
        if actions is not None:
            self.done[failure_id] = actions

    def step(self, call: Call) -> None:
        if not self.watched:
            return
        action = action_of(call)
        if action is None:
            return
        for failure_id, actions in list(self.watched.items()):
            if action in actions:
                continue
            actions.append(action)
            if len(actions) >= ACTIONS:
                self.done[failure_id] = self.watched.pop(failure_id)

    def of(self, failure_id: str) -> list[str]:
        return self.watched.get(failure_id) or self.done.get(failure_id) or []

    def forget(self, keep: set[str]) -> None:
        """Keep only the failures in `keep`."""
        self.watched = {k: v for k, v in self.watched.items() if k in keep}
        self.done = {k: v for k, v in self.done.items() if k in keep}

    def __len__(self) -> int:
        return len(self.watched) + len(self.done)

    def packed(self) -> list[Any]:
        return [self.watched, self.done]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> RemediesFold:
        fold = cls()
        fold.watched = {k: list(v) for k, v in packed[0].items()}
        fold.done = {k: list(v) for k, v in packed[1].items()}
        return fold
