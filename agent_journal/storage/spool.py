"""The capture spool: events a hook could not journal in time, kept until one can.

Invariants:
- A spooled event is durable before the hook returns: its canonical bytes are
  written to a private temporary file (0600, folders 0700), fsynced, renamed
  into `<root>/spool/<workspace>/` and the folder fsynced. Its name carries the
  checksum, so a damaged file is recognised (and kept aside, never appended).
- Draining is safe under any number of concurrent drainers: a file is claimed
  by an atomic rename to a name carrying the claimer's pid before its event is
  appended, and removed only after the append committed. A claim whose process
  is gone is taken over by the next drainer. Appends are idempotent by event id,
  so a drainer killed between commit and unlink duplicates nothing.
- A tombstoned subject is never written: the drain drops such events.
- The spool is bounded (MAX_FILES); `put` refuses past it the
  caller reports that as a loss.
"""

from __future__ import annotations

import os

from agent_journal.core import codec
from agent_journal.core.errors import SpoolFullError
from agent_journal.storage.files import make_private_dirs, write_file_atomic

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from agent_journal.core.model import Event
    from agent_journal.storage.workspace import Workspace

SPOOL_DIR = "spool"
SUFFIX = ".event"
CLAIM = ".claim-"
MAX_FILES = 10_000


def folder(root_path: str, workspace: str) -> str:
    return os.path.join(root_path, SPOOL_DIR, workspace)


def put(ws: Workspace, event: Event) -> str:
    """Keep `event` durably in the spool; its path."""
    where = folder(ws.root.path, ws.name)
    make_private_dirs(where)
    if len(os.listdir(where)) >= MAX_FILES:
        raise SpoolFullError(f"the capture spool {where} is full ({MAX_FILES} events)")
    body, digest = codec.encode(event)
    path = os.path.join(where, f"{event.event_id}.{digest.split(':')[-1]}{SUFFIX}")
    write_file_atomic(path, body)
    return path


def pending(root_path: str, workspace: str) -> list[str]:
    """Names of the spooled files waiting (claimed ones included)."""
    try:
        return sorted(n for n in os.listdir(folder(root_path, workspace)) if n.endswith(SUFFIX))
    except (FileNotFoundError, NotADirectoryError):
        return []


def drain(ws: Workspace) -> int:
    """Append every spooled event this process can claim; how many were appended.

    Raises what an append raises (BusyError while the journal stays locked): the
    claimed files then stay, and the next drainer takes them over.
    """
    names = pending(ws.root.path, ws.name)
    if not names:
        return 0
    where = folder(ws.root.path, ws.name)
    claimed: list[str] = []
    events: list[Event] = []
    for name in names:
        path = _claim(where, name)
        if path is None:
            continue
        event = _read(path)
        if event is None:
            _set_aside(path)
            continue
        claimed.append(path)
        events.append(event)
    if not events:
        return 0
    stopped = ws.tombstoned_among({str(e.id) for e in events if e.id})
    kept = [e for e in events if str(e.id) not in stopped]
    if kept:
        ws.append(kept)
    for path in claimed:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return len(kept)


def _claim(where: str, name: str) -> str | None:
    """Rename a waiting (or abandoned) file to this process's claim; None if another has it."""
    base = name
    if name.startswith(CLAIM):
        from agent_journal.storage.locks import process_alive  # (the drain alone needs it)

        pid, _, base = name[len(CLAIM):].partition("-")
        if not pid.isdigit() or process_alive(int(pid)):
            return None
    mine = os.path.join(where, f"{CLAIM}{os.getpid()}-{base}")
    try:
        os.rename(os.path.join(where, name), mine)
    except FileNotFoundError:
        return None  # another drainer took it first
    return mine


def _read(path: str) -> Event | None:
    name = os.path.basename(path)[: -len(SUFFIX)]
    digest = name.rsplit(".", 1)[-1]
    try:
        with open(path, "rb") as fh:
            body = fh.read()
        return codec.decode(body, codec.CHECKSUM_PREFIX + digest)
    except (OSError, codec.MalformedEvent):
        return None


def _set_aside(path: str) -> None:
    """A damaged spool file is kept under a name no drain takes, for `doctor` to show."""
    where, name = os.path.split(path)
    try:
        os.rename(path, os.path.join(where, f"damaged-{os.getpid()}-{name}.bad"))
    except OSError:
        pass


def cited_digests(ws: Workspace) -> set[str]:
    """The artifact digests the waiting events cite (compaction keeps those blobs)."""
    where = folder(ws.root.path, ws.name)
    found: set[str] = set()
    for name in pending(ws.root.path, ws.name):
        event = _read(os.path.join(where, name))
        artifact = event.data.get("artifact") if event is not None and event.data else None
        ref = artifact.get("ref") if isinstance(artifact, dict) else None
        if isinstance(ref, str) and ":" in ref:
            found.add(ref.partition(":")[2].lower())
    return found


def damaged(root_path: str, workspace: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder(root_path, workspace)) if n.endswith(".bad"))
    except (FileNotFoundError, NotADirectoryError):
        return []
