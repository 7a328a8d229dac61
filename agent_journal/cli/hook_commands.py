"""The handlers of `hook AGENT`: one agent hook payload on stdin, journaled.

Invariants:
- It fails open (`fail_open` in the command table): a failure past the hook's choice of a
  root, or in printing, is logged at that root, after the SessionStart context is
  printed; one before it reaches cli.run, which logs it. Exit 0 always.
- It is the hottest path of the package: this module imports nothing at its top but the
  parser's row types, and the renderer (cli/output.py) only when there is something to
  print (SessionStart). Its rows (HOOK_COMMANDS) are declared here and joined to the
  command table (cli/commands.py), so a hook process parses its arguments by the same
  parser without building the table.
"""

from __future__ import annotations

import sys

from agent_journal.cli.argv import ENV_ROOT, ENV_WORKSPACE, Command, Opt

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


# The hook and the installers take the root only from the flag or $AGENT_JOURNAL_ROOT: the
# hook finds the project file from the payload's cwd itself, and install writes one.
PLAIN_ROOT = Opt("root", "--root", "Journal root folder (default: $AGENT_JOURNAL_ROOT, else "
                 "$XDG_DATA_HOME/agent-journal).", metavar="DIR", env=ENV_ROOT)

HOOK_WORKSPACE = Opt("workspace", "--workspace", "Workspace id (default: "
                     "$AGENT_JOURNAL_WORKSPACE, else the .agent-journal.toml found from the "
                     "payload's cwd, else the name of that cwd folder).",
                     env=ENV_WORKSPACE, metavar="ID", type="id")

SYNC_HOOK_WORKSPACE = Opt("workspace", "--workspace", "Workspace id (default: "
                          "$AGENT_JOURNAL_WORKSPACE, else the .agent-journal.toml found from "
                          "the current folder).", env=ENV_WORKSPACE, metavar="ID", type="id",
                          project="workspace")

# The rows of `hook AGENT` and of the session syncs `hook sync-start|sync-end`, every one
# failing open (joined to the table in cli/commands.py).
HOOK_COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("hook claude-code", "Journal one Claude Code hook payload read on stdin (run by "
            "Claude Code; never fails the agent: errors go to <root>/logs/hook.log and exit "
            "0).", "hook_commands:cmd_hook_claude_code", opts=(HOOK_WORKSPACE, PLAIN_ROOT),
            fail_open=True),
    Command("hook codex", "Journal one Codex CLI hook payload read on stdin (run by Codex; "
            "never fails the agent: errors go to <root>/logs/hook.log and exit 0).",
            "hook_commands:cmd_hook_codex", opts=(HOOK_WORKSPACE, PLAIN_ROOT),
            fail_open=True),
    Command("hook sync-start", "Pull, waited for at most 3 s, then left to finish in the "
            "background (run by an agent at session start; never fails the agent: errors go "
            "to <root>/logs/hook.log and <root>/logs/sync.log, and exit 0).",
            "replica_commands:cmd_sync_hook_start", opts=(SYNC_HOOK_WORKSPACE, PLAIN_ROOT),
            fail_open=True),
    Command("hook sync-end", "Push in the background, not waited for (run by an agent at "
            "session end; never fails the agent: errors go to <root>/logs/hook.log and "
            "<root>/logs/sync.log, and exit 0).", "replica_commands:cmd_sync_hook_end",
            opts=(SYNC_HOOK_WORKSPACE, PLAIN_ROOT), fail_open=True),
)}


def cmd_hook_claude_code(a: dict[str, Any]) -> int:
    return _hook("claude-code", a)


def cmd_hook_codex(a: dict[str, Any]) -> int:
    return _hook("codex", a)


def _hook(name: str, a: dict[str, Any]) -> int:
    """One hook payload of agent `name` (agents/agent.py), journaled by the one hook of
    every agent (agents/hook.py)."""
    from agent_journal.agents import hook
    from agent_journal.agents.agent import agent
    from agent_journal.core.errors import JournalError

    if sys.stdin is None:
        raise JournalError("no hook payload: stdin is closed")
    result = hook.run(agent(name), sys.stdin.buffer, root=a["root"],
                      workspace=a["workspace"])
    failure = result.failure
    if result.stdout is not None:
        from agent_journal.cli import output

        try:
            output.emit_line(result.stdout)
            output.flush()
        except BaseException as exc:
            failure = failure or exc
    if failure is not None:
        from agent_journal.cli.common import log_failed_open

        log_failed_open(f"hook {name}", [], failure, root=result.root)
    return 0
