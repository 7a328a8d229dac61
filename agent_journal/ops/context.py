"""Where a command acts and who is acting, and the one whole-workspace read.

Invariant: every command names its workspace through a Context, whose ids
are validated before anything is opened, and reads the workspace through
`read_workspace`, which derives from every readable event and keeps the
damage it met for the caller to report.
"""

from __future__ import annotations

import os

from agent_journal.core.derive import Derived, derive
from agent_journal.core.model import (
    AUTHOR_AGENT,
    AUTHOR_HUMAN,
    validate_id,
)
from agent_journal.ops.redaction_config import check_config
from agent_journal.storage.root import Root
from agent_journal.storage.segment_reader import Peek, ReadResult
from agent_journal.storage.workspace import Workspace

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.errors import NotFoundError


class Context:
    """Where a command acts and who is acting."""

    def __init__(self, root: str | None, workspace: str, session: str | None = None) -> None:
        self.root_arg = root
        self.workspace_name = validate_id(workspace, "workspace")
        self.session = validate_id(session, "session") if session is not None else None

    @property
    def author(self) -> str:
        return AUTHOR_AGENT if self.session else AUTHOR_HUMAN

    # Set by the sync commands: the remote the project file names for this workspace,
    # (url, endpoint url or None, the file's path); ops/remotes.py lists it as `project`.
    project_remote: tuple[str, str | None, str] | None = None

    # Set by read commands: opening for a read then refuses a workspace that is not there
    # (after the operation has checked its own arguments, so usage errors still come first).
    must_exist = False

    def open(self, *, create: bool) -> Workspace:
        if not create and self.must_exist:
            self.require_existing()
        root = Root.open(self.root_arg, create=create)
        check_config(root.path)
        return root.workspace(self.workspace_name)

    def require_existing(self) -> None:
        """Refuse a read of a workspace that is not there (a typo in --workspace or --root)
        before anything is created: no root, no cache, no workspace folder."""
        from agent_journal.core.errors import NotFoundError

        root = Root.open(self.root_arg, create=False)
        if not root.exists:
            raise NotFoundError(f"no journal root at {root.path}; check --root or "
                                "$AGENT_JOURNAL_ROOT (nothing was created)")
        ws = root.workspace(self.workspace_name)
        if not os.path.isdir(ws.path):
            known = root.workspaces()
            hint = f" (workspaces here: {', '.join(known[:10])})" if known else ""
            raise NotFoundError(f"no workspace {self.workspace_name!r} in {root.path}{hint}")


def read_workspace(ctx: Context, *, lazy: bool = True, as_of: str | None = None,
                   observations: bool = True, peek: Peek | None = None
                   ) -> tuple[ReadResult, Derived]:
    """The whole workspace, or with `as_of` (a checkpoint name or an instant)
    the events up to it and every tombstone (ops/checkpoints.py).
    `observations=False` verifies observation rows (damage is still reported)
    but keeps none, for a read that shows no observation; `peek` has SQLite
    read those fields of each observation body (segment_reader.Peek)."""
    ws = ctx.open(create=False)
    if as_of is None:
        result = ws.read(lazy=lazy, observations=observations, peek=peek)
    else:
        from agent_journal.ops.checkpoints import read_as_of, resolve_as_of

        resolved = resolve_as_of(ws, as_of)
        assert resolved is not None
        result = read_as_of(ws, resolved, lazy=lazy)
    return result, derive(result.events)


def damage_lists(result: ReadResult) -> dict[str, Any]:
    return {"unreadable": result.unreadable, "malformed": result.malformed}


def not_found(some_id: str, workspace: str, result: ReadResult, more: str = ""
              ) -> NotFoundError:
    """The refusal of a read asked for an id the workspace does not show (unknown or
    tombstoned), saying so when the read met damage that could hide it."""
    from agent_journal.core.errors import NotFoundError

    floor = "" if not result.damaged else (
        f" (the read met {len(result.unreadable)} unreadable segment(s) and "
        f"{len(result.malformed)} malformed row(s): it may be among them)")
    return NotFoundError(f"no entry or observation with id {some_id} in workspace "
                         f"{workspace}{more}{floor}")




def damage_summary(unreadable: list[dict[str, Any]], malformed: list[dict[str, Any]]) -> str:
    """Counts and the first places of damage, for a one-line refusal."""
    places = [u["path"] for u in unreadable] + [f"{m['segment']} row {m['row']}"
                                                for m in malformed]
    shown = "; ".join(places[:3]) + (f"; and {len(places) - 3} more" if len(places) > 3 else "")
    return (f"{len(unreadable)} unreadable segment(s), {len(malformed)} malformed row(s)"
            + (f" ({shown})" if shown else ""))
