"""`import codex`: a Codex session file or saved `codex exec --json` stream as observations.

Invariants: those of claude_code_import, whose writing it shares (`write_calls`): all or
nothing on input (one transaction, batch by batch, as the file is read), re-importing
adds nothing (event ids derived from the call), the same redactor and artifact rules as the
hook, and the same refusal of a workspace holding another project; a file remembered as
imported whole (storage/import_memory.py) is not read again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from agent_journal.agents.claude_code_import import reading, recalled, refusing, write_calls
from agent_journal.capture.codex import NotATranscriptError, read_codex_session
from agent_journal.core.errors import UsageError
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
        size = os.fstat(fh.fileno()).st_size
        calls = read_codex_session(reading(fh, size, progress), redactor)
        return write_calls(ctx, path, refusing(path, calls, NotATranscriptError),
                           progress=progress, memory_key=key, other_project=other_project)
