"""The Claude Code hook: one payload on stdin becomes one observation event.

Invariants:
- It never gets in the agent's way. The command is declared `fail_open` in the command
  table, so cli.run turns every failure (bad JSON, a usage error, an unsafe root, a full
  disk, a locked or damaged journal, a bug) into one line in <root>/logs/hook.log
  (`log_failure`) and exit 0. Exit 2 would block the agent's tool call; it cannot happen.
- Nothing is persisted unredacted: the payload passes the root's redactor (built-in rules
  plus config) before anything is hashed or written. A config with a problem (a pattern
  that does not compile, a misspelt key) must not cost the agent's work: the hook journals
  with the built-in rules plus every usable pattern and logs the problem; a config that
  cannot be read at all stops the write. The log line is redacted, then cut.
- stdin is read with a deadline and a size cap (`read_payload`): a caller that leaves it
  open or never stops writing costs at most STDIN_WAIT_S, then the hook fails open.
- A call whose id a tombstone names is not journaled again (silently: nothing failed);
  the look-up is one indexed query per segment, made before any blob is written.
- Only SessionStart writes to stdout: one JSON object carrying the workspace context as
  `hookSpecificOutput.additionalContext`, at most 10,000 characters (Claude Code moves
  longer context out of the prompt). Every other event prints nothing.
- It is the hottest path in the package: it imports nothing beyond the write path's own
  modules and the capture layer, and waits at most WRITE_BUDGET_S for a locked journal.
- No captured event is dropped: one the journal cannot take in time (locked, or a
  storage failure) is spooled durably (storage/spool.py) and journaled by the next hook
  that appends; only a full spool loses it, and that is logged.
- No call is left half-captured by a session's end: the capture hooks run in the
  background (claude_code_installer.ASYNC_EVENTS) and Claude Code ends those still running
  when the session ends, so SessionEnd completes the session's calls from the end of its
  transcript (`complete_sessions`: each call's start and end the journal lacks, under the
  ids `import claude-code` gives them, so nothing is journaled twice). A session whose
  SessionEnd never ran (killed, crashed, cut off) is completed by the next SessionStart in
  the workspace, before its context is built (storage/open_sessions.py keeps which).
"""

from __future__ import annotations

import json
import os

from agent_journal.capture.claude_code import (
    HookPayloadError,
    hook_to_observation,
    parse_hook_payload,
    safe_id,
)
from agent_journal.core import clock
from agent_journal.core.errors import BusyError, JournalError, StorageError, UnsafeRootError
from agent_journal.core.model import AUTHOR_AGENT, OBSERVATION, Event, new_event_id
from agent_journal.ops.evidence import capture_output
from agent_journal.ops.redaction_config import load_redactor
from agent_journal.storage.artifacts import BlobHolds
from agent_journal.storage.config import append_private_log
from agent_journal.storage.connection import set_write_patience
from agent_journal.storage.root import ENV_ROOT, Root, check_root, resolve_root

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, BinaryIO, TypeVar

    T = TypeVar("T")

    from agent_journal.storage.workspace import Workspace

MAX_CONTEXT_CHARS = 10_000
LOG_NAME = "hook.log"
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
# Reading the workspace for the SessionStart context is one long read, not a queue of
# short writes: it may wait longer per lock before a segment is reported unreadable.
READ_BUSY_S = 5.0
# Claude Code writes the payload and closes stdin. A caller that leaves it open must not
# hold the agent forever, nor one that streams without end fill memory: the read gives up
# after STDIN_WAIT_S or STDIN_MAX_BYTES (tool output is capped far below that upstream).
# A whole JSON object followed by a pause of STDIN_PAUSE_S is taken as the payload.
STDIN_WAIT_S = 5.0
STDIN_MAX_BYTES = 64 * 1024 * 1024
STDIN_PAUSE_S = 0.05

class HookResult:
    """What the hook prints, and a write error to report after printing it."""

    def __init__(self, stdout: str | None = None, deferred: BaseException | None = None,
                 ) -> None:
        self.stdout = stdout
        self.deferred = deferred


def claude_code(stdin: BinaryIO, *, root: str | None, workspace: str | None) -> HookResult:
    """Journal one Claude Code hook payload read from `stdin`."""
    if stdin.isatty():
        raise JournalError("no hook payload: stdin is a terminal")
    payload = parse_hook_payload(read_payload(stdin))
    return journal_payload(payload, hook_to_observation, root=root, workspace=workspace,
                           settle=complete_sessions)


