"""The sync handlers `hooks install --sync` adds beside the capture hook (spec/SYNC.md,
"Syncing from an agent's hooks").

Invariants:
- They are separate handlers running `agent-journal hook sync-start|sync-end` (a pull or push
  `--within` its bound; a fail-open command, like the capture hook: whatever goes wrong,
  even a usage error, is logged and the agent sees exit 0, never the 2 that would block
  it), never the capture hook (`agent-journal hook AGENT`): the capture path imports
  nothing of sync, and a sync that hangs or fails holds and fails nothing of the capture.
- The pull at session start waits at most PULL_WITHIN_S for itself (then goes on in the
  background), and is written after the capture handler, so an agent that runs an
  event's handlers one after another builds the session's context first; the push at
  session end does not wait at all. Both exit 0 whatever happens (ops/sync_background.py).
- A handler is ours (to replace on install, remove on uninstall) whichever installation,
  root or bound it names.
"""

from __future__ import annotations

import os
import shlex

from agent_journal.agents.hook_command import SCRIPT, shared_command, stable_executable

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.agents.agent import Agent, Target

PULL_WITHIN_S = 3
# The bound of `hook sync-start` and `hook sync-end` (cli/replica_commands.py), seconds.
WITHIN = {"start": PULL_WITHIN_S, "end": 0}
# What the agent allows each handler before it ends it (seconds): well past the bound,
# which the command keeps itself.
TIMEOUT_S = 15
# The event that ends a session, per agent (Codex has none: its Stop ends each turn).
END_EVENT = {"claude-code": "SessionEnd", "codex": "Stop"}


def handlers(agent: Agent, target: Target, extra: list[str]) -> dict[str, dict[str, Any]]:
    words = shared_command(target.path) if target.shared else stable_executable()

    def handler(when: str) -> dict[str, Any]:
        command = " ".join(shlex.quote(w) for w in [*words, "hook", f"sync-{when}", *extra])
        return {"type": "command", "command": command, "timeout": TIMEOUT_S}

    return {"SessionStart": handler("start"), END_EVENT[agent.name]: handler("end")}


def is_sync_handler(handler: Any) -> bool:
    """An agent-journal sync handler (`hook sync-start|sync-end`), whichever installation."""
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if len(words) >= 3 and words[1:3] == ["-m", "agent_journal"]:
        words = words[2:]
    elif not words or os.path.basename(words[0]) != SCRIPT:
        return False
    return len(words) >= 3 and words[1:3] in (["hook", "sync-start"], ["hook", "sync-end"])
