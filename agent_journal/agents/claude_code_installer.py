"""`hooks install|uninstall claude-code`: our hook entries in Claude Code's settings.

Scopes: `project` (the shared, committed .claude/settings.json), `local`
(.claude/settings.local.json, personal) and `user` (~/.claude/settings.json). Project and
local installs also write the project's .agent-journal.toml (workspace, and the root when
one was given), so the command itself names no workspace and is the same at every scope and
in the plugin's hooks/hooks.json.

Invariants: those of hook_settings (everything else kept, idempotent, exact uninstall,
strict JSON, checks before writes, a stable command); the events, timeouts and the async
flag below are the only Claude Code specifics.

The capture hooks (ASYNC_EVENTS, one or two per tool call) run with `"async": true`: Claude
Code starts them and goes on with the call without waiting, so they cost the agent only
their spawn. Nothing the agent reads comes from them (they print nothing). Claude Code ends
async hooks still running when the session ends (2.1.337 sends them SIGTERM as `claude -p`
exits), so the last call's PostToolUse may be cut off: the SessionEnd hook, and failing
that the next SessionStart, complete the session's calls from its transcript
(claude_code_hook; tests/test_real_clients.py runs both against the real client). The
other events stay synchronous: SessionStart's output is the context the agent is given,
and the rest come once per turn or session.
"""

from __future__ import annotations

import os
from typing import Any

from agent_journal.agents import hook_settings
from agent_journal.agents.hook_settings import (
    Change,
    Target,
    hook_executable,
    is_ours_for,
)

__all__ = ["EVENTS", "Change", "hook_command", "hook_executable", "install", "is_ours",
           "uninstall"]

AGENT = "claude-code"
# The events the hook journals, in the order they are written into settings.json.
# PermissionDenied is the end of a call the auto-mode classifier refused (nothing else
# follows its PreToolUse).
EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied",
          "UserPromptSubmit", "SessionStart", "PreCompact", "PostCompact", "Stop",
          "SubagentStop", "SessionEnd")
# Run in the background: the per-call capture, which must cost the agent nothing.
ASYNC_EVENTS = frozenset(("PreToolUse", "PostToolUse", "PostToolUseFailure",
                          "PermissionDenied"))
# Seconds. The hook gives up on a locked journal after ~16 s at worst (hook.py); SessionStart
# also reads the workspace to build its context.
TIMEOUTS = {"SessionStart": 60}
DEFAULT_TIMEOUT = 30
FILES = {"project": os.path.join(".claude", "settings.json"),
         "local": os.path.join(".claude", "settings.local.json")}


class ClaudeCode(hook_settings.AgentSpec):
    name = AGENT

    def target(self, scope: str, folder: str | None) -> Target:
        if scope == "user":
            home = os.path.expanduser("~")
            return Target(os.path.join(home, ".claude", "settings.json"), None, False)
        assert folder is not None
        return Target(os.path.join(folder, FILES[scope]), folder, scope == "project")

    def handlers(self, command: str) -> dict[str, dict[str, Any]]:
        return {event: handler(event, command) for event in EVENTS}


SPEC = ClaudeCode()


def handler(event: str, command: str) -> dict[str, Any]:
    found: dict[str, Any] = {"type": "command", "command": command,
                             "timeout": TIMEOUTS.get(event, DEFAULT_TIMEOUT)}
    if event in ASYNC_EVENTS:
        found["async"] = True
    return found


def hook_command(extra: list[str] | None = None) -> str:
    """The command install writes when the agent-journal on PATH is this installation."""
    import shlex

    return " ".join(shlex.quote(w) for w in ["agent-journal", "hook", AGENT] + (extra or []))


def is_ours(handler: Any) -> bool:
    """An agent-journal Claude Code hook handler, whichever installation or workspace."""
    return is_ours_for(AGENT, handler)


install, uninstall = hook_settings.entry_points(SPEC)
