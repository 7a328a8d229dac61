"""Ids that look like secrets are refused before a write stores them.

Invariant: an id a write stores (an entry's or observation's own, one it cites or depends
on, the writing session, a checkpoint's name) that the root's redactor would change is
refused with a usage error before anything is created, and the message does not repeat
it. Ids are keys, stored as given, and a tombstone names its target's id for ever: a
secret in an id could never be erased.
"""

from __future__ import annotations

from agent_journal.core.errors import UsageError
from agent_journal.ops.redaction_config import redactor_for
from agent_journal.storage.root import resolve_root

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from agent_journal.ops.context import Context


def refuse_secret_ids(ctx: Context, *ids: tuple[str, str]) -> None:
    """UsageError for the first of `ids` ((value, what it is) pairs) or the writing
    session's id that a redaction rule matches."""
    redactor = redactor_for(resolve_root(ctx.root_arg))
    if ctx.session is not None:
        ids += ((ctx.session, "session id"),)
    for value, what in ids:
        if redactor.redact_text(value) is not value:
            raise UsageError(f"{what} looks like it holds a secret (a redaction rule matches "
                             "it); ids are stored as given and outlive erasure, so choose "
                             "another")