def journal_payload(payload: dict[str, Any], normalise: Any, *, root: str | None,
                    workspace: str | None, more: Any = None, settle: Any = None
                    ) -> HookResult:
    """Journal one parsed payload, normalised by `normalise(payload, redactor)` (each agent's
    capture module); SessionStart also gets the workspace context printed. `more(payload,
    redactor)`, when given, adds observations the payload implies (redacted, each with
    its own `eventId`), journaled with it unless a tombstone names them. `settle(ws,
    payload, redactor)`, when given, runs after the event is journaled and before the
    context is built (a failure of it at SessionStart is logged, the context still
    printed)."""
    from agent_journal.agents.hook_target import project_for, root_for, workspace_for

    global _chosen_root
    project = project_for(root, workspace, payload.get("cwd"))
    _chosen_root = resolve_root(root_for(root, project))
    journal_root = Root.open(_chosen_root, create=True)
    # A config with a broken pattern or a misspelt key must not stop the journal: the
    # built-in rules (and every usable pattern) still apply, and the problem is logged.
    redactor, problems = load_redactor(journal_root.path)
    for problem in problems:
        log_line(journal_root.path, f"hook: {problem}; journaling with the "
                 "built-in rules and the usable patterns")
    observation = normalise(payload, redactor)
    context = observation["data"] or {}
    # The folder name comes from the redacted cwd: it is persisted as the workspace name.
    ws = journal_root.workspace(workspace_for(workspace, project, context.get("cwd")))
    session_start = payload["hook_event_name"] == "SessionStart"
    import time

    set_write_patience(TRY_BUSY_S, 1)
    deadline = time.monotonic() + WRITE_BUDGET_S
    # What a tombstone names is never written again: the call is skipped, silently
    # (the agent must not be disturbed, and nothing failed).
    raw_id = observation["id"]
    if raw_id and _tombstoned(ws, safe_id(raw_id), deadline):
        if not session_start:
            return HookResult()
        return _with_context(ws, None)
    # A blob the event cites stays locked until the event has committed (BlobHolds).
    holds = BlobHolds()
    try:
        events = [_event(ws, observation, payload, holds)]
        implied = more(payload, redactor) if more is not None else []
        if implied:
            stopped = _tombstoned_any(ws, [safe_id(o["id"]) for o in implied], deadline)
            events += [_event(ws, o, payload, holds) for o in implied
                       if safe_id(o["id"]) not in stopped]
        if not session_start:
            _journal(ws, events, deadline)
        else:
            # The context matters more to the agent than this one record: if the write
            # fails, the context is still printed and the failure is logged afterwards.
            deferred: BaseException | None = None
            try:
                _journal(ws, events, deadline)
            except Exception as exc:
                deferred = exc
    finally:
        holds.release()
    if not session_start:
        if settle is not None:
            settle(ws, payload, redactor)
        return HookResult()
    if settle is not None:
        try:
            settle(ws, payload, redactor)
        except Exception as exc:
            deferred = deferred or exc
    return _with_context(ws, deferred)


def _tombstoned(ws: Workspace, obs_id: str, deadline: float) -> bool:
    """Whether a tombstone names `obs_id`; a journal locked past the deadline answers
    no here, since the event then goes to the spool, whose drain asks again."""
    return bool(_tombstoned_any(ws, [obs_id], deadline))


def _tombstoned_any(ws: Workspace, ids: list[str], deadline: float) -> set[str]:
    try:
        return set(_patiently(lambda: ws.tombstoned_among(ids), deadline))
    except BusyError:
        return set()


def _journal(ws: Workspace, events: list[Event], deadline: float) -> None:
    """Append `events`, or spool them when the journal cannot take them in time (a lock
    held past the budget, a storage failure): a captured event is never dropped.
    After an append, events spooled earlier are journaled too (storage/spool.py)."""
    from agent_journal.storage import spool

    try:
        _patiently(lambda: ws.append(events), deadline)
    except BusyError:
        for event in events:
            spool.put(ws, event)  # (load, not a fault: nothing to log)
        return
    except StorageError as exc:
        for event in events:
            spool.put(ws, event)
        # The journal refused the write (a damaged segment, a full disk): the event is
        # safe, and the fault is logged where doctor looks.
        log_line(ws.root.path, f"hook: the journal refused an event, kept in the spool: "
                 f"{exc.__class__.__name__}: {exc}")
        return
    if spool.pending(ws.root.path, ws.name):
        try:
            spool.drain(ws)
        except JournalError:
            pass  # still locked: the files stay for the next hook


