"""The agent hook: one payload on stdin becomes one observation event, for every agent.

What is an agent's own (its payloads' names, how a call's end is read, what its hook does
beyond journaling) comes from its record (agents/agent.py); everything here is the same for
every agent.

Invariants:
- It never gets in the agent's way. The command is declared `fail_open` in the command
  table, and `run` returns, with what went wrong, every failure past the choice of a root
  (a bad config, a full disk, a locked or damaged journal, a bug), which the caller logs at
  that root (hook_log.py); cli.run logs any failure before it. Exit 2 would block the
  agent's tool call; it cannot happen.
- Nothing is persisted unredacted: the payload passes the root's redactor (built-in rules
  plus config) before anything is hashed or written. A config with a problem (a pattern
  that does not compile, a misspelt key) must not cost the agent's work: the hook journals
  with the built-in rules plus every usable pattern and logs the problem; a config that
  cannot be read at all stops the write.
- stdin is read with a deadline and a size cap (`read_payload`): a caller that leaves it
  open or never stops writing costs at most STDIN_WAIT_S, then the hook fails open.
- A call whose id a tombstone names is not journaled again (silently: nothing failed);
  the look-up opens the segment appended to and, past a few segments, one small index
  (storage/tombstone_index.py), made before any blob is written.
- Only SessionStart writes to stdout: one JSON object carrying the workspace context
  (session_context.py). Every other event prints nothing.
- It is the hottest path in the package: it imports nothing beyond the write path's own
  modules and the capture layer (not `re`, `json` or `typing`), and waits at most
  WRITE_BUDGET_S for a locked journal.
- No captured event is dropped: one the journal cannot take in time (locked, or a
  storage failure) is spooled durably (storage/spool.py) and journaled by the next hook
  that appends; only a full spool loses it, and that is logged.
"""

from __future__ import annotations

import os

from agent_journal.capture.hook_payload import HookPayloadError, parse_hook_payload
from agent_journal.capture.observation import safe_id
from agent_journal.core import clock
from agent_journal.core.errors import BusyError, JournalError, StorageError
from agent_journal.core.model import AUTHOR_AGENT, OBSERVATION, Event, new_event_id
from agent_journal.ops.evidence import capture_output, kept_whole
from agent_journal.ops.redaction_config import load_redactor
from agent_journal.storage.connection import set_write_patience
from agent_journal.storage.root import Root, resolve_root

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, BinaryIO, TypeVar

    T = TypeVar("T")

    from agent_journal.agents.agent import Agent
    from agent_journal.storage.artifacts import BlobHolds
    from agent_journal.storage.workspace import Workspace, Writer

# How long a locked journal may hold up the agent's tool call before the hook gives up (and
# logs it). Parallel tool calls and subagents run hooks side by side, and SQLite's own lock
# wait is not fair: a waiter polls ever more rarely (every 100 ms after the first 0.3 s) and
# keeps losing to newcomers that poll every few milliseconds; under load one hook starved
# for over 15 s. So each try waits only TRY_BUSY_S, which keeps it in SQLite's fast-polling
# phase, and the whole append is retried with jitter until WRITE_BUDGET_S has passed;
# then the event goes to the spool (storage/spool.py) and the next hook journals it. The
# installer's timeout is set above that.
TRY_BUSY_S = 0.25
WRITE_BUDGET_S = 3.0
# Claude Code writes the payload and closes stdin. A caller that leaves it open must not
# hold the agent forever, nor one that streams without end fill memory: the read gives up
# after STDIN_WAIT_S or STDIN_MAX_BYTES (tool output is capped far below that upstream).
# A whole JSON object followed by a pause of STDIN_PAUSE_S is taken as the payload.
STDIN_WAIT_S = 5.0
STDIN_MAX_BYTES = 64 * 1024 * 1024
STDIN_PAUSE_S = 0.05


class HookResult:
    """What the hook prints; what went wrong past the choice of a root, and that root, where
    the caller logs it (after printing: the context matters more to the agent)."""

    def __init__(self, root: str | None = None, stdout: str | None = None,
                 failure: BaseException | None = None) -> None:
        self.root = root
        self.stdout = stdout
        self.failure = failure


def run(agent: Agent, stdin: BinaryIO, *, root: str | None, workspace: str | None
        ) -> HookResult:
    """Journal one hook payload of `agent` read from `stdin`."""
    if stdin.isatty():
        raise JournalError("no hook payload: stdin is a terminal")
    payload = parse_hook_payload(read_payload(stdin))
    return journal_payload(payload, agent, root=root, workspace=workspace)


