"""`hooks install|uninstall codex`: our hook entries in a Codex hooks.json.

Scopes: `project` (<project>/.codex/hooks.json) and `user` (~/.codex/hooks.json, or
$CODEX_HOME/hooks.json when Codex is told to live elsewhere). The file has Claude Code's
shape, and Codex refuses one with any top-level key but `description` and `hooks`, so an
existing file with others is refused rather than edited, and install adds none.

Invariants: those of hook_settings. The command string is the same on every install (no
workspace in it; the project file names it), because Codex asks the user to trust a hook
again whenever its command changes. SessionStart's handler raises Codex's
`additionalContextLimit` (tokens; 2,500 by default, past which the context is moved to a
file) to fit the whole context the hook prints.
"""

from __future__ import annotations

import os
from typing import Any

from agent_journal.agents import hook_settings
from agent_journal.agents.hook_settings import Target

AGENT = "codex"
# Codex's hook events (developers.openai.com/codex/hooks; openai/codex
# codex-rs/hooks/schema/generated/*.command.input.schema.json), in the order written.
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PreCompact",
          "PostCompact", "Stop")
TIMEOUTS = {"SessionStart": 60}
DEFAULT_TIMEOUT = 30
# The SessionStart context is at most MAX_CONTEXT_CHARS (10,000) characters; at the usual
# three to four characters a token that is under 3,500 tokens.
CONTEXT_LIMIT_TOKENS = 4000
DESCRIPTION = "agent-journal: journals this Codex session (agent-journal hooks install codex)"


def codex_home() -> str:
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


class Codex(hook_settings.AgentSpec):
    name = AGENT
    allowed_top = ("description", "hooks")
    new_file = {"description": DESCRIPTION}

    def target(self, scope: str, folder: str | None) -> Target:
        if scope == "user":
            return Target(os.path.join(codex_home(), "hooks.json"), None, False)
        assert folder is not None
        return Target(os.path.join(folder, ".codex", "hooks.json"), folder, True)

    def handlers(self, command: str) -> dict[str, dict[str, Any]]:
        return {event: handler(event, command) for event in EVENTS}


SPEC = Codex()


def handler(event: str, command: str) -> dict[str, Any]:
    found: dict[str, Any] = {"type": "command", "command": command,
                             "timeout": TIMEOUTS.get(event, DEFAULT_TIMEOUT)}
    if event == "SessionStart":
        found["additionalContextLimit"] = CONTEXT_LIMIT_TOKENS
    return found


install, uninstall = hook_settings.entry_points(SPEC)