# -- completing sessions from their transcripts -------------------------------------------

# How much of a transcript's end is read to complete a session: the calls its capture
# hooks may have missed are its last ones.
TRANSCRIPT_TAIL_BYTES = 4 << 20


def complete_sessions(ws: Workspace, payload: dict[str, Any], redactor: Any) -> None:
    """At SessionEnd, complete this session's calls from its transcript and forget it; at
    SessionStart, note this one, complete every other session still noted (one whose
    SessionEnd never ran, or is running elsewhere), and forget those that are over. A
    journal locked past the hooks' budget leaves the note for the next session start."""
    event = payload.get("hook_event_name")
    if event not in ("SessionStart", "SessionEnd"):
        return
    from agent_journal.storage import open_sessions

    session = payload.get("session_id")
    transcript = payload.get("transcript_path")
    me = safe_id(session) if isinstance(session, str) and session else None
    mine = transcript if isinstance(transcript, str) and transcript else None
    root_path = ws.root.path
    if event == "SessionEnd":
        if me is not None and mine is not None:
            import time

            deadline = time.monotonic() + WRITE_BUDGET_S
            try:
                _patiently(lambda: backfill(ws, mine, redactor), deadline)
            except BusyError:
                return  # still noted: the next session start completes it
            open_sessions.forget(root_path, ws.name, me)
        return
    import time

    if me is not None and mine is not None:
        open_sessions.note(root_path, ws.name, me, mine)
    now = time.time()
    for other, path in open_sessions.listed(root_path, ws.name):
        if other == me:
            continue
        try:
            backfill(ws, path, redactor)
        except BusyError:
            continue  # the journal stayed locked: the next session start tries again
        except JournalError as exc:
            log_line(root_path, f"hook: could not complete session {other} from its "
                     f"transcript: {exc.__class__.__name__}: {exc}")
        if open_sessions.settled(path, now):
            open_sessions.forget(root_path, ws.name, other)


def backfill(ws: Workspace, transcript: str, redactor: Any) -> int:
    """Journal what the end of `transcript` holds of its tool calls and the journal lacks
    (a start, an end), as `import claude-code` would; how many calls it read. A file that
    is not there, or not a transcript, completes nothing."""
    from agent_journal.capture.claude_code import NotATranscriptError, read_transcript

    try:
        with open(transcript, "rb") as fh:
            size = fh.seek(0, 2)
            start = max(0, size - TRANSCRIPT_TAIL_BYTES)
            fh.seek(start)
            lines = fh.read().splitlines(keepends=True)
    except OSError:
        return 0
    if start > 0:
        lines = lines[1:]  # begun mid-line
    try:
        calls = [c for c in read_transcript(lines, redactor) if c["kind"] == "tool_call"]
    except NotATranscriptError:
        return 0
    if not calls:
        return 0
    # The import's writer: its event ids and phase checks make a call journaled live, by
    # an earlier completion or by an import, count as held (nothing is written twice).
    from agent_journal.agents.claude_code_import import write_calls
    from agent_journal.ops.context import Context

    # The session's own hooks already chose this workspace for it: its transcript's
    # project is not asked about again (other_project).
    write_calls(Context(ws.root.path, ws.name), transcript, calls, other_project=True)
    return len(calls)


def _with_context(ws: Workspace, deferred: BaseException | None) -> HookResult:
    text = session_context(ws, MAX_CONTEXT_CHARS)
    out = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": text}}, ensure_ascii=False)
    return HookResult(out, deferred)


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
    import select
    import time

    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + STDIN_WAIT_S
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


def _whole(data: bytes) -> bool:
    try:
        parse_hook_payload(data)
    except HookPayloadError:
        return False
    return True


def _patiently(work: Callable[[], T], deadline: float) -> T:
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


def _event(ws: Workspace, observation: dict[str, Any], payload: dict[str, Any],
           holds: BlobHolds) -> Event:
    event_id = observation.get("eventId") or new_event_id()
    kind = observation["kind"]
    raw_id = observation["id"]
    obs_id = safe_id(raw_id) if raw_id else f"{kind}-{event_id}"
    session = observation["session"]
    output, artifact = capture_output(ws, observation["output"],
                                      partial=_cut_short(observation["output"], payload),
                                      holds=holds)
    text = observation["text"]
    if text is not None:
        # What the session said: a large text is kept whole as an artifact, like an output.
        text, artifact = capture_output(ws, text, holds=holds)
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


