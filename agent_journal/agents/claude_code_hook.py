"""The Claude Code hook: one payload on stdin becomes one observation event.

Invariants:
- It never gets in the agent's way. The command is declared `fail_open` in the command
  table, so cli.run turns every failure (bad JSON, a usage error, an unsafe root, a full
  disk, a locked or damaged journal, a bug) into one line in <root>/logs/hook.log
  (`log_failure`) and exit 0. Exit 2 would block the agent's tool call; it cannot happen.
- Nothing is persisted unredacted: the payload passes the root's redactor (built-in rules
  plus config) before anything is hashed or written, and a config that cannot be read
  stops the write altogether. The log line is redacted too.
- Only SessionStart writes to stdout: one JSON object carrying the workspace context as
  `hookSpecificOutput.additionalContext`, at most 10,000 characters (Claude Code moves
  longer context out of the prompt). Every other event prints nothing.
- It is the hottest path in the package: it imports nothing beyond the write path's own
  modules and the capture layer, and gives up on a journal that stays locked for
  WRITE_BUDGET_S.
"""

from __future__ import annotations

import json
import os

from agent_journal.capture.claude_code import (
    hook_to_observation,
    parse_hook_payload,
    safe_id,
)
from agent_journal.core import clock
from agent_journal.core.errors import BusyError, JournalError
from agent_journal.core.model import AUTHOR_AGENT, OBSERVATION, Event, new_event_id
from agent_journal.ops.evidence import capture_output
from agent_journal.ops.redaction_config import redactor_for
from agent_journal.storage.config import append_private_log
from agent_journal.storage.connection import set_write_patience
from agent_journal.storage.root import Root, check_root, resolve_root

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from agent_journal.storage.workspace import Workspace

MAX_CONTEXT_CHARS = 10_000
LOG_NAME = "hook.log"
# How long a locked journal may hold up the agent's tool call before the hook gives up (and
# logs it). Parallel tool calls and subagents run hooks side by side, and SQLite's own lock
# wait is not fair: a waiter polls ever more rarely (every 100 ms after the first 0.3 s) and
# keeps losing to newcomers that poll every few milliseconds; under load one hook starved
# for over 15 s. So each try waits only TRY_BUSY_S, which keeps it in SQLite's fast-polling
# phase, and the whole append is retried with jitter until WRITE_BUDGET_S has passed. The
# installer's timeout is set above that.
TRY_BUSY_S = 0.25
WRITE_BUDGET_S = 15.0
# Reading the workspace for the SessionStart context is one long read, not a queue of
# short writes: it may wait longer per lock before a segment is reported unreadable.
READ_BUSY_S = 5.0

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
    payload = parse_hook_payload(stdin.read())
    return journal_payload(payload, hook_to_observation, root=root, workspace=workspace)


def journal_payload(payload: dict[str, Any], normalise: Any, *, root: str | None,
                    workspace: str | None) -> HookResult:
    """Journal one parsed payload, normalised by `normalise(payload, redactor)` (each agent's
    capture module); SessionStart also gets the workspace context printed."""
    from agent_journal.agents.hook_target import project_for, root_for, workspace_for

    project = project_for(root, workspace, payload.get("cwd"))
    journal_root = Root.open(root_for(root, project), create=True)
    redactor = redactor_for(journal_root.path)
    observation = normalise(payload, redactor)
    context = observation["data"] or {}
    # The folder name comes from the redacted cwd: it is persisted as the workspace name.
    ws = journal_root.workspace(workspace_for(workspace, project, context.get("cwd")))
    event = _event(ws, observation, payload)
    if payload["hook_event_name"] != "SessionStart":
        _append(ws, event)
        return HookResult()
    # The context matters more to the agent than this one record: if the write fails,
    # the context is still printed and the failure is logged afterwards.
    deferred: BaseException | None = None
    try:
        _append(ws, event)
    except Exception as exc:
        deferred = exc
    text = session_context(ws, MAX_CONTEXT_CHARS)
    out = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": text}}, ensure_ascii=False)
    return HookResult(out, deferred)


def _append(ws: Workspace, event: Event) -> None:
    """Append, retrying while other writers hold the journal, until WRITE_BUDGET_S.

    Retrying is safe: a failed try committed nothing, and the event id is the same, so
    even a commit that landed unseen would be ignored the second time.
    """
    import time

    set_write_patience(TRY_BUSY_S, 1)
    deadline = time.monotonic() + WRITE_BUDGET_S
    while True:
        try:
            ws.append([event])
            return
        except BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(int.from_bytes(os.urandom(1), "big") / 10_000)  # 0 to 25 ms


def _event(ws: Workspace, observation: dict[str, Any], payload: dict[str, Any]) -> Event:
    event_id = new_event_id()
    kind = observation["kind"]
    raw_id = observation["id"]
    obs_id = safe_id(raw_id) if raw_id else f"{kind}-{event_id}"
    session = observation["session"]
    output, artifact = capture_output(ws, observation["output"],
                                      partial=_cut_short(observation["output"], payload))
    text = observation["text"]
    if text is not None:
        # What the session said: a large text is kept whole as an artifact, like an output.
        text, artifact = capture_output(ws, text)
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
    try:
        text = digest.session_markdown(ws, budget)
    except Exception as exc:  # the context must not stop the session from starting
        text = (f"agent-journal workspace `{ws.name}`: the digest could not be built "
                f"({exc.__class__.__name__}); run `agent-journal digest` to see why.")
    return _cut(text, budget) + "\n\n" + USAGE_NOTE


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    note = "\n[cut to fit the context limit]"
    return text[: max(0, max_chars - len(note))] + note


# -- failing open -----------------------------------------------------------------------

def log_failure(command: str, argv: list[str], exc: BaseException) -> None:
    """Append one redacted line about `command` failing with `exc` to <root>/logs/hook.log.

    The root is found the way the command would have found it, without trusting the
    parser (which may be what failed). A root that is unsafe or unusable raises here;
    the caller then has nowhere private to log and says so on stderr instead.
    """
    root = _root_arg(argv)
    path = resolve_root(root)
    check_root(path, create=True)
    try:
        redactor = redactor_for(path)
    except JournalError:
        from agent_journal.capture.redact import default_redactor

        redactor = default_redactor()
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
    line = f"{when} {command} failed open: {exc.__class__.__name__}{where}: {message}"
    line = redactor.redact_text(line.replace("\r", "\\r").replace("\n", "\\n"))[:2000]
    append_private_log(path, LOG_NAME, line)


def _root_arg(argv: list[str]) -> str | None:
    for index, token in enumerate(argv):
        if token == "--root" and index + 1 < len(argv):
            return argv[index + 1] or None
        if token.startswith("--root="):
            return token.partition("=")[2] or None
    return None
