"""The whole digest finished after the session started: a detached `agent-journal digest`.

Invariant: `warm_later` starts at most one process per call, detached from the caller
(its own session, no standard streams), which runs the ordinary `digest` command with its
output thrown away: it keeps what it reads in the digest cache as every `digest` does,
so the next session start is warm. It never raises: a cache left cold is slow, not wrong.
"""

from __future__ import annotations

import subprocess

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_journal.storage.workspace import Workspace


def warm_later(ws: Workspace) -> subprocess.Popen[bytes] | None:
    """Start the whole digest of `ws` in a detached process (None when it cannot)."""
    import sys

    command = [sys.executable, "-m", "agent_journal", "digest", "--root", ws.root.path,
               "--workspace", ws.name]
    try:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True)
    except OSError:
        return None
