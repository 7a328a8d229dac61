"""`import codex`: a Codex session file or saved `codex exec --json` stream as observations.

Invariants: those of claude_code_import, whose writing it shares (`write_calls`): all or
nothing on input (the whole file is parsed and redacted before the first write), re-importing
adds nothing (event ids derived from the call), the same redactor and artifact rules as the
hook, and the same refusal of a workspace holding another project; a file remembered as
imported whole (storage/import_memory.py) is not read again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_journal.agents.claude_code_import import recalled, write_calls
from agent_journal.capture.codex import NotATranscriptError, read_codex_session
from agent_journal.core.errors import JournalError, UsageError
from agent_journal.ops.context import Context
from agent_journal.ops.redaction_config import redactor_for
from agent_journal.storage.root import Root
from agent_journal.storage.segment_reader import PausedGC

Progress = Callable[[int, int, str], None]


def import_codex(ctx: Context, path: str, *, progress: Progress | None = None,
                 other_project: bool = False) -> dict[str, Any]:
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    redactor = redactor_for(Root.open(ctx.root_arg, create=False).path)
    with fh, PausedGC():  # no cycles among what a session file becomes (see PausedGC)
        key, known = recalled(ctx, path, fh, "codex")
        if known is not None:
            return known
        try:
            calls = list(read_codex_session(fh, redactor))
        except NotATranscriptError as exc:
            raise JournalError(f"{path}: {exc}; nothing imported") from None
        return write_calls(ctx, path, calls, progress=progress, memory_key=key,
                           other_project=other_project)
