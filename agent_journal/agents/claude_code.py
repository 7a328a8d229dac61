"""Claude Code: its record (what its hooks and hooks file are), and completing its sessions
from their transcripts.

Scopes: `project` (the shared, committed .claude/settings.json), `local`
(.claude/settings.local.json, personal) and `user` (~/.claude/settings.json). Project and
local installs also write the project's .agent-journal.toml (workspace, and the root when
one was given), so the command itself names no workspace and is the same at every scope and
in the plugin's hooks/hooks.json.

Its handlers are written in exec form (`command` and `args`: Claude Code 2.1.337 starts the
executable without a shell, one process less per hook); Codex's stay shell command lines.

The capture hooks (BACKGROUND, one or two per tool call) run with `"async": true`: Claude
Code starts them and goes on with the call without waiting, so they cost the agent only
their spawn. Nothing the agent reads comes from them (they print nothing). The other events
stay synchronous: SessionStart's output is the context the agent is given, and the rest
come once per turn or session.

Invariant: no call is left half-captured by a session's end. Claude Code ends background
hooks still running when the session ends (2.1.337 sends them SIGTERM as `claude -p`
exits), so the last call's PostToolUse may be cut off: SessionEnd completes the session's
calls from the end of its transcript (`complete_sessions`: each call's start and end the
journal lacks, under the ids `import claude-code` gives them, so nothing is journaled
twice). A session whose SessionEnd never ran (killed, crashed, cut off) is completed by the
next SessionStart in the workspace, before its context is built (storage/open_sessions.py
keeps which); tests/test_real_clients.py runs both against the real client.
"""

from __future__ import annotations

import os

from agent_journal.agents.agent import Agent, Target
from agent_journal.capture.claude_code import HOOK
from agent_journal.capture.observation import safe_id

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.storage.workspace import Workspace

NAME = "claude-code"
# The events the hook journals, in the order they are written into settings.json.
# PermissionDenied is the end of a call the auto-mode classifier refused (nothing else
# follows its PreToolUse).
EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied",
          "UserPromptSubmit", "SessionStart", "PreCompact", "PostCompact", "Stop",
          "SubagentStop", "SessionEnd")
# Run in the background: the per-call capture, which must cost the agent nothing.
BACKGROUND = frozenset(("PreToolUse", "PostToolUse", "PostToolUseFailure",
                        "PermissionDenied"))
# Seconds. The hook gives up on a locked journal after WRITE_BUDGET_S (agents/hook.py);
# SessionStart also reads the workspace to build its context.
TIMEOUTS = {"SessionStart": 60}
DEFAULT_TIMEOUT = 30
FILES = {"project": os.path.join(".claude", "settings.json"),
         "local": os.path.join(".claude", "settings.local.json")}


def settings_file(scope: str, folder: str | None) -> Target:
    if scope == "user":
        home = os.path.expanduser("~")
        return Target(os.path.join(home, ".claude", "settings.json"), None, False)
    assert folder is not None
    return Target(os.path.join(folder, FILES[scope]), folder, scope == "project")


def hook_command(extra: list[str] | None = None) -> list[str]:
    """The command install writes when the agent-journal on PATH is this installation (and
    the plugin's hooks/hooks.json runs), as words."""
    return ["agent-journal", "hook", NAME] + (extra or [])


# -- completing sessions from their transcripts -------------------------------------------

# How much of a transcript's end is read to complete a session: the calls its capture
# hooks may have missed are its last ones.
TRANSCRIPT_TAIL_BYTES = 4 << 20


def complete_sessions(ws: Workspace, payload: dict[str, Any], redactor: Any) -> None:
    """At SessionEnd, complete this session's calls from its transcript and forget it; at
    SessionStart, note this one, complete every other session still noted (one whose
    SessionEnd never ran, or is running elsewhere), and forget those that are over. A
    journal locked past the hooks' budget leaves the note for the next session start."""
    event = payload.get("hook_event_name")
    if event not in ("SessionStart", "SessionEnd"):
        return
    import time

    from agent_journal.agents import hook
    from agent_journal.agents.hook_log import log_line
    from agent_journal.core.errors import BusyError, JournalError
    from agent_journal.storage import open_sessions

    session = payload.get("session_id")
    transcript = payload.get("transcript_path")
    me = safe_id(session) if isinstance(session, str) and session else None
    mine = transcript if isinstance(transcript, str) and transcript else None
    root_path = ws.root.path
    if event == "SessionEnd":
        if me is not None and mine is not None:
            deadline = time.monotonic() + hook.WRITE_BUDGET_S
            try:
                hook.patiently(lambda: backfill(ws, mine, redactor), deadline)
            except BusyError:
                return  # still noted: the next session start completes it
            open_sessions.forget(root_path, ws.name, me)
        return
    if me is not None and mine is not None:
        open_sessions.note(root_path, ws.name, me, mine)
    now = time.time()
    for other, path in open_sessions.listed(root_path, ws.name):
        if other == me:
            continue
        try:
            backfill(ws, path, redactor)
        except BusyError:
            continue  # the journal stayed locked: the next session start tries again
        except JournalError as exc:
            log_line(root_path, f"hook: could not complete session {other} from its "
                     f"transcript: {exc.__class__.__name__}: {exc}")
        if open_sessions.settled(path, now):
            open_sessions.forget(root_path, ws.name, other)


def backfill(ws: Workspace, transcript: str, redactor: Any) -> int:
    """Journal what the end of `transcript` holds of its tool calls and the journal lacks
    (a start, an end), as `import claude-code` would; how many calls it read. A file that
    is not there, or not a transcript, completes nothing."""
    from agent_journal.capture.claude_code_transcript import (
        NotATranscriptError,
        read_transcript,
    )

    try:
        with open(transcript, "rb") as fh:
            size = fh.seek(0, 2)
            start = max(0, size - TRANSCRIPT_TAIL_BYTES)
            fh.seek(start)
            lines = fh.read().splitlines(keepends=True)
    except OSError:
        return 0
    if start > 0:
        lines = lines[1:]  # begun mid-line
    try:
        calls = [c for c in read_transcript(lines, redactor) if c["kind"] == "tool_call"]
    except NotATranscriptError:
        return 0
    if not calls:
        return 0
    # The import's writer: its event ids and phase checks make a call journaled live, by
    # an earlier completion or by an import, count as held (nothing is written twice).
    from agent_journal.agents.claude_code_import import write_calls
    from agent_journal.ops.context import Context

    # The session's own hooks already chose this workspace for it: its transcript's
    # project is not asked about again (other_project).
    write_calls(Context(ws.root.path, ws.name), transcript, calls, other_project=True)
    return len(calls)


AGENT = Agent(name=NAME, payloads=HOOK, events=EVENTS, scopes=("project", "local", "user"),
              settings=settings_file, timeouts=TIMEOUTS, default_timeout=DEFAULT_TIMEOUT,
              background=BACKGROUND, settle=complete_sessions, exec_form=True)
