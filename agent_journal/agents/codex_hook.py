"""The Codex CLI hook: one payload on stdin becomes one observation event.

Invariants: those of claude_code_hook, whose journalling it shares (fail-open through the
command table, redaction before anything is written, the SessionStart context as
`hookSpecificOutput.additionalContext`, which Codex's session-start output schema takes as
Claude Code's does); only the normalisation (capture.codex) is Codex's own.
"""

from __future__ import annotations

from agent_journal.agents.claude_code_hook import HookResult, journal_payload, read_payload
from agent_journal.capture.codex import codex_hook_to_observation, parse_codex_payload
from agent_journal.core.errors import JournalError

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import BinaryIO


def codex(stdin: BinaryIO, *, root: str | None, workspace: str | None) -> HookResult:
    """Journal one Codex hook payload read from `stdin`."""
    if stdin.isatty():
        raise JournalError("no hook payload: stdin is a terminal")
    payload = parse_codex_payload(read_payload(stdin))
    return journal_payload(payload, codex_hook_to_observation, root=root, workspace=workspace)