def journal_payload(payload: dict[str, Any], agent: Agent, *, root: str | None,
                    workspace: str | None) -> HookResult:
    """Journal one parsed payload, normalised by the agent's record; SessionStart also gets
    the workspace context printed. Raises only before a root is chosen."""
    from agent_journal.agents.hook_target import project_for, root_for

    project = project_for(root, workspace, payload.get("cwd"))
    chosen = resolve_root(root_for(root, project))
    result = HookResult(chosen)
    try:
        result.stdout, result.failure = _journal_payload(payload, agent, chosen, project,
                                                         workspace)
    except BaseException as exc:  # all of them: logged where the journal lives
        result.failure = exc
    return result


def _journal_payload(payload: dict[str, Any], agent: Agent, root: str, project: Any,
                     workspace: str | None) -> tuple[str | None, BaseException | None]:
    from agent_journal.agents.hook_target import workspace_for

    journal_root = Root.open(root, create=True)
    # A config with a broken pattern or a misspelt key must not stop the journal: the
    # built-in rules (and every usable pattern) still apply, and the problem is logged.
    redactor, problems = load_redactor(journal_root.path)
    for problem in problems:
        from agent_journal.agents.hook_log import log_line

        log_line(journal_root.path, f"hook: {problem}; journaling with the "
                 "built-in rules and the usable patterns")
    observation = agent.payloads.observation(payload, redactor)
    context = observation["data"] or {}
    # The folder name comes from the redacted cwd: it is persisted as the workspace name.
    ws = journal_root.workspace(workspace_for(workspace, project, context.get("cwd")))
    session_start = payload["hook_event_name"] == "SessionStart"
    import time

    set_write_patience(TRY_BUSY_S, 1)
    deadline = time.monotonic() + WRITE_BUDGET_S
    failure: BaseException | None = None
    # One hold on the segment appended to serves the look-ups and the append.
    writer = ws.writer()
    # A blob the event cites stays locked until the event has committed (BlobHolds, made
    # when an output is kept whole: storage/artifacts.py is off the path of the rest).
    holds: list[BlobHolds] = []
    try:
        # What a tombstone names is never written again: the call is skipped, silently
        # (the agent must not be disturbed, and nothing failed).
        raw_id = observation["id"]
        if raw_id and _tombstoned(writer, safe_id(raw_id), deadline):
            writer.close()
            return (_context(ws) if session_start else None), None
        events = [_event(ws, agent, observation, payload, holds)]
        implied = agent.more(payload, redactor) if agent.more is not None else []
        if implied:
            stopped = _tombstoned_any(writer, [safe_id(o["id"]) for o in implied], deadline)
            events += [_event(ws, agent, o, payload, holds) for o in implied
                       if safe_id(o["id"]) not in stopped]
        if not session_start:
            _journal(ws, writer, events, deadline)
        else:
            # The context matters more to the agent than this one record: if the write
            # fails, the context is still printed and the failure is logged afterwards.
            try:
                _journal(ws, writer, events, deadline)
            except Exception as exc:
                failure = exc
    finally:
        writer.close()
        for hold in holds:
            hold.release()
    if not session_start:
        if agent.settle is not None:
            agent.settle(ws, payload, redactor)
        return None, None
    if agent.settle is not None:
        try:
            agent.settle(ws, payload, redactor)
        except Exception as exc:
            failure = failure or exc
    return _context(ws), failure


def _context(ws: Workspace) -> str:
    from agent_journal.agents.session_context import context_output

    return context_output(ws)


def _tombstoned(writer: Writer, obs_id: str, deadline: float) -> bool:
    """Whether a tombstone names `obs_id`; a journal locked past the deadline answers
    no here, since the event then goes to the spool, whose drain asks again."""
    return bool(_tombstoned_any(writer, [obs_id], deadline))


def _tombstoned_any(writer: Writer, ids: list[str], deadline: float) -> set[str]:
    try:
        return set(patiently(lambda: writer.tombstoned_among(ids), deadline))
    except BusyError:
        return set()


def _journal(ws: Workspace, writer: Writer, events: list[Event], deadline: float) -> None:
    """Append `events`, or spool them when the journal cannot take them in time (a lock
    held past the budget, a storage failure): a captured event is never dropped.
    After an append, events spooled earlier are journaled too (storage/spool.py)."""
    from agent_journal.storage import spool

    try:
        patiently(lambda: writer.append(events), deadline)
    except BusyError:
        for event in events:
            spool.put(ws, event)  # (load, not a fault: nothing to log)
        return
    except StorageError as exc:
        from agent_journal.agents.hook_log import log_line

        for event in events:
            spool.put(ws, event)
        # The journal refused the write (a damaged segment, a full disk): the event is
        # safe, and the fault is logged where doctor looks.
        log_line(ws.root.path, f"hook: the journal refused an event, kept in the spool: "
                 f"{exc.__class__.__name__}: {exc}")
        return
    finally:
        writer.close()
    if spool.pending(ws.root.path, ws.name):
        try:
            spool.drain(ws)
        except JournalError:
            pass  # still locked: the files stay for the next hook


