"""The handlers of `hook AGENT`: one agent hook payload on stdin, journaled.

Invariants:
- It fails open (`fail_open` in the command table): a failure past the hook's choice of a
  root, or in printing, is logged at that root, after the SessionStart context is
  printed; one before it reaches cli.run, which logs it. Exit 0 always.
- It is the hottest path of the package: this module imports nothing at its top, and the
  renderer (cli/output.py) only when there is something to print (SessionStart).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


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