def _cut_short(output: Any, payload: dict[str, Any]) -> bool:
    """Whether Claude Code says the output it handed over is not the whole output."""
    if payload.get("is_interrupt") is True:
        return True
    return isinstance(output, dict) and (output.get("interrupted") is True
                                         or output.get("truncated") is True)


# -- SessionStart context ---------------------------------------------------------------

USAGE_NOTE = (
    "Keep this journal useful: record what you establish, citing its evidence, and retract "
    "what proves wrong. A finding: `agent-journal record --kind finding --id ID --claim "
    "\"CLAIM\" --anchor tool_use:TOOL_USE_ID`. A decision: `agent-journal record --kind "
    "decision --id ID --question \"QUESTION\" --chosen \"CHOICE\" --anchor file:PATH`. "
    "When one turns out wrong: `agent-journal invalidate ID --reason \"WHY\"`. "
    "`agent-journal digest` prints the digest above again.")


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


# -- failing open -----------------------------------------------------------------------

# The root this process's hook chose to write to (set once the payload's folder is known),
# so a failure after that point is logged where the journal lives.
_chosen_root: str | None = None


def forget_chosen_root() -> None:
    """Called as a hook starts: a root an earlier hook in this process chose (tests, a
    long-lived caller) must not receive this one's failure."""
    global _chosen_root
    _chosen_root = None


def log_failure(command: str, argv: list[str], exc: BaseException) -> None:
    """Append one redacted line about `command` failing with `exc` to <root>/logs/hook.log.

    The root is the one the hook chose, or (when it failed before choosing) is found the
    way the command would have found it, without trusting the parser (which may be what
    failed): --root, $AGENT_JOURNAL_ROOT, the project file nearest the working folder,
    the default. A root that is unsafe or unusable raises here; the caller then has
    nowhere private to log and says so on stderr instead.
    """
    path = _chosen_root or _failure_root(_root_arg(argv))
    where = ""
    if not isinstance(exc, JournalError) and exc.__traceback__ is not None:
        import traceback

        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" at {os.path.basename(frame.filename)}:{frame.lineno}"
    message = str(exc) or exc.__class__.__name__
    try:
        when = clock.now_ts()
    except JournalError:  # a bad AGENT_JOURNAL_NOW may be the very failure being logged
        import time

        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    log_line(path, f"{command} failed open: {exc.__class__.__name__}{where}: {message}",
             when=when)


def log_line(path: str, text: str, *, when: str | None = None) -> None:
    """Append `text`, redacted and then cut to one bounded line, to <root>/logs/hook.log.

    Redacted before it is cut: a cut through a secret would leave a prefix that no
    rule recognises any more (the first 25 characters of a GitHub token).
    """
    check_root(path, create=True)
    try:
        redactor, _ = load_redactor(path)
    except JournalError:
        from agent_journal.capture.redact import default_redactor

        redactor = default_redactor()
    if when is None:
        when = clock.now_ts()
    line = f"{when} {text}".replace("\r", "\\r").replace("\n", "\\n")
    line = redactor.redact_text(line)[:2000]
    try:
        append_private_log(path, LOG_NAME, line)
    except UnsafeRootError:
        # logs/ (or logs/hook.log) leads out of the root: the line goes beside the root's
        # own files instead, or (if that is a link too) is dropped by the caller.
        append_private_log(path, LOG_NAME, line, folder="")


def _failure_root(root: str | None) -> str:
    from agent_journal.agents.hook_target import root_for
    from agent_journal.storage.project_file import find

    try:
        project = None if root is not None or os.environ.get(ENV_ROOT) else find()
    except JournalError:  # a broken project file may be the very failure being logged
        project = None
    return resolve_root(root_for(root, project))


def _root_arg(argv: list[str]) -> str | None:
    for index, token in enumerate(argv):
        if token == "--root" and index + 1 < len(argv):
            # As the parser reads it: a flag of the hook's in its place is no value (the
            # log of `--root --workspace W` must not make a root called --workspace).
            value = argv[index + 1]
            return None if value.partition("=")[0] in ("--root", "--workspace") else (
                value or None)
        if token.startswith("--root="):
            return token.partition("=")[2] or None
    return None