def read_payload(stdin: BinaryIO) -> bytes:
    """stdin up to its end, bounded in time and size (HookPayloadError past either)."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream: it has an end
        data = stdin.read(STDIN_MAX_BYTES + 1)
        if len(data) > STDIN_MAX_BYTES:
            raise HookPayloadError(f"hook payload is larger than {STDIN_MAX_BYTES} bytes"
                                   ) from None
        return data
    import time

    deadline = time.monotonic() + STDIN_WAIT_S
    chunks: list[bytes] = []
    # Most often the agent has written the payload and closed stdin by the time this runs:
    # what is there is read without waiting (and without loading `select`).
    if _read_ready(fd, chunks):
        return b"".join(chunks)
    import select

    size = sum(len(c) for c in chunks)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HookPayloadError(f"no end of the hook payload on stdin within "
                                   f"{STDIN_WAIT_S:g} s ({size} bytes read)")
        ready, _, _ = select.select([fd], [], [], min(left, STDIN_PAUSE_S))
        if not ready:
            if chunks and chunks[-1].rstrip()[-1:] == b"}" and _whole(b"".join(chunks)):
                break  # the writer paused after a whole object and left stdin open
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        size += len(chunk)
        if size > STDIN_MAX_BYTES:
            raise HookPayloadError(f"hook payload is larger than {STDIN_MAX_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _read_ready(fd: int, chunks: list[bytes]) -> bool:
    """Read into `chunks` what `fd` holds now, without waiting; True at its end. The
    descriptor is made non-blocking for the while and given back as it was."""
    try:
        blocking = os.get_blocking(fd)
        if blocking:
            os.set_blocking(fd, False)
    except OSError:
        return False  # not a descriptor that says: the waiting read does it all
    size = 0
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                return False  # the rest is not written yet
            if not chunk:
                return True
            size += len(chunk)
            if size > STDIN_MAX_BYTES:
                raise HookPayloadError(f"hook payload is larger than {STDIN_MAX_BYTES} "
                                       "bytes")
            chunks.append(chunk)
    finally:
        if blocking:
            os.set_blocking(fd, True)


def _whole(data: bytes) -> bool:
    try:
        parse_hook_payload(data)
    except HookPayloadError:
        return False
    return True


def patiently(work: Callable[[], T], deadline: float) -> T:
    """Run `work` (a look-up or the append), retrying while other writers hold the
    journal, until `deadline` (WRITE_BUDGET_S after the hook started writing).

    Retrying is safe: a failed try committed nothing, and the event id is the same, so
    even a commit that landed unseen would be ignored the second time.
    """
    import time

    while True:
        try:
            return work()
        except BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(int.from_bytes(os.urandom(1), "big") / 10_000)  # 0 to 25 ms


def _capture(ws: Workspace, value: Any, holds: list[BlobHolds], partial: bool = False
             ) -> tuple[Any, dict[str, Any] | None]:
    """capture_output, a blob it writes held in `holds` (made here, the first time)."""
    if not kept_whole(value):
        return value, None  # (what capture_output returns for it)
    if not holds:
        from agent_journal.storage.artifacts import BlobHolds

        holds.append(BlobHolds())
    return capture_output(ws, value, partial=partial, holds=holds[0])


def _event(ws: Workspace, agent: Agent, observation: dict[str, Any], payload: dict[str, Any],
           holds: list[BlobHolds]) -> Event:
    event_id = observation.get("eventId") or new_event_id()
    kind = observation["kind"]
    raw_id = observation["id"]
    obs_id = safe_id(raw_id) if raw_id else f"{kind}-{event_id}"
    session = observation["session"]
    output, artifact = _capture(ws, observation["output"], holds,
                                partial=agent.payloads.cut_short(observation["output"],
                                                                 payload))
    text = observation["text"]
    if text is not None:
        # What the session said: a large text is kept whole as an artifact, like an output.
        text, artifact = _capture(ws, text, holds)
    data = {
        "tool": observation["tool"],
        "callId": observation["callId"],
        "input": observation["input"],
        "output": output,
        "status": observation["status"],
        "exitCode": observation["exitCode"],
        "durationMs": observation["durationMs"],
        "artifact": artifact,
        "text": text,
        "hook": observation["data"],
    }
    return Event(event_id=event_id, type=OBSERVATION, kind=kind, id=obs_id,
                 ts=clock.now_ts(), author=AUTHOR_AGENT,
                 session=safe_id(session) if session else None,
                 replica=ws.root.replica_id, data=data)
