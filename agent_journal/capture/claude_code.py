"""Claude Code's hook payloads: the record of what they call things, and how a call ends.

Invariant: what is Claude Code's own lives here as data, a `HookFormat` (its events, the
fields that hold a call's output, the kinds of its session events, what a session said) and
`outcome`, how its payload says a call ended; capture/hook_payload.py normalises every
agent's payload by its record, so every dict returned has passed the redactor and has
exactly OBSERVATION_KEYS. Its session transcripts are read by claude_code_transcript.py.
Pure, and on the hook's path: nothing here reads files or imports `re` or `json`.
"""

from __future__ import annotations

from agent_journal.capture.hook_payload import (
    HookFormat,
    HookPayloadError,
    parse_hook_payload,
)
from agent_journal.capture.observation import (
    ASSISTANT,
    COMPACT,
    DEFAULT_WORKSPACE,
    OBSERVATION_KEYS,
    PROMPT,
    SAID_KINDS,
    SESSION_EVENT,
    SUBAGENT,
    NotATranscriptError,
    code_at,
    safe_id,
    said_id,
    sanitise_workspace_id,
)

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.capture.redact import Redactor

__all__ = [
    "ASSISTANT",
    "COMPACT",
    "DEFAULT_WORKSPACE",
    "FILE_WRITE_TOOLS",
    "HOOK",
    "OBSERVATION_KEYS",
    "PROMPT",
    "SAID_KINDS",
    "SESSION_EVENT",
    "SUBAGENT",
    "HookPayloadError",
    "NotATranscriptError",
    "hook_to_observation",
    "is_file_write",
    "main_input",
    "parse_hook_payload",
    "safe_id",
    "said_id",
    "sanitise_workspace_id",
]

FILE_WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})

# Hook events that describe one tool call; every other event is a session-level observation.
# PermissionDenied ends a call the auto-mode classifier refused: it never ran, and without
# this end its PreToolUse would stand as a call whose outcome is unknown.
TOOL_EVENTS = {"PreToolUse": "started", "PostToolUse": "ok", "PostToolUseFailure": "error",
               "PermissionDenied": "error"}
# The payload field each finishing event hands over as the call's output.
OUTPUT_FIELDS = {"PostToolUse": "tool_response", "PostToolUseFailure": "error",
                 "PermissionDenied": "reason"}
SESSION_KINDS = {
    "SessionStart": "session_start",
    "PreCompact": "pre_compact",
    "Stop": "stop",
    "SessionEnd": "session_end",
}
# What the session said: the hook event, the payload field lifted into `text`, and the kind.
# The text is taken out of the payload so it is stored (and, when large, kept as an
# artifact) once.
SAID = {
    "UserPromptSubmit": ("prompt", PROMPT),
    "Stop": ("last_assistant_message", ASSISTANT),
    "SubagentStop": ("last_assistant_message", SUBAGENT),
    "PostCompact": ("compact_summary", COMPACT),
}
# Lifted into `input`/`output` (with the event's OUTPUT_FIELDS); the rest of a tool event's
# payload (cwd, permission_mode, prompt_id, is_interrupt, ...) is small context and stays
# in `data`.
LIFTED = frozenset({"tool_input", "tool_response", "error"})
# How Claude Code reports a failed shell command, in hook errors and transcript results alike.
_EXIT_CODE = r"Exit code (\d{1,9})\b"

# Input field(s) that best show what a call did, tried in order. An empty tuple means the tool
# has no such field (TodoWrite's list, ExitPlanMode's plan), so no fallback is attempted.
_MAIN_FIELDS: dict[str, tuple[str, ...]] = {
    "Bash": ("command",),
    "BashOutput": ("bash_id",),
    "KillShell": ("shell_id",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "NotebookRead": ("notebook_path",),
    "Grep": ("pattern",),
    "Glob": ("pattern",),
    "LS": ("path",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "ToolSearch": ("query",),
    "Task": ("description", "prompt"),
    "Agent": ("description", "prompt"),
    "TaskCreate": ("subject",),
    "TaskUpdate": ("taskId",),
    "TaskGet": ("taskId",),
    "SendMessage": ("to", "recipient"),
    "Skill": ("skill", "command"),
    "SlashCommand": ("command",),
    "TodoWrite": (),
    "ExitPlanMode": (),
}
# For tools not listed (MCP tools, tools newer than this table).
_FALLBACK_FIELDS = ("file_path", "path", "notebook_path", "command", "pattern", "url", "query")


def outcome(event: str, payload: dict[str, Any], observation: dict[str, Any]) -> None:
    """How a Claude Code tool event says the call ended, beyond its event's status: a
    structured tool_response's own word (`_response_outcome`), a failure's exit code ("Exit
    code N"), an interrupt that cancelled it."""
    output = observation["output"]
    if event == "PostToolUse" and isinstance(output, dict):
        _response_outcome(output, observation)
    elif event == "PostToolUseFailure":
        observation["exitCode"] = exit_code(output)
        if payload.get("is_interrupt") is True:
            observation["status"] = "cancelled"


def _response_outcome(response: dict[str, Any], observation: dict[str, Any]) -> None:
    """What a structured tool_response says of how the call ended, beyond "it returned".

    A shell cut short (Bash's `interrupted`: the user pressed Esc, or its timeout killed
    it) did not finish: `cancelled`. A response that reports an exit code (BashOutput on a
    background shell that has ended) gives it, and a non-zero one makes the call `error`,
    as PostToolUseFailure's "Exit code N" does for a foreground command.
    """
    if response.get("interrupted") is True:
        observation["status"] = "cancelled"
    code = response.get("exitCode", response.get("exit_code"))
    if isinstance(code, int) and not isinstance(code, bool) and -2**31 <= code < 2**32:
        observation["exitCode"] = code
        if code != 0 and observation["status"] == "ok":
            observation["status"] = "error"


def exit_code(text: Any) -> int | None:
    """The N of a text that starts `_EXIT_CODE` (read without the regex: `re` costs the hook
    milliseconds to import)."""
    if not isinstance(text, str) or not text.startswith("Exit code "):
        return None
    return code_at(text, len("Exit code "))


HOOK = HookFormat(tool_events=TOOL_EVENTS, output_fields=OUTPUT_FIELDS, lifted=LIFTED,
                  session_kinds=SESSION_KINDS, said=SAID, outcome=outcome)


def hook_to_observation(
    payload: dict[str, Any], redactor: Redactor | None = None
) -> dict[str, Any]:
    """Turn one hook payload into a redacted observation dict (keys: OBSERVATION_KEYS).

    Tool events (PreToolUse, PostToolUse, PostToolUseFailure, PermissionDenied) become kind
    `tool_call` with id and callId = tool_use_id, so the start and the end of one call share
    an id. Every other event becomes a session-level kind with id None (the caller assigns
    one) and the whole payload as `data`. `redactor` defaults to the built-in rules; pass
    one built with the user's configured patterns.
    """
    return HOOK.observation(payload, redactor)


def main_input(tool: str | None, tool_input: Any) -> str | None:
    """The one string that best shows what a call did (a command, a path, a pattern), or None.

    Pass the redacted input (as returned by hook_to_observation or read_transcript): this
    function returns a piece of it verbatim.
    """
    if not isinstance(tool_input, dict):
        return None
    fields = _MAIN_FIELDS.get(tool or "", _FALLBACK_FIELDS)
    for field in fields:
        value = tool_input.get(field)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def is_file_write(tool: str | None) -> bool:
    """True for the tools that change a file's content (Write, Edit, MultiEdit, NotebookEdit)."""
    return tool in FILE_WRITE_TOOLS
