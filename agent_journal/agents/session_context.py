"""What a hook gives the agent at session start (and after compaction): the workspace
digest, a line on the capture's health, and a note on using the journal.

Invariant: at most MAX_CONTEXT_CHARS characters (Claude Code moves longer context out of
the prompt), printed as one JSON object carrying it as
`hookSpecificOutput.additionalContext`, which Codex's session-start output takes as Claude
Code's does. A digest that cannot be built never stops the session: one line says so.
"""

from __future__ import annotations

from agent_journal.storage.connection import set_write_patience

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from agent_journal.storage.workspace import Workspace

MAX_CONTEXT_CHARS = 10_000
# Reading the workspace for the SessionStart context is one long read, not a queue of
# short writes: it may wait longer per lock before a segment is reported unreadable.
READ_BUSY_S = 5.0

USAGE_NOTE = (
    "Keep this journal useful: record what you establish, citing its evidence, and retract "
    "what proves wrong. A finding: `agent-journal record --kind finding --id ID --claim "
    "\"CLAIM\" --anchor tool_use:TOOL_USE_ID`. A decision: `agent-journal record --kind "
    "decision --id ID --question \"QUESTION\" --chosen \"CHOICE\" --anchor file:PATH`. "
    "When one turns out wrong: `agent-journal invalidate ID --reason \"WHY\"`. "
    "`agent-journal digest` prints the digest above again.")


def context_output(ws: Workspace) -> str:
    """The one line a SessionStart hook prints."""
    import json

    text = session_context(ws, MAX_CONTEXT_CHARS)
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                              "additionalContext": text}}, ensure_ascii=False)


def session_context(ws: Workspace, max_chars: int = MAX_CONTEXT_CHARS) -> str:
    """The text given to the agent at session start (and after compaction): the workspace
    digest (ops.digest, the one place that decides what a resuming agent reads), then
    USAGE_NOTE; never longer than `max_chars`. A digest that cannot be built is replaced
    by one line saying so: the agent still gets the note, and the session starts."""
    from agent_journal.ops import digest

    set_write_patience(READ_BUSY_S, 1)
    budget = max_chars - len(USAGE_NOTE) - 2
    if budget <= 0:
        return _cut(USAGE_NOTE, max_chars)
    health = _capture_health(ws)
    budget -= len(health)
    try:
        text = digest.session_markdown(ws, budget)
    except Exception as exc:  # the context must not stop the session from starting
        text = (f"agent-journal workspace `{ws.name}`: the digest could not be built "
                f"({exc.__class__.__name__}); run `agent-journal digest` to see why.")
    return health + _cut(text, budget) + "\n\n" + USAGE_NOTE


def _capture_health(ws: Workspace) -> str:
    """A first line when captured events are still in the spool (the journal stayed locked
    past the hooks' budget): the digest below does not hold them yet."""
    from agent_journal.storage import spool

    waiting = len(spool.pending(ws.root.path, ws.name))
    if not waiting:
        return ""
    return (f"_Capture: {waiting} event(s) hooks captured are waiting in the spool (the "
            "journal was locked); the next hook journals them, and this digest does not "
            "show them yet._\n\n")


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    note = "\n[cut to fit the context limit]"
    return text[: max(0, max_chars - len(note))] + note
