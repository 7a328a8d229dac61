"""Every agent's tool names in the core's tool vocabulary (core/tools.py), installed there.

Each agent's table says, for each tool name its capture stores, the kind of call it is and
the input fields that name what a call acted on (None: the core's fallback fields; (): no
such field). A new agent adds its table here, and no line of the core.

Invariant: imported once, by agent_journal/__init__.py, before any module of the core can
ask a tool's kind, and cheap enough for the hook's path (it imports only core/tools.py).
"""

from __future__ import annotations

from agent_journal.core import tools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_journal.core.tools import Tool

CLAUDE_CODE: dict[str, Tool] = {
    "Bash": (tools.SHELL, ("command",)),
    "PowerShell": (tools.OTHER_SHELL, None),
    "BashOutput": (tools.SHELL_OUTPUT, ("bash_id",)),
    "KillShell": (tools.SHELL_STOP, ("shell_id",)),
    "TaskOutput": (tools.TASK_OUTPUT, None),
    "Read": (tools.READ, ("file_path",)),
    "NotebookRead": (tools.READ, None),
    "Grep": (tools.SEARCH, ("pattern",)),
    "Glob": (tools.SEARCH, ("pattern",)),
    "LS": (tools.SEARCH, ("path",)),
    "ToolSearch": (tools.SEARCH, ("query",)),
    "WebFetch": (tools.WEB, ("url",)),
    "WebSearch": (tools.WEB, ("query",)),
    "Write": (tools.WRITE, ("file_path",)),
    "Edit": (tools.EDIT, ("file_path",)),
    "MultiEdit": (tools.EDIT, ("file_path",)),
    "NotebookEdit": (tools.NOTEBOOK_EDIT, ("notebook_path", "file_path")),
    "Task": (tools.SUBAGENT, ("description", "prompt")),
    "Agent": (tools.SUBAGENT, ("description", "prompt")),
    "SendMessage": (tools.MESSAGE, ("to", "recipient")),
    "Skill": (tools.SKILL, ("skill", "command")),
    "SlashCommand": (tools.SKILL, ("command",)),
    "ExitPlanMode": (tools.PLAN, None),
    "TodoWrite": (tools.TODO_LIST, ()),
    "TaskCreate": (tools.TASK_CREATE, ("subject",)),
    "TaskUpdate": (tools.TASK_UPDATE, ("taskId",)),
}
# Codex's calls as capture/codex.py stores them: a shell call as Claude Code's `Bash` (older
# captures kept Codex's own shell names, whose input is not parsed), an MCP tool as
# mcp__<server>__<tool>. (`container.exec` has no kind yet.)
CODEX: dict[str, Tool] = {
    "Bash": CLAUDE_CODE["Bash"],
    "shell": (tools.OTHER_SHELL, None),
    "exec_command": (tools.OTHER_SHELL, None),
    "local_shell": (tools.OTHER_SHELL, None),
    "write_stdin": (tools.SHELL_INPUT, None),
    "apply_patch": (tools.PATCH, None),
    "update_plan": (tools.PLAN_STEPS, None),
    "web_search": (tools.WEB, None),
}
# Names by their prefix, any agent's: an MCP server's tools.
PREFIXES = {"mcp__": tools.MCP}

for _table in (CLAUDE_CODE, CODEX):
    tools.install(_table, PREFIXES)
