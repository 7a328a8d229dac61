"""Claude Code hook payloads and session transcripts, normalised into observation dicts.

Invariant: every dict this module returns has passed through the redactor, so no caller can
persist a Claude Code payload without redaction; and every dict has exactly the keys of
OBSERVATION_KEYS (plus `ts` and `endTs` for transcript replays), with None where a field does
not apply. Parsing is strict (see strictjson), input that is not what it claims to be raises
HookPayloadError or NotATranscriptError with a one-line message, and nothing here reads files:
callers pass text or lines.
"""

from __future__ import annotations

import json
import re

from agent_journal.capture.redact import default_redactor
from agent_journal.capture.strictjson import StrictJSONError, loads

# Annotations only: typing costs milliseconds to import and this module is on the hook path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

    from agent_journal.capture.redact import Redactor

__all__ = [
    "DEFAULT_WORKSPACE",
    "FILE_WRITE_TOOLS",
    "OBSERVATION_KEYS",
    "HookPayloadError",
    "NotATranscriptError",
    "hook_to_observation",
    "is_file_write",
    "main_input",
    "parse_hook_payload",
    "read_transcript",
    "safe_id",
    "sanitise_workspace_id",
]

OBSERVATION_KEYS = (
    "id", "kind", "session", "tool", "callId", "input", "output", "status", "durationMs",
    "exitCode", "text", "data",
)

FILE_WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})

DEFAULT_WORKSPACE = "default"
_MAX_ID_CHARS = 128
# model.MAX_ID_BYTES: an id names files with suffixes added, under the usual 255-byte cap.
_MAX_ID_BYTES = 128

# Hook events that describe one tool call; every other event is a session-level observation.
# PermissionDenied ends a call the auto-mode classifier refused: it never ran, and without
# this end its PreToolUse would stand as a call whose outcome is unknown.
_TOOL_STATUS = {"PreToolUse": "started", "PostToolUse": "ok", "PostToolUseFailure": "error",
                "PermissionDenied": "error"}
# The payload field each finishing event hands over as the call's output.
_OUTPUT_FIELD = {"PostToolUse": "tool_response", "PostToolUseFailure": "error",
                 "PermissionDenied": "reason"}
_SESSION_KINDS = {
    "SessionStart": "session_start",
    "PreCompact": "pre_compact",
    "Stop": "stop",
    "SessionEnd": "session_end",
}
# What the session said: the hook event, the payload field lifted into `text`, and the kind.
# The text is taken out of the payload so it is stored (and, when large, kept as an
# artifact) once.
PROMPT = "prompt"
ASSISTANT = "assistant_message"
SUBAGENT = "subagent_result"
COMPACT = "compact_summary"
SESSION_EVENT = "session_event"
SAID_KINDS = frozenset({PROMPT, ASSISTANT, SUBAGENT, COMPACT, SESSION_EVENT})
_SAID = {
    "UserPromptSubmit": ("prompt", PROMPT),
    "Stop": ("last_assistant_message", ASSISTANT),
    "SubagentStop": ("last_assistant_message", SUBAGENT),
    "PostCompact": ("compact_summary", COMPACT),
}
# Lifted into `input`/`output` (with the event's _OUTPUT_FIELD); the rest of a tool event's
# payload (cwd, permission_mode, prompt_id, is_interrupt, ...) is small context and stays
# in `data`.
_LIFTED = frozenset({"tool_input", "tool_response", "error"})
# Patterns are kept as strings and compiled by re's cache on first use, which keeps importing
# this module cheap for commands that never parse a hook payload.
# An event name becomes part of a kind (`hook_<name>`), so it must be a plain identifier.
_EVENT_NAME = r"[A-Za-z][A-Za-z0-9_]{0,63}"
# How Claude Code reports a failed shell command, in hook errors and transcript results alike.
_EXIT_CODE = r"Exit code (\d{1,9})\b"

