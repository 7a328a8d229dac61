"""The whole digest finished after the session started: a detached `agent-journal digest`.

Invariant: `warm_later` starts at most one such process per workspace at a time (it holds
storage.locks.warm_lock until it exits: a session start while one runs starts none),
detached from the caller (its own session, no standard streams), which runs the ordinary
`digest` command with its output thrown away: it keeps what it reads in the digest cache
as every `digest` does, so the next session start is warm. It never raises: a cache
left cold is slow, not wrong.
"""

from __future__ import annotations

import subprocess

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_journal.storage.workspace import Workspace


def warm_later(ws: Workspace) -> subprocess.Popen[bytes] | None:
    """Start the whole digest of `ws` in a detached process (None when one runs already,
    or none can start)."""
    import os
    import sys

    from agent_journal.storage.locks import warm_lock

    lock = warm_lock(ws)
    if lock is None:
        return None

    command = [sys.executable, "-m", "agent_journal", "digest", "--root", ws.root.path,
               "--workspace", ws.name]
    try:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True, pass_fds=(lock,))
    except OSError:
        return None
    finally:
        os.close(lock)  # the child's copy holds the lock until it exits