# Input field(s) that best show what a call did, tried in order. An empty tuple means the tool
# has no such field (TodoWrite's list, ExitPlanMode's plan), so no fallback is attempted.
_MAIN_FIELDS: dict[str, tuple[str, ...]] = {
    "Bash": ("command",),
    "BashOutput": ("bash_id",),
    "KillShell": ("shell_id",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "NotebookRead": ("notebook_path",),
    "Grep": ("pattern",),
    "Glob": ("pattern",),
    "LS": ("path",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "ToolSearch": ("query",),
    "Task": ("description", "prompt"),
    "Agent": ("description", "prompt"),
    "TaskCreate": ("subject",),
    "TaskUpdate": ("taskId",),
    "TaskGet": ("taskId",),
    "SendMessage": ("to", "recipient"),
    "Skill": ("skill", "command"),
    "SlashCommand": ("command",),
    "TodoWrite": (),
    "ExitPlanMode": (),
}
# For tools not listed (MCP tools, tools newer than this table).
_FALLBACK_FIELDS = ("file_path", "path", "notebook_path", "command", "pattern", "url", "query")

# Transcript record fields worth keeping as context on each replayed call.
_TRANSCRIPT_CONTEXT = ("cwd", "gitBranch", "version", "isSidechain", "agentId")


class HookPayloadError(ValueError):
    """Hook stdin that is not a usable Claude Code hook payload; the message says why."""


class NotATranscriptError(ValueError):
    """Input that is not a Claude Code session transcript; the message says why."""


def parse_hook_payload(text: str | bytes) -> dict[str, Any]:
    """Parse hook stdin strictly; the result is a dict with a valid `hook_event_name`.

    Two flaws cost a character each instead of the whole observation: a lone surrogate (a
    JavaScript producer that cut a string inside a surrogate pair) and a byte that is not
    UTF-8 (a tool's raw output passed through by a wrapper); each becomes U+FFFD.
    """
    if isinstance(text, bytes | bytearray):
        raw = text
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
    try:
        payload = loads(text, lone_surrogates="replace")
    except StrictJSONError as exc:
        raise HookPayloadError(f"hook payload is not valid JSON: {exc}") from None
    _check_payload(payload)
    return payload  # type: ignore[no-any-return]


def _check_payload(payload: Any) -> None:
    if not isinstance(payload, dict):
        raise HookPayloadError(f"hook payload must be a JSON object, got {_json_type(payload)}")
    name = payload.get("hook_event_name")
    if name is None:
        raise HookPayloadError("hook payload has no hook_event_name")
    if not isinstance(name, str) or not _is_event_name(name):
        # Redacted before it is cut: a cut through a secret leaves a prefix no rule knows.
        shown = default_redactor().redact_text(repr(name))[:80]
        raise HookPayloadError(
            f"hook_event_name must be an identifier of at most 64 characters, got {shown}")


_EVENT_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _is_event_name(name: str) -> bool:
    # _EVENT_NAME without the regex: compiling it cost the hook a millisecond per call.
    return (0 < len(name) <= 64 and name[0].isascii() and name[0].isalpha()
            and all(ch in _EVENT_NAME_CHARS for ch in name))


def hook_to_observation(
    payload: dict[str, Any], redactor: Redactor | None = None
) -> dict[str, Any]:
    """Turn one hook payload into a redacted observation dict (keys: OBSERVATION_KEYS).

    Tool events (PreToolUse, PostToolUse, PostToolUseFailure) become kind `tool_call` with
    id and callId = tool_use_id, so the start and the end of one call share an id. Every other
    event becomes a session-level kind with id None (the caller assigns one) and the whole
    payload as `data`. `redactor` defaults to the built-in rules; pass one built with the
    user's configured patterns.
    """
    _check_payload(payload)
    event = payload["hook_event_name"]
    session = _str_or_none(payload.get("session_id"))
    observation: dict[str, Any] = dict.fromkeys(OBSERVATION_KEYS)
    observation["session"] = session
    status = _TOOL_STATUS.get(event)
    said = _SAID.get(event)
    if said is not None and isinstance(payload.get(said[0]), str):
        field, kind = said
        observation["kind"] = kind
        observation["text"] = payload[field]
        observation["data"] = {k: v for k, v in payload.items() if k != field}
    elif status is None:
        observation["kind"] = _SESSION_KINDS.get(event, f"hook_{event}")
        observation["data"] = dict(payload)
    else:
        call_id = _str_or_none(payload.get("tool_use_id"))
        lifted = _OUTPUT_FIELD.get(event)
        output = payload.get(lifted) if lifted is not None else None
        observation.update(
            id=call_id,
            kind="tool_call",
            tool=_str_or_none(payload.get("tool_name")),
            callId=call_id,
            input=payload.get("tool_input"),
            output=output,
            status=status,
            durationMs=_duration(payload.get("duration_ms")),
            data={k: v for k, v in payload.items() if k not in _LIFTED and k != lifted},
        )
        if event == "PostToolUse" and isinstance(output, dict):
            _response_outcome(output, observation)
        elif event == "PostToolUseFailure":
            observation["exitCode"] = _exit_code(output)
            if payload.get("is_interrupt") is True:
                observation["status"] = "cancelled"
    observation = (redactor or default_redactor()).redact_value(observation)
    if observation["text"] is not None:
        data = observation["data"]
        observation["id"] = said_id(observation["kind"], session, observation["text"],
                                    _str_or_none(data.get("agent_id")))
    return observation  # type: ignore[no-any-return]


def _response_outcome(response: dict[str, Any], observation: dict[str, Any]) -> None:
    """What a structured tool_response says of how the call ended, beyond "it returned".

    A shell cut short (Bash's `interrupted`: the user pressed Esc, or its timeout killed
    it) did not finish: `cancelled`. A response that reports an exit code (BashOutput on a
    background shell that has ended) gives it, and a non-zero one makes the call `error`,
    as PostToolUseFailure's "Exit code N" does for a foreground command.
    """
    if response.get("interrupted") is True:
        observation["status"] = "cancelled"
    code = response.get("exitCode", response.get("exit_code"))
    if isinstance(code, int) and not isinstance(code, bool) and -2**31 <= code < 2**32:
        observation["exitCode"] = code
        if code != 0 and observation["status"] == "ok":
            observation["status"] = "error"


def said_id(kind: str, session: str | None, text: str, agent: str | None = None,
            occurrence: int = 1) -> str:
    """The observation id of something the session said, from what was said.

    The hook and `import` derive it alike from the redacted text, the session and the
    agent, so a prompt captured live is recognised when its transcript is imported.
    `occurrence` numbers a text said again in the same session (the import counts them;
    the hook cannot, and folds a repeat into the first).
    """
    import hashlib  # only for what was said: a few events per turn, not per tool call

    raw = "\x1f".join((kind, session or "", agent or "", text))
    digest = hashlib.blake2s(raw.encode("utf-8", errors="surrogatepass"), digest_size=8)
    base = f"{kind}-{digest.hexdigest()}"
    return base if occurrence == 1 else f"{base}-{occurrence}"


def main_input(tool: str | None, tool_input: Any) -> str | None:
    """The one string that best shows what a call did (a command, a path, a pattern), or None.

    Pass the redacted input (as returned by hook_to_observation or read_transcript): this
    function returns a piece of it verbatim.
    """
    if not isinstance(tool_input, dict):
        return None
    fields = _MAIN_FIELDS.get(tool or "", _FALLBACK_FIELDS)
    for field in fields:
        value = tool_input.get(field)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def is_file_write(tool: str | None) -> bool:
    """True for the tools that change a file's content (Write, Edit, MultiEdit, NotebookEdit)."""
    return tool in FILE_WRITE_TOOLS


def read_transcript(
    lines: Iterable[str | bytes], redactor: Redactor | None = None, *,
    conversation: bool = False,
) -> Iterator[dict[str, Any]]:
    """Replay a transcript's tool calls as redacted observation dicts, one per tool_use.

    `lines` are the JSONL lines of a `~/.claude/projects/<dir>/<session>.jsonl` file (or a
    subagent's `<session>/subagents/agent-<id>.jsonl`), in file order. Each call is yielded
    when its tool_result arrives: status "error" when the result says is_error, else "ok";
    `ts` is the tool_use record's timestamp and `endTs` the tool_result record's. Calls with no
    result by the end (an interrupted or still-running session) follow, status "started",
    output and endTs None. A tool_use id met again (a resumed session repeating history) is
    replayed once.

    Raises NotATranscriptError at the first line that is not a transcript record, or at the end
    if no line carried a session id. A final line that is cut off mid-write (a live file) is
    ignored when earlier lines were valid. Observations yielded before an error are sound.

    With `conversation`, what the session said follows the calls (see `_Conversation`):
    prompts, assistant messages, compaction summaries, meta messages and subagent results,
    with id `said_id(...)`, `text`, and `data` the record's context.
    """
    redact = (redactor or default_redactor()).redact_value
    said = _Conversation() if conversation else None
    pending: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    recognised = False
    deferred_error: str | None = None
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if deferred_error is not None:
            raise NotATranscriptError(deferred_error)
        try:
            record = loads(raw, lone_surrogates="replace")
        except StrictJSONError as exc:
            message = f"not a Claude Code transcript: line {number} is not JSON ({exc})"
            complete = raw.endswith(b"\n") if isinstance(raw, bytes) else raw.endswith("\n")
            if recognised and not complete:
                # Possibly the last line of a file still being written: fail only if more
                # lines follow it.
                deferred_error = message
                continue
            raise NotATranscriptError(message) from None
        kind = _check_record(record, number)
        if isinstance(record.get("sessionId"), str) or (
            kind == "summary" and "leafUuid" in record
        ):
            recognised = True
        if said is not None:
            said.add(record, kind)
        if kind == "assistant":
            _collect_tool_uses(record, pending, done)
        elif kind == "user":
            for observation in _finish_tool_uses(record, pending, done):
                yield _redacted_call(redact, observation)
    if not recognised:
        raise NotATranscriptError(
            "not a Claude Code transcript: no record carries a sessionId "
            "(expected the JSONL of a ~/.claude/projects session)"
        )
    for call_id, started in pending.items():
        yield _redacted_call(redact, _call(call_id, started, None, None, "started", None))
    if said is not None:
        yield from said.observations(redact)


# Text blocks Claude Code adds to a user turn on its own (the file open in the IDE, system
# reminders): context, not the user's words.
_INJECTED_TAGS = ("ide_opened_file", "ide_selection", "system-reminder")
# The fixed notice Claude Code writes before a local command's output; it says nothing.
_CAVEAT = "<local-command-caveat>"
AWAY_SUMMARY = "away_summary"
_LOCAL_OUTPUT = "<local-command-stdout>"
_CLIENT_NOTES = (_LOCAL_OUTPUT, "<task-notification>", "<bash-notification>",
                 "<local-command-stderr>")


class _Conversation:
    """What a transcript's records said, and which branch of the conversation is current.

    A rewind (or an edited prompt) starts a new branch from an earlier record: records
    chain by `parentUuid` (across a compaction by `logicalParentUuid`, or, when that is
    missing or names no record of the file, to the last turn before the compaction
    boundary), and the current
    branch is the chain that ends at the last user or assistant record of the file.
    What was said off that branch is kept, marked `"branch": "abandoned"` in `data`.
    A sidechain's (subagent's) last assistant message is its result (`subagent_result`).
    Records without a timestamp (`summary` records) take the file's first timestamp.
    """

    def __init__(self) -> None:
        self.items: list[tuple[dict[str, Any], str, str]] = []
        self.parents: dict[str, str | None] = {}
        # compaction boundary -> the record written before it: its parent when its logical
        # parent names no record of the file (Claude Code does not always write that one)
        self.before_boundary: dict[str, str | None] = {}
        self.leaf: str | None = None
        self.previous: str | None = None
        self.first_ts: str | None = None
        self.session: str | None = None
        self.prompts: set[str] = set()  # the texts of the prompts recorded as turns

    def add(self, record: dict[str, Any], kind: str) -> None:
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            parent = record.get("parentUuid")
            if parent is None:
                parent = record.get("logicalParentUuid")
            if record.get("subtype") == "compact_boundary":
                # A compaction continues the conversation, never rewinds it: without its
                # logical parent it follows the last turn before it (not a `progress`
                # record, whose own parent may be the logical parent Claude Code never
                # wrote).
                self.before_boundary[uuid] = self.leaf or self.previous
                if parent is None:
                    parent = self.leaf or self.previous
            self.parents[uuid] = parent if isinstance(parent, str) else None
            self.previous = uuid
            if kind in ("user", "assistant"):
                self.leaf = uuid
        if self.first_ts is None and isinstance(record.get("timestamp"), str):
            self.first_ts = record["timestamp"]
        if self.session is None and isinstance(record.get("sessionId"), str):
            self.session = record["sessionId"]
        if kind == "summary" and isinstance(record.get("summary"), str):
            self.items.append((record, COMPACT, record["summary"]))
        elif kind == "assistant":
            text = _texts(record["message"].get("content"), user=False)
            if text:
                self.items.append((record, ASSISTANT, text))
        elif kind == "user":
            self._user(record)
        elif kind == "queue-operation" and record.get("operation") == "enqueue":
            self._queued(record)
        elif kind == "system" and record.get("subtype") == AWAY_SUMMARY and isinstance(
                record.get("content"), str) and record["content"].strip():
            # Claude Code's recap of the session, written when the user comes back to it.
            self.items.append((record, COMPACT, record["content"].strip()))

    def _user(self, record: dict[str, Any]) -> None:
        text = _texts(record["message"].get("content"), user=True)
        if not text or text.startswith(_CAVEAT):
            return
        command = None
        if text.startswith("<"):  # the client's own records; loaded only when one is here
            from agent_journal.capture.client_turns import slash_command

            command = slash_command(text)
        if record.get("isCompactSummary") is True:
            said = COMPACT
        elif command is not None:
            # `/clear` is something the session did; `/review 183` something the user asked.
            text, said = command, PROMPT if " " in command else SESSION_EVENT
        elif record.get("isMeta") is True or text.startswith(_CLIENT_NOTES):
            # Written into the user's turn by the client (a local command's output, a
            # background task's notification): not what the user asked.
            from agent_journal.capture.client_turns import local_output

            note = local_output(text)
            if note is None:
                return
            text, said = note, SESSION_EVENT
        else:
            said = PROMPT
        if said == PROMPT:
            self.prompts.add(text)
        self.items.append((record, said, text))

    def _queued(self, record: dict[str, Any]) -> None:
        """A prompt the user typed while the agent worked: Claude Code queues it and hands
        it over inside a tool result, so the queue is where its words are. A queued
        background task (a JSON object) and a prompt also recorded as a turn are not."""
        text = record.get("content")
        if not isinstance(text, str) or not text.strip() or text.lstrip().startswith("{"):
            return
        self.items.append((record, PROMPT, text.strip()))

    def current(self) -> set[str]:
        seen: set[str] = set()
        node = self.leaf
        while node is not None and node not in seen:
            seen.add(node)
            parent = self.parents.get(node)
            if parent is not None and parent not in self.parents:
                parent = self.before_boundary.get(node, parent)
            node = parent
        return seen

    def observations(self, redact: Any) -> Iterator[dict[str, Any]]:
        current = self.current()
        last_of_agent: dict[str, int] = {}
        for index, (record, kind, _) in enumerate(self.items):
            if kind == ASSISTANT and record.get("isSidechain") is True:
                last_of_agent[str(record.get("agentId"))] = index
        results = set(last_of_agent.values())
        seen: dict[tuple[str, str | None, str | None, str], int] = {}
        for index, (record, kind, text) in enumerate(self.items):
            if record.get("type") == "queue-operation" and (
                    text in self.prompts or text.startswith(_CLIENT_NOTES)):
                continue  # delivered as a turn too, or the client's own note
            if index in results:
                kind = SUBAGENT
            context = {key: record[key] for key in _TRANSCRIPT_CONTEXT if key in record}
            uuid = record.get("uuid")
            if isinstance(uuid, str) and uuid not in current and kind != COMPACT:
                context["branch"] = "abandoned"
            if record.get("type") == "summary":
                context["source"] = "summary"
            elif record.get("subtype") == AWAY_SUMMARY:
                context["source"] = AWAY_SUMMARY
            session = record.get("sessionId") if isinstance(record.get("sessionId"), str) \
                else self.session
            observation = dict.fromkeys(OBSERVATION_KEYS)
            observation.update(kind=kind, session=session, text=text, data=context,
                               ts=_str_or_none(record.get("timestamp")) or self.first_ts,
                               endTs=None)
            observation = redact(observation)
            agent = _str_or_none(context.get("agentId"))
            key = (kind, observation["session"], agent, observation["text"])
            seen[key] = seen.get(key, 0) + 1
            observation["id"] = said_id(kind, observation["session"], observation["text"],
                                        agent, seen[key])
            yield observation


def _texts(content: Any, *, user: bool) -> str:
    """The text blocks of a message joined by blank lines; a user's injected blocks
    (`_INJECTED_TAGS`) left out, images shown as `[image]`."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text = block["text"].strip()
            if user and _is_injected(text):
                continue
            if text:
                parts.append(text)
        elif kind == "image" and user:
            parts.append("[image]")
        elif kind == "tool_result":
            return ""  # a tool's result, not something the user said
    return "\n\n".join(parts) if any(p != "[image]" for p in parts) else ""


def _is_injected(text: str) -> bool:
    for tag in _INJECTED_TAGS:
        if text.startswith(f"<{tag}>") and text.endswith(f"</{tag}>"):
            return True
    return False


def _check_record(record: Any, number: int) -> str:
    if not isinstance(record, dict):
        raise NotATranscriptError(
            f"not a Claude Code transcript: line {number} is a JSON {_json_type(record)}, "
            "not an object"
        )
    kind = record.get("type")
    if not isinstance(kind, str):
        raise NotATranscriptError(
            f'not a Claude Code transcript: line {number} has no "type" field'
        )
    if kind in ("user", "assistant") and not (
        isinstance(record.get("message"), dict) and isinstance(record.get("sessionId"), str)
    ):
        raise NotATranscriptError(
            f"not a Claude Code transcript: the {kind} record on line {number} lacks "
            "sessionId or message"
        )
    return kind


def _content_blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = record["message"].get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _collect_tool_uses(
    record: dict[str, Any], pending: dict[str, dict[str, Any]], done: set[str]
) -> None:
    for block in _content_blocks(record):
        call_id = block.get("id")
        if block.get("type") != "tool_use" or not isinstance(call_id, str):
            continue
        if call_id in pending or call_id in done:
            continue
        pending[call_id] = {
            "record": record,
            "tool": _str_or_none(block.get("name")),
            "input": block.get("input"),
        }


def _finish_tool_uses(
    record: dict[str, Any], pending: dict[str, dict[str, Any]], done: set[str]
) -> Iterator[dict[str, Any]]:
    for block in _content_blocks(record):
        call_id = block.get("tool_use_id")
        if block.get("type") != "tool_result" or not isinstance(call_id, str):
            continue
        if call_id in done:
            continue
        done.add(call_id)
        # A result whose tool_use is not in this file (it was in the session this one
        # resumed) is still evidence; it is replayed with tool and input unknown.
        started = pending.pop(call_id, None) or {"record": record, "tool": None, "input": None}
        output = _flatten(block.get("content"))
        is_error = block.get("is_error") is True
        yield _call(
            call_id,
            started,
            record,
            output,
            "error" if is_error else "ok",
            _exit_code(output) if is_error else None,
        )


def _call(
    call_id: str,
    started: dict[str, Any],
    finished: dict[str, Any] | None,
    output: str | None,
    status: str,
    exit_code: int | None,
) -> dict[str, Any]:
    begun = started["record"]
    context = {key: begun[key] for key in _TRANSCRIPT_CONTEXT if key in begun}
    return {
        "id": call_id,
        "kind": "tool_call",
        "session": begun.get("sessionId") or (finished or {}).get("sessionId"),
        "tool": started["tool"],
        "callId": call_id,
        "input": started["input"],
        "output": output,
        "status": status,
        "durationMs": None,
        "exitCode": exit_code,
        "text": None,
        "data": context,
        "ts": _str_or_none(begun.get("timestamp")),
        "endTs": _str_or_none(finished.get("timestamp")) if finished is not None else None,
    }


# The fields of a replayed call that come from the transcript; the others (its keys, kind,
# status, exit code) are this module's own words and numbers, not the agent's text, like
# the keys and phases the import writes around them.
_FROM_TRANSCRIPT = ("id", "session", "tool", "input", "output", "data", "ts", "endTs")


def _redacted_call(redact: Any, call: dict[str, Any]) -> dict[str, Any]:
    """The call with what came from the transcript redacted: each string is redacted
    alone, by the same rules, so this is `redact(call)` (for any rule that leaves this
    module's own words alone: every built-in one) with fewer strings scanned. `callId`
    is the call's id, redacted with it."""
    parts = [call[key] for key in _FROM_TRANSCRIPT]
    redacted = redact(parts)
    if redacted is parts:
        return call
    out = {**call, **dict(zip(_FROM_TRANSCRIPT, redacted, strict=True))}
    out["callId"] = out["id"]
    return out


def _flatten(content: Any) -> str | None:
    """A tool_result's content as one string: text blocks verbatim, other blocks as a tag."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, sort_keys=True, ensure_ascii=False)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "tool_reference":
            parts.append(f"[tool_reference: {block.get('tool_name')}]")
        elif isinstance(block, dict):
            # Images and other binary blocks: their bytes are not text evidence.
            parts.append(f"[{block.get('type', 'block')}]")
        else:
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)


def sanitise_workspace_id(cwd: str | None) -> str:
    """The folder name of `cwd` made into a valid workspace id, or "default".

    The name is kept as far as it can be. Dropped: control and format characters (they could
    hide or spoof text), surrogates (they cannot be encoded), surrounding whitespace and
    leading dashes (an id must not read as a flag). The result is cut to 128 characters and
    128 UTF-8 bytes (model.MAX_ID_BYTES), which leaves room for the suffixes the journal
    adds to file names under the usual 255-byte cap.
    """
    if not cwd:
        return DEFAULT_WORKSPACE
    import unicodedata  # only here: the hook path calls this at most once per process

    name = re.split(r"[\\/]", cwd.rstrip("/\\"))[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    name = name.strip().lstrip("-").strip()
    name = name[:_MAX_ID_CHARS]
    while len(name.encode("utf-8")) > _MAX_ID_BYTES:
        name = name[:-1]
    name = name.rstrip()
    if name in ("", ".", ".."):
        return DEFAULT_WORKSPACE
    return name


def safe_id(raw: str) -> str:
    """`raw` itself when it is a valid journal id, else a valid id derived from it alone.

    Tool-use and session ids become observation ids and session names, which must pass
    model.validate_id (whose rules `_is_valid_id` repeats; this package imports nothing of
    the journal). An id that does not pass is not dropped: its path separators and control
    characters become `_`, surrounding blanks and leading dashes go, it is cut to fit, and
    `~` plus 12 hex digits of a hash of the original is appended, so two different raw ids
    never meet and the hook and `import` derive the same id from the same raw one.
    """
    if _is_valid_id(raw):
        return raw
    import hashlib  # only for ids that need it: rare, and off the common path

    digest = hashlib.blake2s(raw.encode("utf-8", errors="surrogatepass"), digest_size=6)
    base = "".join("_" if ch in "/\\" or _is_control(ch) else ch for ch in raw)
    base = base.encode("utf-8", errors="replace").decode("utf-8")  # lone surrogates -> ?
    base = base.strip().lstrip("-").strip()[: _MAX_ID_CHARS - 13]
    while len(base.encode("utf-8")) > _MAX_ID_BYTES - 13:
        base = base[:-1]
    base = base.rstrip() or "id"
    return f"{base}~{digest.hexdigest()}"


def _is_control(ch: str) -> bool:
    """C0 and C1 controls and DEL, which model.validate_id refuses."""
    return ord(ch) < 32 or 127 <= ord(ch) <= 159


def _is_valid_id(value: str) -> bool:
    if not value or len(value) > _MAX_ID_CHARS or value in (".", "..") or value[0] == "-":
        return False
    if value.strip() != value:
        return False
    try:
        if len(value.encode("utf-8")) > _MAX_ID_BYTES:
            return False
    except UnicodeEncodeError:
        return False
    return _UNSAFE_ID_CHAR.search(value) is None


# What `_is_valid_id` refuses anywhere in an id: a path separator, or a character
# `_is_control` names. One regex scan, not a Python test per character: every record of a
# transcript carries several ids.
_UNSAFE_ID_CHAR = re.compile("[/\\\\\x00-\x1f\x7f-\x9f]")


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _duration(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # The comparison is also false for NaN; the bound keeps round() away from infinity.
    return round(value) if 0 <= value <= 2**53 else None


def _exit_code(text: Any) -> int | None:
    if not isinstance(text, str):
        return None
    match = re.match(_EXIT_CODE, text)
    return int(match.group(1)) if match else None


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__
